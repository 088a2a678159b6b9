"""Parallel segments (``MemAgentConfig(segments=P)``): the document is split into P contiguous segments read at
once, each by the same memory update with its own memory, then a merge pass reads the P memories, in document
order, as the chunks of one more pass; the answer is made from what it keeps.

MemAgent reads a document as one chain of calls (700 for 3.5M tokens at 5,000 per chunk); with P segments the
chain is about N/P chunks long plus the merge's few, so latency falls with P while every call's context stays
the same. The price is the dependency between chunks: a fact whose meaning depends on an earlier chunk in
another segment is judged without it (docs: "Parallel segments").

The graph: ``read_chunk`` opens the read and splits it (`split_segments`); each round, `segment_sends` sends
every unfinished segment to ``read_segment`` (LangGraph's `Send`: they run concurrently, bounded by the run's
``max_concurrency``), which reads its segment's next chunk with the `update_memory` node's own body; then
``join_segments`` ends the round (one checkpoint per round: a killed run goes on with each segment where it
stopped, and a segment that finished its chunk in the killed round is not re-read: LangGraph keeps its write).
When every segment is done, ``merge_segments`` reads the memories, one section per superstep (a killed run
goes on where the merge stopped), and ``final_answer`` answers as usual. Evidence goes through the merge: the
merged memory's spans keep the document sources of the segment spans they came from. A lockstep read (many
questions) gives each segment every question's memory and merges each question's memories in the same rounds
(one batched call per round for the questions with a section left).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from memagent_graph.documents.chunking import ChunkOrigin
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.graph_node import GraphNode
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.state import EMPTY_USAGE, MemorySpan, Segment, StepRecord, Usage

MERGE = "merge"
"""The ``segment`` of the merge pass's progress events."""
_SHARED = ("question", "questions", "doc_id", "fingerprint", "num_chunks", "started_at")
"""The state every segment's read needs besides its own part."""


def split_segments(num_chunks: int, count: int, *, empty: Mapping[str, Any]) -> list[Segment]:
    """``num_chunks`` chunks as ``count`` contiguous segments of nearly equal length (their sizes differ by at
    most one; never more segments than chunks), each with the ``empty`` memory keys and no usage yet."""
    count = max(1, min(count, num_chunks))
    bounds = [index * num_chunks // count for index in range(count + 1)]
    return [
        Segment(index=i, start=a, end=b, cursor=a, usage=dict(EMPTY_USAGE), **copy.deepcopy(dict(empty)))  # type: ignore[typeddict-item]
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]


def segment_sends(state: Mapping[str, Any]) -> list[Send] | str:
    """Route a round: send every unfinished segment to ``read_segment``, or go to ``merge_segments`` when all
    are done."""
    unfinished = [segment for segment in state["segments"] if segment["cursor"] < segment["end"]]
    if not unfinished:
        return "merge_segments"
    shared = {key: state[key] for key in _SHARED if key in state}
    return [Send("read_segment", {**shared, "segment": segment}) for segment in unfinished]


def read_segment(update: GraphNode, questions: Questions = ONE_QUESTION) -> GraphNode:
    """Build the node that reads a segment's next chunk with ``update`` (the `update_memory` node) on a state
    made of the segment's own cursor, memory and evidence; it writes back that segment only."""

    def view(payload: Mapping[str, Any]) -> dict[str, Any]:
        segment = payload["segment"]
        return {
            **{key: payload[key] for key in _SHARED if key in payload},
            **questions.memory_state(questions.memories(segment), questions.evidence(segment)),
            "cursor": segment["cursor"],
            "usage": segment["usage"],
            "segment": segment["index"],
        }

    def written(payload: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        kept = questions.memory_state(questions.memories(result), questions.evidence(result), questions.steps(result))
        return {"segments": [{**payload["segment"], **kept, "cursor": result["cursor"], "usage": result["usage"]}]}

    def sync(payload: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return written(payload, update.invoke(view(payload), config))

    async def async_(payload: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return written(payload, await update.ainvoke(view(payload), config))

    return GraphNode(sync, async_, name="read_segment")


def chunks_read(cursor: int, segments: Iterable[Segment]) -> int:
    """How many chunks a read has done: its ``cursor``, or with segments the chunks they read together."""
    return max(cursor, sum(segment["cursor"] - segment["start"] for segment in segments))


def merge_sections(memories: Sequence[str], tokenizer: Tokenizer, *, chunk_tokens: int) -> list[str]:
    """The non-empty ``memories``, in order, packed whole into sections of at most ``chunk_tokens`` tokens (a
    memory is always shorter than a chunk)."""
    sections: list[list[str]] = []
    used = chunk_tokens
    for memory in (m.strip() for m in memories):
        if not memory:
            continue
        tokens = tokenizer.count(memory) + 1
        if used + tokens > chunk_tokens:
            sections.append([])
            used = 0
        sections[-1].append(memory)
        used += tokens
    return ["\n".join(section) for section in sections]


MERGE_ORIGIN = ChunkOrigin(part=0, char=0, byte=0, line=1)
"""Where a merge section "starts": it is not document text, so nothing in it is a source (spans keep the
sources they had in the segments)."""


@dataclass(frozen=True)
class MergeRound:
    """Where the merge pass stands for a round: each question's sections (its segments' memories, in document
    order, packed into chunk-sized sections), memory and merged spans so far, the segments' spans (what the
    merged memory is traced back to) and the read's usage."""

    index: int
    sections: list[list[str]]
    memories: list[str]
    merged_evidence: list[list[MemorySpan]]
    segment_evidence: list[list[MemorySpan]]
    usage: Usage

    @property
    def rounds(self) -> int:
        """How many rounds the merge takes: the most sections any question has."""
        return max((len(sections) for sections in self.sections), default=0)

    @property
    def active(self) -> list[int]:
        """The questions with a section in this round."""
        return [q for q, sections in enumerate(self.sections) if self.index < len(sections)]


def merge_round(
    state: Mapping[str, Any], questions: Questions, tokenizer: Tokenizer, *, chunk_tokens: int
) -> MergeRound:
    """The merge pass's next round: the first starts from empty memories and adds the segments' usage to the
    read's; a later one goes on from the state (so a resumed run goes on where the merge stopped)."""
    segments: Sequence[Segment] = state["segments"]
    count = len(questions.questions(state))
    per_question = [[questions.memories(segment)[q] for segment in segments] for q in range(count)]
    index = state.get("merge_round", 0)
    usage: Usage = state["usage"]
    if index == 0:
        usage = {key: usage[key] + sum(segment["usage"][key] for segment in segments) for key in usage}  # type: ignore[literal-required]
    return MergeRound(
        index=index,
        sections=[merge_sections(memories, tokenizer, chunk_tokens=chunk_tokens) for memories in per_question],
        memories=questions.memories(state) if index else [""] * count,
        merged_evidence=questions.evidence(state) if index else [[] for _ in range(count)],
        segment_evidence=[
            [span for segment in segments for span in questions.evidence(segment)[q]] for q in range(count)
        ],
        usage=usage,
    )


def merge_view(state: Mapping[str, Any], questions: Questions, round_: MergeRound) -> dict[str, Any]:
    """The state a merge round's memory updates read: the round's questions with their memories so far, the
    segments' spans as their evidence, the read's usage, at the last chunk."""
    active = round_.active
    return {
        **{key: state[key] for key in _SHARED if key in state and key not in ("question", "questions")},
        **questions.memory_state([round_.memories[q] for q in active], [round_.segment_evidence[q] for q in active]),
        "usage": round_.usage,
        "cursor": state["num_chunks"] - 1,
        "segment": MERGE,
    }


def merge_update(
    questions: Questions, round_: MergeRound, update: Mapping[str, Any] | None, *, num_chunks: int
) -> dict[str, Any]:
    """A merge round's state update: its questions' new memories, spans and steps (from ``update``, the memory
    step of the round's questions; None when there was nothing to merge) over the rest's, and the round done."""
    memories, evidence = list(round_.memories), list(round_.merged_evidence)
    steps: list[StepRecord | None] = [None] * len(memories)
    usage = round_.usage
    if update is not None:
        new = zip(questions.memories(update), questions.evidence(update), questions.steps(update), strict=True)
        for q, (memory, spans, step) in zip(round_.active, new, strict=True):
            memories[q], evidence[q], steps[q] = memory, spans, step
        usage = update["usage"]
    return {
        **questions.memory_state(memories, evidence, steps),
        "usage": usage,
        "cursor": num_chunks,
        "merge_round": round_.index + 1 if update is not None else round_.index,
        "merge_rounds": round_.rounds,
    }


def merge_left(state: Mapping[str, Any]) -> str:
    """Route after a merge round: another round, or the answer."""
    return "merge_segments" if state["merge_round"] < state["merge_rounds"] else "final_answer"
