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
When every segment is done, ``merge_segments`` reads the memories and ``final_answer`` answers as usual.
Evidence goes through the merge: the merged memory's spans keep the document sources of the segment spans
they came from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from memagent_graph.documents.chunking import ChunkOrigin
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.graph_node import GraphNode
from memagent_graph.state import EMPTY_USAGE, Segment, Usage

MERGE = "merge"
"""The ``segment`` of the merge pass's progress events."""
_SHARED = ("question", "doc_id", "fingerprint", "num_chunks", "started_at")
"""The state every segment's read needs besides its own part."""


def split_segments(num_chunks: int, count: int) -> list[Segment]:
    """``num_chunks`` chunks as ``count`` contiguous segments of nearly equal length (their sizes differ by at
    most one; never more segments than chunks), each with an empty memory and no usage yet."""
    count = max(1, min(count, num_chunks))
    bounds = [index * num_chunks // count for index in range(count + 1)]
    return [
        Segment(index=i, start=a, end=b, cursor=a, memory="", evidence=[], usage=dict(EMPTY_USAGE))  # type: ignore[typeddict-item]
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


def read_segment(update: GraphNode) -> GraphNode:
    """Build the node that reads a segment's next chunk with ``update`` (the `update_memory` node) on a state
    made of the segment's own cursor, memory and evidence; it writes back that segment only."""

    def view(payload: Mapping[str, Any]) -> dict[str, Any]:
        segment = payload["segment"]
        return {
            **{key: payload[key] for key in _SHARED if key in payload},
            "cursor": segment["cursor"],
            "memory": segment["memory"],
            "evidence": segment["evidence"],
            "usage": segment["usage"],
            "segment": segment["index"],
        }

    def written(payload: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        kept = {key: result[key] for key in ("cursor", "memory", "evidence", "usage", "last_step")}
        return {"segments": [{**payload["segment"], **kept}]}

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


def merge_view(state: Mapping[str, Any]) -> dict[str, Any]:
    """The state the merge pass's memory updates read: an empty memory at the last chunk, every segment's
    evidence (what the merged spans are traced back to) and their usage added to the read's."""
    segments: Sequence[Segment] = state["segments"]
    usage: Usage = state["usage"]
    return {
        **state,
        "memory": "",
        "evidence": [span for segment in segments for span in segment["evidence"]],
        "usage": {key: usage[key] + sum(segment["usage"][key] for segment in segments) for key in usage},  # type: ignore[literal-required]
        "cursor": state["num_chunks"] - 1,
        "segment": MERGE,
    }


def merged(view: dict[str, Any], update: Mapping[str, Any]) -> None:
    """Take one merge step's update into ``view`` (its evidence apart: ``view``'s stays the segments')."""
    view.update(memory=update["memory"], usage=update["usage"], last_step=update["last_step"])
    view["merged_evidence"] = update["evidence"]


def merge_result(view: Mapping[str, Any]) -> dict[str, Any]:
    """The merge pass's state update: the merged memory and its evidence, the usage, the cursor at the end."""
    return {
        "memory": view["memory"],
        "evidence": view.get("merged_evidence", []),
        "usage": view["usage"],
        "cursor": view["num_chunks"],
        **({"last_step": view["last_step"]} if "last_step" in view else {}),
    }
