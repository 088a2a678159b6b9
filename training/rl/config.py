"""`RLConfig`: everything a training run does, loaded from YAML (the ``learner:`` block is `LearnerConfig`,
the ``warm_start:`` block `WarmStart`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.precision import DeviceSetting
from memagent_graph.prompts import PromptSet
from memagent_graph.reading_options import ReadingOptions
from memagent_graph.training.data.tasks import Task, needle_tasks
from memagent_graph.training.rl.learner import LearnerConfig
from memagent_graph.training.rl.tiny_policy import TINY_PROMPTS
from memagent_graph.training.rollout.worker_pool import PLACEMENT_TIMEOUT_S
from memagent_graph.training.sft.warm_start import WarmStart

__all__ = ["LoraSettings", "RLConfig", "RolloutSettings", "TaskSettings", "WarmStart"]


class LoraSettings(BaseModel):
    """Train LoRA adapters (peft) instead of every weight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(8, ge=1)
    alpha: int = 16
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


_GENERATED = ("kind", "tokens", "value_kind", "haystack", "eval_seed")
_FROM_A_FILE = ("columns", "shuffle", "shuffle_buffer", "max_document_tokens", "truncation", "on_bad_row")


class TaskSettings(BaseModel):
    """Where questions come from: generated tasks, seeded (evaluation draws other seeds and, for the task
    suite's families, RULER's phrasings where training uses others), or the rows of a data file (``dataset``,
    with a held-out ``eval_dataset``; formats in `datasets.open_dataset`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dataset: str | None = Field(
        None, description="A data file of questions, answers and documents; replaces the generated tasks."
    )
    eval_dataset: str | None = Field(None, description="The held-out data file (its first eval_samples rows).")
    columns: dict[str, str] | None = Field(None, description="The file's names for question, answers, document…")
    shuffle: bool = Field(False, description="Shuffle the rows (a seeded buffer; MemAgent's recipe does not).")
    shuffle_buffer: int = Field(256, ge=1, description="Rows held for shuffling.")
    max_document_tokens: int | None = Field(None, ge=16, description="Longest document in policy tokens.")
    truncation: Literal["center", "none"] = Field(
        "none", description="center: keep a longer document's head and tail halves; none: it is a bad row."
    )
    on_bad_row: Literal["error", "skip"] = Field("error", description="skip: skip and count bad rows.")

    kind: str | list[str] = Field(
        "needle",
        description='"needle" (the tiny demo task), or task-suite families (e.g. realtext), mixed in turn.',
    )
    tokens: int = Field(200, ge=16, description="Document length in policy tokens.")
    value_kind: Literal["word-number", "word"] = "word"
    haystack: Literal["docs", "noise"] = "noise"
    seed: int = 0
    eval_seed: int = 1
    eval_samples: int = Field(20, ge=1)

    @model_validator(mode="after")
    def _one_source(self) -> TaskSettings:
        given = self.model_fields_set
        if self.dataset is not None:
            if generated := [name for name in _GENERATED if name in given]:
                raise ValueError(
                    "task.dataset replaces the generated tasks: drop "
                    + ", ".join(f"task.{name}" for name in generated)
                    + " (or drop task.dataset)"
                )
            if self.eval_dataset is None:
                raise ValueError("task.dataset needs task.eval_dataset: a held-out file to evaluate on")
        elif file_settings := [name for name in ("eval_dataset", *_FROM_A_FILE) if name in given]:
            raise ValueError(f"{', '.join(f'task.{n}' for n in file_settings)} apply to task.dataset: add one")
        if self.truncation == "center" and self.max_document_tokens is None:
            raise ValueError("task.truncation: center needs task.max_document_tokens")
        return self

    @field_validator("kind")
    @classmethod
    def _known_kinds(cls, kind: str | list[str]) -> str | list[str]:
        from memagent_graph.training.data.task_suite import get_task_kind

        if kind != "needle":
            for name in [kind] if isinstance(kind, str) else kind:
                get_task_kind(name)
        return kind

    def tasks(
        self, start: int, count: int, *, tokenizer: Tokenizer, chunk_tokens: int, evaluation: bool = False
    ) -> list[Task]:
        """Tasks ``start .. start+count`` of the training (or held-out evaluation) stream: the same on every
        run; task-suite families are taken in turn, and evaluation draws their validation split (realtext: Judges,
        never the test book)."""
        from memagent_graph.training.data.task_suite import suite_task

        seed = self.eval_seed if evaluation else self.seed
        if self.kind != "needle":
            kinds = [self.kind] if isinstance(self.kind, str) else self.kind
            split = "validation" if evaluation else "train"
            return [
                suite_task(kinds[i % len(kinds)], i, tokens=self.tokens, tokenizer=tokenizer, split=split, seed=seed)
                for i in range(start, start + count)
            ]
        return [
            needle_tasks(
                1,
                tokens=self.tokens,
                tokenizer=tokenizer,
                chunk_tokens=chunk_tokens,
                seed=seed * 1_000_003 + index,
                value_kind=self.value_kind,
                haystack=self.haystack,
            )[0]
            for index in range(start, start + count)
        ]


class RolloutSettings(BaseModel):
    """Which backend samples the episodes: transformers on CPU, or a vLLM engine per worker (one GPU each)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["transformers", "vllm"] = "transformers"
    engine_options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for vllm.LLM (dtype, max_model_len, ...)."
    )
    gpus_per_worker: float = Field(0.0, ge=0.0, description="Ray GPUs each rollout actor holds (vLLM: 1).")


class RLConfig(BaseModel):
    """Everything a training run does; load a YAML file with `RLConfig.from_yaml` (defaults follow MemAgent:
    Dr.GRPO advantages, the strict boxed verifier, clip-higher)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = Field(
        "tiny",
        description='A Hugging Face model folder, "embedded" (SmolLM2-135M-Instruct), or "tiny" (a tiny Qwen2).',
    )
    tiny_hidden_size: int = 128
    prompts: str = Field(
        "default", description='A bundled prompt set ("default", "section-first", "verbatim") or "tiny".'
    )
    group_size: int = Field(4, ge=2, description="Episodes per question.")
    questions_per_step: int = Field(4, ge=1)
    steps: int = Field(10, ge=0)
    advantage: str = "dr_grpo"
    reward: str = "memagent_verifier"
    dynamic_sampling: bool = True
    overlong_buffer: int = Field(
        0,
        ge=0,
        description="DAPO's soft overlong shaping (0: off): a call whose response runs into the last N tokens of "
        "its limit (memory_tokens for a memory update, answer_tokens for the answer) is trained with its "
        "episode's reward minus a penalty growing linearly to overlong_penalty_factor at the limit.",
    )
    overlong_penalty_factor: float = Field(
        1.0, ge=0.0, description="The overlong penalty of a response that reaches its limit (DAPO: 1.0)."
    )
    temperature: float = Field(1.0, gt=0.0)
    memory_policy: Literal["generate", "quote"] = Field(
        "generate",
        description="The policy trained: generate (the model writes its notes) or quote (its choices of which "
        "sentences to keep and which note answers, drawn at quote_temperature).",
    )
    quote_temperature: float = Field(1.0, gt=0.0, description="quote: the temperature rollouts draw choices at.")
    quote_min_gain: float | None = Field(
        None, description="quote: the stop option's value in nats (None: the reading default, 12)."
    )
    chunk_tokens: int = 512
    memory_tokens: int = 64
    answer_tokens: int = 32
    learner: LearnerConfig = LearnerConfig()
    lora: LoraSettings | None = None
    task: TaskSettings = TaskSettings()
    warm_start: WarmStart | None = None
    rollout_workers: int = Field(1, ge=1)
    rollout: RolloutSettings = RolloutSettings()
    ray: bool = Field(True, description="Rollout workers as Ray actors (False: in this process).")
    ray_address: str | None = Field(
        None, description='A running Ray cluster to join ("auto", or "ray://head:10001"); None starts a local one.'
    )
    placement_timeout_s: float = Field(
        PLACEMENT_TIMEOUT_S,
        gt=0.0,
        description="How long Ray may take to place the run's actors (learner ranks, rollout workers); a run it "
        "cannot place in time is refused with the resources asked for and those the cluster has.",
    )
    colocate: bool = Field(
        False,
        description="One GPU for everything: the vLLM rollout engine sleeps (weights to CPU memory, KV cache "
        "freed) while the learner steps, and wakes for the weight sync and the next rollouts.",
    )
    device: DeviceSetting = Field(
        "auto",
        description="Where the learner, the KL reference and transformers rollouts compute: cuda, cpu, or auto "
        "(cuda where torch sees a GPU). Precision follows it (learner.bf16_autocast: auto is bf16 on GPUs).",
    )
    eval_every: int = Field(0, ge=0, description="Greedy evaluation every N steps (0: only at the end).")
    checkpoint_every: int = Field(0, ge=0, description="Checkpoint every N steps (0: only at the end).")
    save_traces: bool = Field(False, description="Append each step's scored calls to traces.jsonl.")
    output_dir: str = "runs/memagent-rl"
    seed: int = 0

    @model_validator(mode="after")
    def _buffer_within_the_limits(self) -> RLConfig:
        if self.overlong_buffer and self.overlong_buffer >= min(self.memory_tokens, self.answer_tokens):
            raise ValueError(
                f"overlong_buffer {self.overlong_buffer} must be smaller than memory_tokens ({self.memory_tokens}) "
                f"and answer_tokens ({self.answer_tokens}): it is the last part of each call's limit"
            )
        return self

    @model_validator(mode="after")
    def _colocation_needs_vllm_and_one_learner(self) -> RLConfig:
        if self.colocate and (self.rollout.backend != "vllm" or self.learner.strategy != "single"):
            raise ValueError(
                "colocate: true shares one GPU between a vLLM engine and the learner: it needs rollout.backend: "
                "vllm and learner.strategy: single"
            )
        return self

    @field_validator("prompts")
    @classmethod
    def _known_prompts(cls, prompts: str) -> str:
        if prompts != "tiny":
            PromptSet.named(prompts)
        return prompts

    @classmethod
    def from_yaml(cls, path: str | Path) -> RLConfig:
        """Load a config file; `ConfigError` names the file and each wrong field."""
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as error:
            raise ConfigError(f"cannot read training config {path}: {error.strerror or error}") from None
        except yaml.YAMLError as error:
            raise ConfigError(f"training config {path} is not valid YAML: {error}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"training config {path} must be a mapping of settings, not {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise ConfigError(f"training config {path}: {problems}") from None

    def reading_options(self) -> ReadingOptions:
        """How episodes read, as every entry point states it: this config's budgets, prompts, memory policy
        and temperatures, top-p off, no retries (an empty memory is an outcome to learn from, not a fault)."""
        return ReadingOptions(
            memory_policy=self.memory_policy,
            quote_temperature=self.quote_temperature if self.memory_policy == "quote" else None,
            quote_min_gain=self.quote_min_gain,
            chunk_tokens=self.chunk_tokens,
            memory_tokens=self.memory_tokens,
            answer_tokens=self.answer_tokens,
            temperature=self.temperature,
            top_p=1.0,
            max_attempts=1,
            prompts=TINY_PROMPTS if self.prompts == "tiny" else self.prompts,
        )

    def reading(self) -> MemAgentConfig:
        """The `MemAgentConfig` episodes read with (`reading_options`)."""
        return self.reading_options().config()
