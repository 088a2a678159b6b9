"""Supervised fine-tuning on rewarded traces (rejection sampling).

A teacher — any chat model, e.g. a large model behind an endpoint or `RuleMemoryModel` on synthetic tasks —
reads tasks through the same MemAgent graph while the policy's tokens of its replies are recorded
(`teacher_traces`); only episodes whose final answer verifies are kept (`rejection_sample`); the policy then
imitates them (`fine_tune`: mean token negative log-likelihood of every kept call, shuffled mini-batches).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel

from memagent_graph.agent import MemAgent
from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.sources import TextDocument
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rewards import get_reward
from memagent_graph.training.rollout.recording import RecordingChatModel
from memagent_graph.training.rollout.traces import TraceCall, TraceRecorder


def teacher_traces(
    teacher: BaseChatModel,
    rollout: Any,
    tokenizer: Tokenizer,
    tasks: Sequence[Task],
    *,
    reading: MemAgentConfig,
    reward: str = "memagent_verifier",
) -> list[TraceCall]:
    """Read each task with ``teacher`` writing the replies; every call recorded in the policy's tokens and
    scored with the episode's ``reward``."""
    recorder = TraceRecorder()
    model = RecordingChatModel(rollout=rollout, recorder=recorder, teacher=teacher)
    agent = MemAgent(model, config=reading, tokenizer=tokenizer)
    reward_fn = get_reward(reward)
    for index, task in enumerate(tasks):
        episode = f"teacher-{index}"
        metadata = {"episode_id": episode, "group_id": episode}
        agent.invoke(task.question, TextDocument(task.document), config={"metadata": metadata})
        recorder.score(episode, reward_fn(recorder.episode(episode)[-1].text, task.golds))
    return recorder.calls


def rejection_sample(calls: Sequence[TraceCall], *, min_reward: float = 1.0) -> list[TraceCall]:
    """The calls of episodes whose reward is at least ``min_reward``."""
    unscored = sorted({c.episode_id for c in calls if c.reward is None})
    if unscored:
        raise ConfigError(
            f"{len(unscored)} episodes have no reward (first: {unscored[0]!r}); rejection sampling needs "
            "scored traces, as `teacher_traces` and `memagent train rl --save-traces` write them"
        )
    return [c for c in calls if c.reward is not None and c.reward >= min_reward]


def writes_new_notes(calls: Sequence[TraceCall], *, nothing: str) -> list[bool]:
    """Per call: is it a memory update whose reply differs from the episode's previous update reply and from
    ``nothing`` (the teacher's "nothing found yet" note)?"""
    previous: dict[str, str] = {}
    flags = [False] * len(calls)
    for i in sorted(range(len(calls)), key=lambda i: (calls[i].episode_id, calls[i].call_index)):
        call = calls[i]
        if call.node == "update_memory":
            flags[i] = call.text not in (previous.get(call.episode_id), nothing)
            previous[call.episode_id] = call.text
    return flags


def oversample_new_notes(calls: Sequence[TraceCall], *, nothing: str, share: float, seed: int = 0) -> list[TraceCall]:
    """``calls`` plus seeded repeats of the calls that write new notes, until those are ``share`` of the result.

    Most chunks hold nothing relevant, so a policy imitating every call as recorded learns that the first
    token of a reply is almost always the start of ``nothing`` and never begins to copy a fact.
    """
    if not 0 < share < 1:
        raise ConfigError(f"the share of calls that write new notes must be between 0 and 1, not {share}")
    flags = writes_new_notes(calls, nothing=nothing)
    new = [call for call, flag in zip(calls, flags, strict=True) if flag]
    wanted = math.ceil(share * (len(calls) - len(new)) / (1 - share))
    if not new or wanted <= len(new):
        return list(calls)
    return list(calls) + random.Random(seed).choices(new, k=wanted - len(new))


class SupervisedLearner(Protocol):
    """What fine-tuning needs of a learner (`TorchLearner` has it): one supervised step on a batch."""

    def sft_update(self, calls: Sequence[TraceCall]) -> dict[str, float]:
        """One step on the mean negative log-likelihood of the calls' responses; returns its stats."""
        ...


def fine_tune(
    learner: SupervisedLearner,
    calls: Sequence[TraceCall],
    *,
    steps: int,
    batch_size: int = 16,
    seed: int = 0,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> list[dict[str, float]]:
    """``steps`` supervised steps on mini-batches of ``calls`` drawn in seeded shuffled passes."""
    if not calls:
        raise ConfigError("no traces to fine-tune on: every episode was rejected (lower --min-reward?)")
    rng, order, history = random.Random(seed), [], []
    for step in range(steps):
        if len(order) < batch_size:
            order += rng.sample(range(len(calls)), len(calls))
        batch, order = [calls[i] for i in order[:batch_size]], order[batch_size:]
        stats = learner.sft_update(batch)
        history.append(stats)
        if on_step is not None:
            on_step(step, stats)
    return history
