"""Traces: one record per model call of an episode, as the trainer needs them (token ids, never rebuilt text).

An *episode* is one read (every memory update and the answer); a *group* is the episodes of one question.
`TraceRecorder` collects calls from any number of concurrent episodes and exports JSON Lines or Parquet.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from memagent_graph.errors import EngineNotInstalledError


class ChoiceTrace(BaseModel):
    """A quote-policy draw (`memagent_graph.nodes.quote.choice`) in the policy's tokens: what the learner needs
    to recompute its log-probability. Each candidate's gain is log p(query | its scoring prompt) minus
    log p(query | the empty passage's prompt) (`query_likelihood`)."""

    model_config = ConfigDict(frozen=True)

    query_ids: list[int]
    empty_ids: list[int]
    """The empty passage's scoring prompt."""
    candidate_ids: list[list[int]]
    """Each candidate's scoring prompt."""
    order: list[int]
    """The candidates drawn, in order (indices into ``candidate_ids``)."""
    stopped: bool
    """The draw ended on the stop option (not by running out of candidates)."""
    stop_gain: float | None
    """The stop option's value (None: no stop option, one candidate drawn)."""
    temperature: float
    logprob: float
    """The draw's log-probability under the rollout policy."""


class TraceCall(BaseModel):
    """One model call: what went in and came out, in the policy's tokens; a quote-policy draw has no prompt or
    response tokens, its ``choice`` instead."""

    model_config = ConfigDict(frozen=True)

    episode_id: str
    group_id: str
    call_index: int
    node: str
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] | None
    """Log-probabilities of ``response_ids`` under the rollout policy (with its temperature), if known."""
    finish_reason: Literal["stop", "length"] | str | None
    max_tokens: int | None = None
    """The response's token limit (the node's budget: ``memory_tokens`` or ``answer_tokens``); None when not
    recorded (hand-built calls), and then overlong shaping leaves the call alone."""
    policy_version: int
    latency_s: float
    text: str
    reward: float | None = None
    """The episode's reward, once scored (the same on every call of the episode)."""
    choice: ChoiceTrace | None = None
    """The quote policy's draw, when this call is one."""


class Rollout(BaseModel):
    """One episode as a rollout worker read it: its calls in call order and the graph's final answer (what the
    reward scores; a quote-policy answer is a span of the memory that no call wrote)."""

    model_config = ConfigDict(frozen=True)

    calls: list[TraceCall]
    answer: str


class TraceRecorder:
    """Thread-safe collector of `TraceCall`s; numbers each episode's calls in the order they happen."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[TraceCall] = []
        self._next_index: defaultdict[str, int] = defaultdict(int)
        self._rewards: dict[str, float] = {}

    def record(self, **fields: object) -> TraceCall:
        """Add one call (every `TraceCall` field except ``call_index``, which is assigned here)."""
        with self._lock:
            episode = str(fields["episode_id"])
            call = TraceCall(call_index=self._next_index[episode], **fields)
            self._next_index[episode] += 1
            self._calls.append(call)
        return call

    @property
    def calls(self) -> list[TraceCall]:
        with self._lock:
            rewards = self._rewards
            return [
                c.model_copy(update={"reward": rewards[c.episode_id]}) if c.episode_id in rewards else c
                for c in self._calls
            ]

    def episode(self, episode_id: str) -> list[TraceCall]:
        """The calls of one episode, in call order."""
        return sorted((c for c in self.calls if c.episode_id == episode_id), key=lambda c: c.call_index)

    def score(self, episode_id: str, reward: float) -> None:
        """Attach the episode's reward to each of its calls (as `calls` returns them)."""
        with self._lock:
            self._rewards[episode_id] = reward

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()
            self._next_index.clear()
            self._rewards.clear()


def write_jsonl(calls: Iterable[TraceCall], path: str | Path, *, append: bool = False) -> Path:
    """Write (or append) one JSON object per call."""
    path = Path(path)
    with path.open("a" if append else "w", encoding="utf-8") as out:
        for call in calls:
            out.write(call.model_dump_json() + "\n")
    return path


def read_jsonl(path: str | Path) -> list[TraceCall]:
    """Read calls written by `write_jsonl`."""
    with Path(path).open(encoding="utf-8") as lines:
        return [TraceCall.model_validate_json(line) for line in lines if line.strip()]


def write_parquet(calls: Iterable[TraceCall], path: str | Path) -> Path:
    """Write the calls as a Parquet table (one row per call; token ids as list columns). Needs pyarrow."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise EngineNotInstalledError('Parquet export needs pyarrow: pip install "memagent-graph[train]"') from None
    rows = [call.model_dump() for call in calls]
    pq.write_table(pa.Table.from_pylist(rows), str(path))
    return Path(path)


def read_parquet(path: str | Path) -> list[TraceCall]:
    """Read calls written by `write_parquet`."""
    import pyarrow.parquet as pq

    return [TraceCall.model_validate(row) for row in pq.read_table(str(path)).to_pylist()]
