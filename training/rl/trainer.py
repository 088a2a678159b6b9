"""The RL trainer: rollouts on Ray actors → verifiable rewards → group advantages → learner step → weight sync.

Each step takes the next ``questions_per_step`` tasks; every question is read ``group_size`` times through
the *same* compiled MemAgent graph by the recording policy on the rollout workers (concurrently, batched);
the final answer's reward is the episode's, its group advantage is copied to every call of the episode
(MemAgent's multi-conversation recipe) plus, with ``overlong_buffer``, the call's own DAPO overlong penalty
(`score_calls`), groups whose rewards are all equal are dropped (DAPO dynamic sampling), the learner (a
`Learner`: in this process, or a group of ranks) takes one step on the kept calls, and the workers get the
new weights through Ray's object store. Metrics go to ``metrics.jsonl`` and TensorBoard in the run folder;
checkpoints hold the weights (safetensors), optimiser, RNG, sampling counters and the data position, and
resume exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.precision import resolve_device
from memagent_graph.training.rewards import get_reward
from memagent_graph.training.rl.algorithms import (
    broadcast_to_calls,
    get_advantage_estimator,
    informative_groups,
    overlong_penalty,
)
from memagent_graph.training.rl.checkpoints import read_position, write_position
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.learner import Learner, TorchLearner, frozen_copy
from memagent_graph.training.rl.learner_group import LearnerGroup
from memagent_graph.training.rl.memory_plan import check_fits, memory_plan, policy_parameters
from memagent_graph.training.rl.task_source import task_source
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rollout.ray_cluster import ensure_ray
from memagent_graph.training.rollout.traces import Rollout, TraceCall, write_jsonl
from memagent_graph.training.rollout.weights import load_policy, with_lora
from memagent_graph.training.rollout.worker import Episode
from memagent_graph.training.rollout.worker_pool import WorkerPool


@dataclass(frozen=True)
class ScoredCalls:
    """What a step trains: the kept episodes' calls (episode by episode), one advantage per call, how many
    episodes were kept, and the mean overlong penalty over every call of the step (0 when shaping is off)."""

    calls: list[TraceCall]
    advantages: list[float]
    kept_episodes: int
    overlong_penalty: float


def overlong_penalties(calls: Sequence[TraceCall], config: RLConfig) -> torch.Tensor:
    """Each call's DAPO soft overlong penalty (`overlong_penalty`): its response's length against the limit it
    was sampled with; 0 with ``overlong_buffer: 0`` and for a call recorded without its limit."""
    if not config.overlong_buffer:
        return torch.zeros(len(calls))
    penalties = overlong_penalty(
        torch.tensor([len(call.response_ids) for call in calls]),
        max_tokens=torch.tensor([call.max_tokens or 0 for call in calls]),
        buffer_tokens=config.overlong_buffer,
        factor=config.overlong_penalty_factor,
    )
    return torch.where(torch.tensor([call.max_tokens is not None for call in calls]), penalties, 0.0)


def score_calls(traces: Sequence[Sequence[TraceCall]], rewards: torch.Tensor, config: RLConfig) -> ScoredCalls:
    """Credit for every call of a step's episodes (``group_size`` consecutive episodes per question).

    A call is trained with its episode's reward plus its own overlong penalty (MemAgent's multi-conversation
    setting with DAPO's shaping per call's response). The group baseline (and GRPO's scale) comes from the
    episode rewards alone, so a call's advantage is its episode's advantage plus its penalty, unscaled: the
    penalty falls on the call that ran long, not on the episode's other calls, and no group's reward std
    (0 in an all-equal group) magnifies it. Dynamic sampling keeps the groups whose episode rewards differ
    (DAPO filters on accuracy too), so length alone never makes a group worth training on.
    """
    groups = torch.tensor([index // config.group_size for index in range(len(traces))])
    advantages = get_advantage_estimator(config.advantage)(rewards, groups)
    keep = informative_groups(rewards, groups) if config.dynamic_sampling else torch.ones(len(traces), dtype=torch.bool)
    every = [call for episode in traces for call in episode]
    call_episode = torch.tensor([index for index, episode in enumerate(traces) for _ in episode], dtype=torch.long)
    penalties = overlong_penalties(every, config)
    trained = keep[call_episode]
    return ScoredCalls(
        calls=[call for call, kept in zip(every, trained.tolist(), strict=True) if kept],
        advantages=(broadcast_to_calls(advantages, call_episode) + penalties)[trained].tolist(),
        kept_episodes=int(keep.sum()),
        overlong_penalty=float(penalties.mean()) if every else 0.0,
    )


def rollout_gpus(config: RLConfig, *, device: str) -> float:
    """Ray GPUs per rollout actor: as configured, or with Ray on cuda a share of one GPU each (an actor that Ray
    gives no GPU sees none: Ray hides them through CUDA_VISIBLE_DEVICES)."""
    if config.rollout.gpus_per_worker or device != "cuda" or not config.ray:
        return config.rollout.gpus_per_worker
    return 1.0 / config.rollout_workers


class Trainer:
    """Runs `RLConfig`: `fit` for the whole run, or `step` / `evaluate` / `save` / `restore` one at a time."""

    def __init__(self, config: RLConfig, *, log: Callable[[str], None] | None = None) -> None:
        self.config, self.log = config, log or (lambda line: None)
        self.output_dir = Path(config.output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.device = resolve_device(config.device, what="device")
        self.policy = self._policy_folder()
        self.tokenizer = HuggingFaceTokenizer(self.policy / "tokenizer.json")
        self.source = task_source(config.task, tokenizer=self.tokenizer, chunk_tokens=config.chunk_tokens)
        self.source.check(config.questions_per_step)
        torch.manual_seed(config.seed)
        if config.ray_address is not None:
            ensure_ray(config.ray_address)
        lora = config.lora.model_dump() if config.lora else None
        if self.device == "cuda":
            self._plan_memory(lora)
        elif config.colocate:
            raise ConfigError("colocate: true shares a GPU between vLLM and the learner: it needs device: cuda")
        self.learner: Learner = (
            self._local_learner(lora) if config.learner.strategy == "single" else self._learner_group()
        )
        try:  # the rollout workers take the CPUs the learner ranks leave (`rollout_worker_cpus`)
            self.workers = WorkerPool(
                config.rollout_workers,
                use_ray=config.ray,
                policy=str(self.policy),
                reading=config.reading(),
                seed=config.seed,
                gpus=rollout_gpus(config, device=self.device),
                placement_timeout_s=config.placement_timeout_s,
                device=self.device if config.rollout.backend == "transformers" else "cpu",
                lora=lora,
                backend=config.rollout.backend,
                engine_options={
                    **config.rollout.engine_options,
                    **({"enable_sleep_mode": True} if config.colocate else {}),
                },
            )
        except BaseException:  # refused (or failed): the learner's ranks and their bundles go too
            self.learner.close()
            raise
        self.colocated = config.colocate
        self.step_index, self.position, self.version = 0, 0, 0
        self.workers.sync(self.learner.weights(), self.version)
        self._tensorboard: Any = None

    def _plan_memory(self, lora: dict[str, Any] | None) -> None:
        """Log what the run will keep on its GPU (`memory_plan`); `ConfigError` before loading anything when it
        cannot fit."""
        parameters, trainable = policy_parameters(self.policy, lora=lora)
        plan = memory_plan(self.config, parameters=parameters, trainable=trainable)
        plan = check_fits(plan, self.config, gpu_bytes=torch.cuda.get_device_properties(0).total_memory)
        for line in plan.lines():
            self.log(line)

    def _local_learner(self, lora: dict[str, Any] | None) -> TorchLearner:
        """The learner in this process (``learner.strategy: single``)."""

        config = self.config
        model = load_policy(self.policy, device=self.device)
        if config.learner.gradient_checkpointing:
            model.gradient_checkpointing_enable()
            model.enable_input_require_grads()  # LoRA freezes the embeddings: checkpointed blocks still need grads
        # the KL reference: the policy as training starts, frozen (before LoRA: the base weights); a warm start
        # moves it to the warm-started policy
        reference = frozen_copy(model) if config.learner.kl_coef > 0 else None
        if lora is not None:
            model = with_lora(model, **lora)
        return TorchLearner(
            model,
            config=config.learner,
            pad_id=model.config.pad_token_id or 0,
            temperature=config.temperature,
            reference=reference,
            device=self.device,
        )

    def _learner_group(self) -> LearnerGroup:
        """``learner.workers`` ranks on Ray (``learner.strategy: fsdp | ddp``)."""
        config = self.config
        return LearnerGroup(
            self.policy,
            config=config.learner,
            temperature=config.temperature,
            seed=config.seed,
            lora=config.lora.model_dump() if config.lora else None,
            device=self.device,
            placement_timeout_s=config.placement_timeout_s,
        )

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

    def warm_start(self) -> dict[str, float]:
        """Supervised fine-tuning on a teacher's verified traces (`WarmStart`) before RL; returns its stats."""
        from transformers import AutoTokenizer

        from memagent_graph.training.rollout.backends import ChatTokens
        from memagent_graph.training.sft.warm_start import warm_start

        settings = self.config.warm_start
        if settings is None or settings.steps == 0:
            return {}
        stats = warm_start(
            settings,
            learner=self.learner.supervised(lr=settings.lr),
            policy_tokens=ChatTokens(AutoTokenizer.from_pretrained(str(self.policy))),
            tokenizer=self.tokenizer,
            tasks=self.source.warm_start_tasks(settings.tasks),
            reading=self.config.reading(),
            reward=self.config.reward,
            tiny_prompts=self.config.prompts == "tiny",
            seed=self.config.seed,
            log=self.log,
        )
        self.learner.anchor_reference()  # a KL penalty holds RL near the policy it starts from, not the base
        self.version += 1
        self.workers.sync(self.learner.weights(), self.version)
        return stats

    def step(self) -> dict[str, float]:
        """One RL step on the next tasks; returns (and logs) its metrics."""
        config, started = self.config, time.perf_counter()
        tasks, next_position = self.source.take(self.position, config.questions_per_step)
        episodes = [
            Episode(f"s{self.step_index}-q{group}-e{member}", f"s{self.step_index}-q{group}", task)
            for group, task in enumerate(tasks)
            for member in range(config.group_size)
        ]
        rollouts = self.workers.run(episodes)
        traces = [rollout.calls for rollout in rollouts]
        rollout_s = time.perf_counter() - started
        rewards = torch.tensor(self._score(rollouts, episodes))
        scored = score_calls(traces, rewards, config)
        learn_started = time.perf_counter()
        stats: dict[str, float] = {}
        if self.colocated:  # the learner takes the GPU memory vLLM gives back while it sleeps
            self.workers.sleep()
        if scored.calls:
            stats = self.learner.update(scored.calls, scored.advantages)
        learn_s, sync_started = time.perf_counter() - learn_started, time.perf_counter()
        if self.colocated:
            self.workers.wake(["weights"])
        if scored.calls:
            self.version += 1
            self.workers.sync(self.learner.weights(), self.version)
        if self.colocated:
            self.workers.wake(["kv_cache"])
        sync_s = time.perf_counter() - sync_started
        if config.save_traces:
            rewarded = [
                c.model_copy(update={"reward": float(rewards[i])}) for i in range(len(episodes)) for c in traces[i]
            ]
            write_jsonl(rewarded, self.output_dir / "traces.jsonl", append=True)
        response_tokens = sum(len(c.response_ids) for episode in traces for c in episode)
        metrics = {
            "step": self.step_index,
            "reward": float(rewards.mean()),
            "accuracy": float((rewards >= 1.0).float().mean()),
            "kept_episodes": scored.kept_episodes,
            "episodes": len(episodes),
            "calls_trained": len(scored.calls),
            "response_length": response_tokens / max(sum(len(episode) for episode in traces), 1),
            "overlong_penalty": scored.overlong_penalty,
            "policy_version": self.version,
            "rollout_tokens_per_s": response_tokens / rollout_s,
            "learner_tokens_per_s": stats.get("tokens", 0.0) / learn_s if scored.calls else 0.0,
            "rollout_s": rollout_s,
            "learn_s": learn_s,
            "sync_s": sync_s,
            **{key: value for key, value in stats.items() if key != "tokens"},
        }
        self.step_index += 1
        self.position = next_position
        self._record(metrics)
        return metrics

    def _score(self, rollouts: list[Rollout], episodes: list[Episode]) -> list[float]:
        """Each episode's reward: the graph's final answer against the task's golds, by the task's own reward
        (a data file's ``data_source``) or the run's."""
        return [
            get_reward(episode.task.reward or self.config.reward)(rollout.answer, episode.task.golds)
            for rollout, episode in zip(rollouts, episodes, strict=True)
        ]

    def evaluate(self) -> dict[str, float]:
        """Greedy accuracy on the evaluation tasks (never trained on)."""
        tasks = self.source.held_out_tasks(self.config.task.eval_samples)
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
        """The LoRA adapters as a peft folder (`Learner.save_adapter`): what the embedded engine and
        ``PeftModel.from_pretrained`` load."""
        base_model = None
        if self.config.policy == "embedded":  # name the Hub model, not this machine's converted cache folder
            from memagent_graph.integrations.models.embedded_files import EMBEDDED_HUB_ID

            base_model = EMBEDDED_HUB_ID
        return self.learner.save_adapter(folder, base_model=base_model)

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
        """Checkpoint everything the next step depends on (`checkpoints`); `restore` continues exactly."""
        position = {
            "step": self.step_index,
            "data_position": self.position,
            "policy_version": self.version,
            "workers": self.workers.sampling_states(),
            "config": self._checkpointed_config(),
        }
        folder = write_position(folder, position)
        self.learner.save(folder / "learner")
        return folder

    def restore(self, folder: str | Path) -> None:
        """Load a checkpoint written by `save` (same policy and config, except ``steps``, ``output_dir`` and
        the learner's rank count: a sharded learner checkpoint is resharded onto this run's ranks)."""
        position = read_position(folder, config=self._checkpointed_config())
        self.learner.load(Path(folder) / "learner")
        self.step_index, self.position, self.version = (
            position["step"],
            position["data_position"],
            position["policy_version"],
        )
        self.workers.sync(self.learner.weights(), self.version)
        self.workers.restore_sampling_states(position["workers"])

    def _checkpointed_config(self) -> dict[str, Any]:
        return self.config.model_dump(
            mode="json",
            exclude={
                "steps": True,
                "output_dir": True,
                "device": True,
                "ray_address": True,
                "placement_timeout_s": True,
                "rollout": True,  # where and with which engine episodes are sampled, like the learner's layout
                "learner": {"workers", "strategy", "cpus_per_worker", "offload"},
            },
        )

    def close(self) -> None:
        """Stop the rollout workers and the learner ranks, and flush the logs."""
        self.workers.close()
        self.learner.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
