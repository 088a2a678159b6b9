"""A rollout worker: reads episodes through the MemAgent graph with the recording policy, all at once.

The body of a Ray rollout actor (`ray.remote(RolloutWorker)`), and usable in-process as it is. Its episodes
read concurrently, one thread each, and their model calls are batched into one `generate` per round
(`BatchingRollout`). Weights arrive from the learner with `load_weights` (through Ray's object store when
remote). Each read is numbered as it begins, and the quote policy's draws are seeded from the worker's seed and
that number (`nodes.quote.memory.DRAW_SEED`): workers draw their own streams, concurrent reads do not share
one, and the count is part of the sampling state a checkpoint keeps.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from memagent_graph.agent import MemAgent
from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.sources import TextDocument
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote.memory import DRAW_SEED
from memagent_graph.state import RunSettings
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rollout.backends import TransformersRollout
from memagent_graph.training.rollout.batching import BatchingRollout
from memagent_graph.training.rollout.recording import RecordingChatModel
from memagent_graph.training.rollout.traces import Rollout, TraceCall, TraceRecorder
from memagent_graph.training.rollout.weights import with_lora


@dataclass(frozen=True)
class Episode:
    """One read to roll out: its ids and its task."""

    episode_id: str
    group_id: str
    task: Task


class RolloutWorker:
    """Rolls out episodes of one policy (see module doc) with a ``backend`` ("transformers" or "vllm", whose
    ``engine_options`` go to ``vllm.LLM``); ``lora`` wraps a transformers policy like the learner's; a
    transformers policy generates on ``device``."""

    def __init__(
        self,
        policy: str | Path,
        *,
        reading: MemAgentConfig,
        seed: int,
        lora: dict[str, Any] | None = None,
        backend: str = "transformers",
        engine_options: dict[str, Any] | None = None,
        threads: int | None = None,
        device: str = "cpu",
    ) -> None:
        if threads is not None:
            torch.set_num_threads(threads)
        self.seed = seed
        self.reads = 0  # reads begun so far: the next read's number
        self.rollout = BatchingRollout(
            _backend(backend, policy, seed=seed, lora=lora, options=engine_options or {}, device=device)
        )
        self.recorder = TraceRecorder()
        tokenizer = HuggingFaceTokenizer(Path(policy) / "tokenizer.json")
        model = RecordingChatModel(rollout=self.rollout, recorder=self.recorder)
        self.agent = MemAgent(model, config=reading, tokenizer=tokenizer)

    def run(self, episodes: Sequence[Episode], *, greedy: bool = False) -> list[Rollout]:
        """Read every episode (concurrently, batched); return each one's calls in call order and its answer."""
        self.recorder.clear()
        self.rollout.expect([episode.episode_id for episode in episodes])
        settings = RunSettings(temperature=0.0, quote_temperature=0.0) if greedy else None
        numbers = range(self.reads, self.reads + len(episodes))  # in the order given, not as the threads start
        self.reads += len(episodes)
        with ThreadPoolExecutor(max_workers=max(len(episodes), 1)) as pool:
            answers = list(pool.map(self._read, episodes, numbers, [settings] * len(episodes)))
        rollouts = []
        for episode, answer in zip(episodes, answers, strict=True):
            calls = self.recorder.episode(episode.episode_id)
            rollouts.append(Rollout(calls=calls, answer=_final_reply(calls, answer)))
        return rollouts

    def _read(self, episode: Episode, number: int, settings: RunSettings | None) -> str:
        metadata = {"episode_id": episode.episode_id, "group_id": episode.group_id, DRAW_SEED: f"{self.seed}/{number}"}
        with self.rollout.episode(episode.episode_id):
            return self.agent.invoke(
                episode.task.question,
                TextDocument(episode.task.document),
                settings=settings,
                config={"metadata": metadata},
            ).answer

    def load_weights(self, weights: dict[str, torch.Tensor], version: int) -> int:
        """Take the learner's trainable weights as policy ``version``."""
        self.rollout.backend.load_weights(weights)
        self.rollout.backend.policy_version = version
        return version

    def sleep(self) -> None:
        """Free the backend's GPU memory while the learner steps (`VLLMRollout.sleep`)."""
        self.rollout.backend.sleep()

    def wake(self, tags: Sequence[str] | None = None) -> None:
        """Take back what `sleep` freed (``tags``: vLLM's "weights" / "kv_cache"; None: all)."""
        self.rollout.backend.wake(tags)

    def sampling_state(self) -> dict[str, int]:
        """What a checkpoint needs to continue this worker's sampling exactly: the backend's generate calls (its
        token sampling's seeds), the policy version and the reads begun (the quote draws' seeds)."""
        return {
            "sampled_calls": self.rollout.sampled_calls,
            "policy_version": self.rollout.policy_version,
            "reads": self.reads,
        }

    def restore_sampling_state(self, state: dict[str, int]) -> None:
        """Continue from `sampling_state` (after `load_weights`)."""
        self.rollout.backend.sampled_calls = state["sampled_calls"]
        self.rollout.backend.policy_version = state["policy_version"]
        self.reads = state.get("reads", 0)  # 0: a checkpoint from before the reads were counted

    def pid(self) -> int:
        """The worker's process id (tests kill it to check that the trainer restarts it)."""
        return os.getpid()


def _final_reply(calls: list[TraceCall], answer: str) -> str:
    """What the reward scores: the answer call's reply as the model wrote it (MemAgent's verifier reads its
    ``\\boxed{}``), or the graph's ``answer`` when no model call wrote it (the quote policy's span)."""
    last = calls[-1] if calls else None
    if last is not None and last.node == "final_answer" and last.choice is None:
        return last.text
    return answer


def _backend(
    name: str,
    policy: str | Path,
    *,
    seed: int,
    lora: dict[str, Any] | None,
    options: dict[str, Any],
    device: str = "cpu",
) -> Any:
    """The rollout backend ``name`` over the ``policy`` folder."""
    if name == "transformers":
        backend = TransformersRollout(str(policy), seed=seed, device=device)
        if lora is not None:
            backend.model = with_lora(backend.model, **lora).eval()
        return backend
    if name != "vllm":
        raise ConfigError(f'unknown rollout backend {name!r}: use "transformers" or "vllm"')
    from memagent_graph.training.rollout.vllm_backend import VLLMRollout

    return VLLMRollout(policy, seed=seed, lora=lora, **options)
