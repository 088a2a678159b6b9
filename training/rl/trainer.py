"""The RL trainer: rollouts on Ray actors → verifiable rewards → group advantages → learner step → weight sync.

Each step takes the next ``questions_per_step`` tasks; every question is read ``group_size`` times through
the *same* compiled MemAgent graph by the recording policy on the rollout workers (concurrently, batched);
the final answer's reward is the episode's, its group advantage is copied to every call of the episode
(MemAgent's multi-conversation recipe), groups whose rewards are all equal are dropped (DAPO dynamic
sampling), the learner takes one step on the kept calls, and the workers get the new weights through Ray's
object store. Metrics go to ``metrics.jsonl`` and TensorBoard in the run folder; checkpoints hold the
weights (safetensors), optimiser, RNG, sampling counters and the data position, and resume exactly.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memagent_graph.config import MemAgentConfig, RetrySettings
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.prompts import PromptSet
from memagent_graph.training.data.tasks import Task, needle_tasks
from memagent_graph.training.rewards import get_reward
from memagent_graph.training.rl.algorithms import broadcast_to_calls, get_advantage_estimator, informative_groups
from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner
from memagent_graph.training.rl.tiny_policy import TINY_PROMPTS, build_tiny_policy
from memagent_graph.training.rollout.traces import TraceCall, write_jsonl
from memagent_graph.training.rollout.weights import load_trainable_weights, trainable_weights, with_lora
from memagent_graph.training.rollout.worker import Episode
from memagent_graph.training.rollout.worker_pool import WorkerPool


class LoraSettings(BaseModel):
    """Train LoRA adapters (peft) instead of every weight."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(8, ge=1)
    alpha: int = 16
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


class TaskSettings(BaseModel):
    """Where questions come from: generated tasks, seeded; evaluation draws other seeds (and, for the task
    suite's families, RULER's phrasings where training uses others)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str | list[str] = Field(
        "needle", description='"needle" (the tiny demo task), or task-suite families, mixed in turn.'
    )
    tokens: int = Field(200, ge=16, description="Document length in policy tokens.")
    value_kind: Literal["word-number", "word"] = "word"
    haystack: Literal["docs", "noise"] = "noise"
    seed: int = 0
    eval_seed: int = 1
    eval_samples: int = Field(20, ge=1)

    @field_validator("kind")
    @classmethod
    def _known_kinds(cls, kind: str | list[str]) -> str | list[str]:
        from memagent_graph.training.data.task_suite import get_task_kind

        if kind != "needle":
            for name in [kind] if isinstance(kind, str) else kind:
                get_task_kind(name)
        return kind


class RolloutSettings(BaseModel):
    """Which backend samples the episodes: transformers on CPU, or a vLLM engine per worker (one GPU each)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: Literal["transformers", "vllm"] = "transformers"
    engine_options: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments for vllm.LLM (dtype, max_model_len, ...)."
    )
    gpus_per_worker: float = Field(0.0, ge=0.0, description="Ray GPUs each rollout actor holds (vLLM: 1).")


class WarmStart(BaseModel):
    """Supervised steps on teacher traces before RL (rejection sampling: only verified episodes are kept)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: int = Field(256, ge=1)
    teacher: Literal["rule", "oracle"] = Field(
        "rule", description="rule: copies needle-like facts; oracle: knows each task's evidence and answer."
    )
    steps: int = Field(100, ge=0)
    lr: float = Field(3e-3, gt=0)
    batch_size: int = Field(16, ge=1)
    new_notes_share: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Repeat the calls that write new notes until they are this share of the SFT calls (most "
        "chunks hold nothing; without it a small policy learns never to write a fact down). None: as recorded.",
    )


class RLConfig(BaseModel):
    """Everything a training run does; load a YAML file with `RLConfig.from_yaml` (defaults follow MemAgent:
    Dr.GRPO advantages, the strict boxed verifier, clip-higher)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = Field(
        "tiny",
        description='A Hugging Face model folder, "embedded" (SmolLM2-135M-Instruct), or "tiny" (a tiny Qwen2).',
    )
    tiny_hidden_size: int = 128
    prompts: Literal["default", "tiny"] = "default"
    group_size: int = Field(4, ge=2, description="Episodes per question.")
    questions_per_step: int = Field(4, ge=1)
    steps: int = Field(10, ge=0)
    advantage: str = "dr_grpo"
    reward: str = "memagent_verifier"
    dynamic_sampling: bool = True
    temperature: float = Field(1.0, gt=0.0)
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
    eval_every: int = Field(0, ge=0, description="Greedy evaluation every N steps (0: only at the end).")
    checkpoint_every: int = Field(0, ge=0, description="Checkpoint every N steps (0: only at the end).")
    save_traces: bool = Field(False, description="Append each step's scored calls to traces.jsonl.")
    output_dir: str = "runs/memagent-rl"
    seed: int = 0

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

    def reading(self) -> MemAgentConfig:
        """How episodes read: this config's budgets and temperature, top-p off, no retries (an empty memory is
        an outcome to learn from, not a fault)."""
        return MemAgentConfig(
            chunk_tokens=self.chunk_tokens,
            memory_tokens=self.memory_tokens,
            answer_tokens=self.answer_tokens,
            temperature=self.temperature,
            top_p=1.0,
            retries=RetrySettings(max_attempts=1),
            prompts=TINY_PROMPTS if self.prompts == "tiny" else PromptSet(),
        )


class Trainer:
    """Runs `RLConfig`: `fit` for the whole run, or `step` / `evaluate` / `save` / `restore` one at a time."""

    def __init__(self, config: RLConfig, *, log: Callable[[str], None] | None = None) -> None:
        from transformers import AutoModelForCausalLM

        self.config, self.log = config, log or (lambda line: None)
        self.output_dir = Path(config.output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.policy = self._policy_folder()
        self.tokenizer = HuggingFaceTokenizer(self.policy / "tokenizer.json")
        torch.manual_seed(config.seed)
        model = AutoModelForCausalLM.from_pretrained(str(self.policy), dtype=torch.float32, local_files_only=True)
        # the KL reference is the policy as training starts, frozen (before LoRA: the base weights)
        reference = _frozen_copy(model) if config.learner.kl_coef > 0 else None
        lora = config.lora.model_dump() if config.lora else None
        if lora is not None:
            model = with_lora(model, **lora)
        self.learner = TorchLearner(
            model,
            config=config.learner,
            pad_id=model.config.pad_token_id or 0,
            temperature=config.temperature,
            reference=reference,
        )
        self.workers = WorkerPool(
            config.rollout_workers,
            use_ray=config.ray,
            policy=str(self.policy),
            reading=config.reading(),
            seed=config.seed,
            gpus=config.rollout.gpus_per_worker,
            lora=lora,
            backend=config.rollout.backend,
            engine_options=config.rollout.engine_options,
        )
        self.step_index, self.position, self.version = 0, 0, 0
        self.workers.sync(trainable_weights(model), self.version)
        self._tensorboard: Any = None

    def _policy_folder(self) -> Path:
        if self.config.policy == "embedded":
            from memagent_graph.integrations.models.embedded_files import ensure_local_model

            return ensure_local_model()
        if self.config.policy != "tiny":
            folder = Path(self.config.policy)
            if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
                raise ConfigError(
                    f"policy {folder} is not a Hugging Face model folder (config.json and tokenizer.json)"
                )
            return folder
        folder = self.output_dir / "base-policy"
        if not (folder / "config.json").is_file():
            build_tiny_policy(folder, seed=self.config.seed, hidden_size=self.config.tiny_hidden_size)
        return folder

    def tasks(self, start: int, count: int, *, evaluation: bool = False) -> list[Task]:
        """Tasks ``start .. start+count`` of the training (or evaluation) stream: the same on every run."""
        settings = self.config.task
        base = settings.eval_seed if evaluation else settings.seed
        if settings.kind != "needle":
            return self._suite_tasks(start, count, evaluation=evaluation)
        return [
            needle_tasks(
                1,
                tokens=settings.tokens,
                tokenizer=self.tokenizer,
                chunk_tokens=self.config.chunk_tokens,
                seed=base * 1_000_003 + index,
                value_kind=settings.value_kind,
                haystack=settings.haystack,
            )[0]
            for index in range(start, start + count)
        ]

    def _suite_tasks(self, start: int, count: int, *, evaluation: bool) -> list[Task]:
        """Task-suite tasks, the families taken in turn; evaluation draws the held-out split."""
        from memagent_graph.training.data.task_suite import suite_task

        settings = self.config.task
        kinds = [settings.kind] if isinstance(settings.kind, str) else settings.kind
        split, seed = ("eval", settings.eval_seed) if evaluation else ("train", settings.seed)
        return [
            suite_task(
                kinds[i % len(kinds)], i, tokens=settings.tokens, tokenizer=self.tokenizer, split=split, seed=seed
            )
            for i in range(start, start + count)
        ]

    def warm_start(self) -> dict[str, float]:
        """Supervised fine-tuning on a rule teacher's verified traces (`WarmStart`); returns the last loss."""
        from transformers import AutoTokenizer

        from memagent_graph.training.rollout.backends import TransformersRollout
        from memagent_graph.training.sft.oracle import OracleMemoryModel
        from memagent_graph.training.sft.rejection_sampling import (
            fine_tune,
            oversample_new_notes,
            rejection_sample,
            teacher_traces,
        )
        from memagent_graph.training.sft.teachers import RuleMemoryModel

        settings = self.config.warm_start
        if settings is None or settings.steps == 0:
            return {}
        tiny = self.config.prompts == "tiny"
        tasks = self.tasks(10_000_000, settings.tasks)  # far past any RL step's tasks
        if settings.teacher == "oracle":
            teacher = OracleMemoryModel(tasks=tasks, prompts=self.config.reading().prompts)
        elif tiny:
            teacher = RuleMemoryModel(nothing="none", answer_template="\\boxed{{{value}}}")
        else:
            teacher = RuleMemoryModel()
        tokens = TransformersRollout(self.learner.model, AutoTokenizer.from_pretrained(str(self.policy)))
        calls = teacher_traces(  # the teacher writes every reply: the policy only tokenizes them
            teacher,
            tokens,
            self.tokenizer,
            tasks,
            reading=self.config.reading(),
            reward=self.config.reward,
        )
        kept = rejection_sample(calls)
        sft = TorchLearner(
            self.learner.model,
            config=self.config.learner.model_copy(update={"lr": settings.lr, "kl_coef": 0.0}),
            pad_id=self.learner.pad_id,
            temperature=1.0,  # imitation fits the policy's own distribution, whatever the rollouts sample at
        )
        self.log(f"warm start: {len(kept)} of {len(calls)} teacher calls verified; {settings.steps} SFT steps")
        if settings.new_notes_share is not None:
            verified = len(kept)
            kept = oversample_new_notes(
                kept, nothing=teacher.nothing, share=settings.new_notes_share, seed=self.config.seed
            )
            self.log(f"warm start: {len(kept) - verified} repeats of the calls that write new notes")

        def report(step: int, stats: dict[str, float]) -> None:
            if (step + 1) % 10 == 0:
                self.log(f"warm start step {step + 1}/{settings.steps}: loss {stats['loss']:.4f}")

        history = fine_tune(
            sft, kept, steps=settings.steps, batch_size=settings.batch_size, seed=self.config.seed, on_step=report
        )
        self.version += 1
        self.workers.sync(trainable_weights(self.learner.model), self.version)
        return {"warm_start_loss": history[-1]["loss"], "warm_start_calls": float(len(kept))}

    def step(self) -> dict[str, float]:
        """One RL step on the next tasks; returns (and logs) its metrics."""
        config, started = self.config, time.perf_counter()
        tasks = self.tasks(self.position, config.questions_per_step)
        episodes = [
            Episode(f"s{self.step_index}-q{group}-e{member}", f"s{self.step_index}-q{group}", task)
            for group, task in enumerate(tasks)
            for member in range(config.group_size)
        ]
        traces = self.workers.run(episodes)
        rollout_s = time.perf_counter() - started
        rewards = torch.tensor(self._score(traces, episodes))
        groups = torch.tensor([index // config.group_size for index in range(len(episodes))])
        advantages = get_advantage_estimator(config.advantage)(rewards, groups)
        keep = informative_groups(rewards, groups) if config.dynamic_sampling else torch.ones_like(groups, dtype=bool)
        kept = [index for index in range(len(episodes)) if keep[index]]
        calls = [call for index in kept for call in traces[index]]
        call_episode = torch.tensor([index for index in kept for _ in traces[index]], dtype=torch.long)
        learn_started = time.perf_counter()
        stats: dict[str, float] = {}
        if calls:
            stats = self.learner.update(calls, broadcast_to_calls(advantages, call_episode).tolist())
        learn_s, sync_started = time.perf_counter() - learn_started, time.perf_counter()
        if calls:
            self.version += 1
            self.workers.sync(trainable_weights(self.learner.model), self.version)
        sync_s = time.perf_counter() - sync_started
        if config.save_traces:
            scored = [
                c.model_copy(update={"reward": float(rewards[i])}) for i in range(len(episodes)) for c in traces[i]
            ]
            write_jsonl(scored, self.output_dir / "traces.jsonl", append=True)
        response_tokens = sum(len(c.response_ids) for episode in traces for c in episode)
        metrics = {
            "step": self.step_index,
            "reward": float(rewards.mean()),
            "accuracy": float((rewards >= 1.0).float().mean()),
            "kept_episodes": len(kept),
            "episodes": len(episodes),
            "calls_trained": len(calls),
            "response_length": response_tokens / max(sum(len(episode) for episode in traces), 1),
            "policy_version": self.version,
            "rollout_tokens_per_s": response_tokens / rollout_s,
            "learner_tokens_per_s": stats.get("tokens", 0.0) / learn_s if calls else 0.0,
            "rollout_s": rollout_s,
            "learn_s": learn_s,
            "sync_s": sync_s,
            **{key: value for key, value in stats.items() if key != "tokens"},
        }
        self.step_index += 1
        self.position += config.questions_per_step
        self._record(metrics)
        return metrics

    def _score(self, traces: list[list[TraceCall]], episodes: list[Episode]) -> list[float]:
        """Each episode's reward: its final answer (the last call) against the task's golds."""
        reward_fn = get_reward(self.config.reward)
        return [reward_fn(calls[-1].text, episode.task.golds) for calls, episode in zip(traces, episodes, strict=True)]

    def evaluate(self) -> dict[str, float]:
        """Greedy accuracy on the evaluation tasks (never trained on)."""
        tasks = self.tasks(0, self.config.task.eval_samples, evaluation=True)
        episodes = [Episode(f"eval-{i}", f"eval-{i}", task) for i, task in enumerate(tasks)]
        scores = self._score(self.workers.run(episodes, greedy=True), episodes)
        metrics = {"step": self.step_index, "eval_reward": sum(scores) / len(scores)}
        self._record(metrics)
        return metrics

    def fit(
        self,
        on_step: Callable[[dict[str, float]], None] | None = None,
        on_eval: Callable[[dict[str, float]], None] | None = None,
    ) -> list[dict[str, float]]:
        """Warm start (on a fresh run), then RL steps up to ``steps`` with periodic evaluation and checkpoints;
        ends with an evaluation and a checkpoint in ``output_dir/checkpoint``."""
        config, history, evaluated_at = self.config, [], [-1]

        def evaluate() -> None:
            history.append(self.evaluate())
            evaluated_at[0] = self.step_index
            if on_eval is not None:
                on_eval(history[-1])

        if self.step_index == 0 and self.version == 0:
            self.warm_start()
            evaluate()
        while self.step_index < config.steps:
            history.append(self.step())
            if on_step is not None:
                on_step(history[-1])
            if config.eval_every and self.step_index % config.eval_every == 0 and self.step_index < config.steps:
                evaluate()
            if config.checkpoint_every and self.step_index % config.checkpoint_every == 0:
                self.save(self.output_dir / "checkpoint")
        if evaluated_at[0] != self.step_index:
            evaluate()
        self.save(self.output_dir / "checkpoint")
        if config.lora is not None:
            self.save_adapter(self.output_dir / "adapter")
        return history

    def save_adapter(self, folder: str | Path) -> Path:
        """The LoRA adapters as a peft folder (``adapter_config.json``, ``adapter_model.safetensors``): what
        the embedded engine and ``PeftModel.from_pretrained`` load."""
        if self.config.lora is None:
            raise ConfigError("this run trains every weight (no `lora:`): there is no adapter to save")
        model = self.learner.model
        if self.config.policy == "embedded":  # name the Hub model, not this machine's converted cache folder
            from memagent_graph.integrations.models.embedded_files import EMBEDDED_HUB_ID

            model.peft_config["default"].base_model_name_or_path = EMBEDDED_HUB_ID
        model.save_pretrained(str(folder))
        return Path(folder)

    def _record(self, metrics: dict[str, float]) -> None:
        with (self.output_dir / "metrics.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps(metrics) + "\n")
        if self._tensorboard is None:
            from torch.utils.tensorboard import SummaryWriter

            self._tensorboard = SummaryWriter(str(self.output_dir / "tensorboard"))
        for key, value in metrics.items():
            if key != "step":
                self._tensorboard.add_scalar(key, value, int(metrics["step"]))
        self._tensorboard.flush()

    def save(self, folder: str | Path) -> Path:
        """Checkpoint everything the next step depends on; `restore` continues exactly."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(trainable_weights(self.learner.model), str(folder / "policy.safetensors"))
        torch.save(
            {"optimizer": self.learner.optimizer.state_dict(), "torch_rng": torch.get_rng_state()},
            folder / "trainer_state.pt",
        )
        position = {
            "step": self.step_index,
            "data_position": self.position,
            "policy_version": self.version,
            "workers": self.workers.sampling_states(),
            "config": self.config.model_dump(mode="json", exclude={"steps", "output_dir"}),
        }
        (folder / "position.json").write_text(json.dumps(position, indent=2) + "\n")
        return folder

    def restore(self, folder: str | Path) -> None:
        """Load a checkpoint written by `save` (same policy and config, except ``steps`` and ``output_dir``)."""
        from safetensors.torch import load_file

        folder = Path(folder)
        if not (folder / "position.json").is_file():
            raise ConfigError(f"{folder} is not a training checkpoint (no position.json)")
        position = json.loads((folder / "position.json").read_text())
        if position["config"] != self.config.model_dump(mode="json", exclude={"steps", "output_dir"}):
            raise ConfigError(f"checkpoint {folder} was written with another config; resume with the same one")
        weights = load_file(str(folder / "policy.safetensors"))
        load_trainable_weights(self.learner.model, weights)
        state = torch.load(folder / "trainer_state.pt", weights_only=False)
        self.learner.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.step_index, self.position, self.version = (
            position["step"],
            position["data_position"],
            position["policy_version"],
        )
        self.workers.sync(weights, self.version)
        self.workers.restore_sampling_states(position["workers"])

    def close(self) -> None:
        """Stop the rollout workers and flush the logs."""
        self.workers.close()
        if self._tensorboard is not None:
            self._tensorboard.close()


def _frozen_copy(model: Any) -> Any:
    """A copy of ``model`` in eval mode with no trainable weights (the KL penalty's reference policy)."""
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference
