"""One RL step of the memory policy, in-process: rollouts through the graph → rewards → advantages → update.

For each question, ``group_size`` episodes are read by the *same* compiled MemAgent graph with the recording
policy; the final answer's reward is the episode's reward, the group advantage is copied to every call of the
episode (MemAgent's multi-conversation recipe), groups whose rewards are all equal are dropped (DAPO dynamic
sampling), and the learner takes one step on the kept calls, then the rollout backend gets the new weights.
This is the single-process step; the Ray trainer (rollout actors, object-store weight sync) is in progress.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from memagent_graph.agent import MemAgent
from memagent_graph.config import MemAgentConfig, RetrySettings
from memagent_graph.documents import TextDocument
from memagent_graph.errors import ConfigError
from memagent_graph.tokenization import Tokenizer
from memagent_graph.training.algorithms import broadcast_to_calls, get_advantage_estimator, informative_groups
from memagent_graph.training.learner import LearnerConfig, TorchLearner, sync_weights
from memagent_graph.training.recording import RecordingChatModel
from memagent_graph.training.rewards import get_reward
from memagent_graph.training.traces import TraceRecorder


class RLConfig(BaseModel):
    """What one RL step does (defaults follow MemAgent: Dr.GRPO advantages, the strict boxed verifier)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_size: int = Field(4, ge=2, description="Episodes per question.")
    advantage: str = "dr_grpo"
    reward: str = "memagent_verifier"
    dynamic_sampling: bool = True
    temperature: float = Field(1.0, gt=0.0)
    chunk_tokens: int = 512
    memory_tokens: int = 64
    answer_tokens: int = 32


@dataclass(frozen=True)
class Task:
    """A verifiable question about a document."""

    question: str
    document: str
    golds: list[str]


class StepRunner:
    """Runs RL steps with one rollout backend and one learner in this process; logs a JSON line per step."""

    def __init__(
        self,
        rollout: Any,
        learner: TorchLearner,
        tokenizer: Tokenizer,
        *,
        config: RLConfig | None = None,
        log_path: str | Path | None = None,
    ) -> None:
        self.rollout, self.learner, self.config = rollout, learner, config or RLConfig()
        if learner.config.temperature != self.config.temperature:
            raise ConfigError(
                f"the learner's temperature ({learner.config.temperature}) must be the rollouts' "
                f"({self.config.temperature}): log-probabilities are compared at one temperature"
            )
        self.recorder = TraceRecorder()
        reading = MemAgentConfig(
            chunk_tokens=self.config.chunk_tokens,
            memory_tokens=self.config.memory_tokens,
            answer_tokens=self.config.answer_tokens,
            temperature=self.config.temperature,
            top_p=1.0,  # the learner's log-probs are those of the full distribution
            retries=RetrySettings(max_attempts=1),  # an empty memory is an outcome to learn from, not a fault
        )
        model = RecordingChatModel(rollout=rollout, recorder=self.recorder)
        self.agent = MemAgent(model, config=reading, tokenizer=tokenizer)
        self.log_path = Path(log_path) if log_path is not None else None
        self.step_index = 0

    def step(self, tasks: Sequence[Task]) -> dict[str, float]:
        """Roll out ``group_size`` episodes per task, score, update, sync; return the step's metrics."""
        config, started = self.config, time.perf_counter()
        self.recorder.clear()
        episodes: list[tuple[str, int, Task]] = []
        for group, task in enumerate(tasks):
            for member in range(config.group_size):
                episode = f"s{self.step_index}-q{group}-e{member}"
                metadata = {"episode_id": episode, "group_id": f"s{self.step_index}-q{group}"}
                self.agent.invoke(task.question, TextDocument(task.document), config={"metadata": metadata})
                episodes.append((episode, group, task))
        rollout_s = time.perf_counter() - started
        reward_fn = get_reward(config.reward)
        traces = [self.recorder.episode(episode) for episode, _, _ in episodes]
        answers = [calls[-1].text for calls in traces]  # the final_answer call's reply
        rewards = torch.tensor(
            [reward_fn(answer, task.golds) for answer, (_, _, task) in zip(answers, episodes, strict=True)]
        )
        groups = torch.tensor([group for _, group, _ in episodes])
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
        version = sync_weights(self.learner, self.rollout) if calls else self.rollout.policy_version
        response_tokens = sum(len(c.response_ids) for episode in traces for c in episode)
        metrics = {
            "step": self.step_index,
            "reward": float(rewards.mean()),
            "accuracy": float((rewards >= 1.0).float().mean()),
            "kept_episodes": len(kept),
            "calls_trained": len(calls),
            "response_length": response_tokens / max(sum(len(e) for e in traces), 1),
            "policy_version": version,
            "rollout_tokens_per_s": response_tokens / rollout_s,
            "rollout_s": rollout_s,
            "learn_s": learn_s,
            "sync_s": time.perf_counter() - sync_started,
            **{key: value for key, value in stats.items() if key != "tokens"},
        }
        self.step_index += 1
        if self.log_path is not None:
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(metrics) + "\n")
        return metrics

    def save(self, folder: str | Path) -> Path:
        """Checkpoint everything the next step depends on: policy weights (safetensors), optimiser state,
        torch RNG, the rollout's sampling counter and the step index. `restore` continues exactly."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(self.learner.state_dict(), str(folder / "model.safetensors"))
        torch.save(
            {"optimizer": self.learner.optimizer.state_dict(), "torch_rng": torch.get_rng_state()},
            folder / "trainer_state.pt",
        )
        position = {
            "step": self.step_index,
            "policy_version": self.rollout.policy_version,
            "rollout_calls": self.rollout.sampled_calls,
            "config": self.config.model_dump(),
        }
        (folder / "position.json").write_text(json.dumps(position, indent=2) + "\n")
        return folder

    def restore(self, folder: str | Path) -> None:
        """Load a checkpoint written by `save` into this runner (same policy architecture and config)."""
        from safetensors.torch import load_file

        folder = Path(folder)
        position = json.loads((folder / "position.json").read_text())
        if position["config"] != self.config.model_dump():
            raise ConfigError(f"checkpoint {folder} was written with another RLConfig; resume with the same one")
        self.learner.model.load_state_dict(load_file(str(folder / "model.safetensors")))
        state = torch.load(folder / "trainer_state.pt", weights_only=False)
        self.learner.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        self.rollout.model.load_state_dict(self.learner.state_dict())
        self.rollout.policy_version = position["policy_version"]
        self.rollout.sampled_calls = position["rollout_calls"]
        self.step_index = position["step"]


def learner_for(rollout: Any, config: LearnerConfig | None = None) -> TorchLearner:
    """A learner on a copy of the rollout backend's model (they share nothing until a weight sync)."""
    return TorchLearner(copy.deepcopy(rollout.model), config=config, pad_id=rollout.tokenizer.pad_token_id)
