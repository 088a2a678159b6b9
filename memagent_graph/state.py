"""The graph's state, run context and result types. State stays JSON-small: no document text, no growing lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from memagent_graph.errors import ConfigError


class StepRecord(TypedDict):
    """What one model call did: written to state as the *last* step only (no history in state)."""

    node: Literal["update_memory", "final_answer"]
    chunk: int
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None
    retries: int
    memory_tokens: int
    truncated: bool
    empty: bool
    sanitized: NotRequired[int]
    answer_source: NotRequired[Literal["boxed", "reply"]]


class Source(TypedDict):
    """Where a memory span's text was found in the document: the chunk read, character and UTF-8 byte offsets
    in its part (the original document, e.g. the file), the 1-based line of the start, the part's ``source``
    metadata (a file's path) and the alignment score (0-100)."""

    doc_id: str
    source: str | None
    part: int
    chunk: int
    start: int
    end: int
    byte_start: int
    byte_end: int
    line: int
    score: float


class MemorySpan(TypedDict):
    """A sentence or clause of the current memory and its sources, best first (none: unsupported)."""

    text: str
    sources: list[Source]


class Usage(TypedDict):
    """Running totals over a run's model calls."""

    calls: int
    prompt_tokens: int
    completion_tokens: int


class Segment(TypedDict):
    """One segment's read: its chunks ``start``..``end`` (exclusive), the next one to read, its usage, and its
    own memory, evidence and latest step under the read's keys (one question: ``memory``, ``evidence``,
    ``last_step``; lockstep: ``memories``, ``evidences``, ``last_steps``)."""

    index: int
    start: int
    end: int
    cursor: int
    usage: Usage
    memory: NotRequired[str]
    evidence: NotRequired[list[MemorySpan]]
    last_step: NotRequired[StepRecord]
    memories: NotRequired[list[str]]
    evidences: NotRequired[list[list[MemorySpan]]]
    last_steps: NotRequired[list[StepRecord | None]]


def merge_segment_updates(current: list[Segment] | None, update: list[Segment]) -> list[Segment]:
    """The state's reducer: each round's segment writes replace the segments with their index."""
    by_index = {segment["index"]: segment for segment in current or []}
    by_index.update((segment["index"], segment) for segment in update)
    return [by_index[index] for index in sorted(by_index)]


class InputState(TypedDict):
    """What a caller passes in: the question, the id of a registered document, and (from `MemAgent`) a digest
    of the settings, so that a checkpointed read is only resumed with the settings it started with."""

    question: str
    doc_id: str
    settings_key: NotRequired[str]


class OutputState(TypedDict):
    """What a run returns."""

    answer: str
    answer_source: Literal["boxed", "reply"]
    memory: str
    num_chunks: int
    usage: Usage
    citations: list[Source]
    unsupported: list[str]


class MemAgentState(InputState, total=False):
    """The full state. ``cursor`` is the next chunk to read (never its text: nodes fetch it by ``doc_id``);
    ``finished`` marks a thread whose read is done (its next input starts a fresh read)."""

    fingerprint: str
    num_chunks: int
    cursor: int
    finished: bool
    memory: str
    evidence: list[MemorySpan]
    started_at: float
    last_step: StepRecord
    usage: Usage
    answer: str
    answer_source: Literal["boxed", "reply"]
    citations: list[Source]
    unsupported: list[str]
    segments: Annotated[list[Segment], merge_segment_updates]
    """The parallel segments' reads (``MemAgentConfig.segments`` > 1; `memagent_graph.nodes.segments`)."""
    merge_round: int
    merge_rounds: int
    """With segments: the merge pass's rounds done and to do (one superstep each)."""


class LockstepInput(TypedDict):
    """The input of a lockstep read (`build_memagent_graph(..., many_questions=True)`): the questions and the
    id of one registered document."""

    questions: list[str]
    doc_id: str
    settings_key: NotRequired[str]


class LockstepState(LockstepInput, total=False):
    """The state of a lockstep read: one cursor, Q memories; ``last_steps`` holds the latest step of each
    question (Q records, replaced at each step)."""

    fingerprint: str
    num_chunks: int
    cursor: int
    finished: bool
    memories: list[str]
    evidences: list[list[MemorySpan]]
    started_at: float
    last_steps: list[StepRecord | None]
    usage: Usage
    answers: list[str]
    answer_sources: list[str]
    citations: list[list[Source]]
    unsupported: list[list[str]]
    segments: Annotated[list[Segment], merge_segment_updates]
    merge_round: int
    merge_rounds: int


@dataclass(frozen=True)
class RunSettings:
    """Per-run overrides (the graph's context schema; JSON values only). None keeps the config's value."""

    memory_tokens: int | None = None
    answer_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    quote_temperature: float | None = None
    """The quote policy's draws (`MemAgentConfig.quote_temperature`): 0 makes a sampled policy greedy."""

    def __post_init__(self) -> None:
        for name in ("memory_tokens", "answer_tokens"):
            if (value := getattr(self, name)) is not None and value <= 0:
                raise ConfigError(f"RunSettings.{name} must be a positive number of tokens, not {value}")
        if self.temperature is not None and not 0 <= self.temperature <= 2:
            raise ConfigError(f"RunSettings.temperature must be between 0 and 2, not {self.temperature}")
        if self.quote_temperature is not None and self.quote_temperature < 0:
            raise ConfigError(f"RunSettings.quote_temperature must be 0 or more, not {self.quote_temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"RunSettings.top_p must be in (0, 1], not {self.top_p}")

    def value(self, name: str, default: float | int) -> float | int:
        """The override for ``name`` if set, else ``default`` (the config's value)."""
        override = getattr(self, name)
        return default if override is None else override


@dataclass(frozen=True)
class UnfinishedRead:
    """A checkpointed read that stopped before its answer (`MemAgent.unfinished`)."""

    thread_id: str
    question: str
    fingerprint: str
    settings_key: str
    chunks_done: int
    num_chunks: int


class MemAgentResult(BaseModel):
    """The outcome of reading one document for one question. ``citations``: where the memory that supports
    the answer was read, best first; ``unsupported``: memory spans found nowhere in what was read."""

    model_config = ConfigDict(frozen=True)

    answer: str
    answer_source: Literal["boxed", "reply"]
    memory: str
    num_chunks: int
    steps: list[StepRecord]
    usage: Usage
    elapsed_s: float
    thread_id: str
    citations: list[Source] = []
    unsupported: list[str] = []

    def to_json_dict(self) -> dict[str, Any]:
        """The result as plain JSON values (what ``memagent ask --json`` prints)."""
        return self.model_dump(mode="json")


EMPTY_USAGE: Usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
PROGRESS_EVENT = "memagent.progress"
