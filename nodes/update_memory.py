"""`update_memory`: read chunk ``cursor``, let the memory policy turn each question's (question, memory, chunk)
into its new memory (`memory_policy`, by name from `policy_registry`), hold it to the memory budget, trace its
spans to the document (`provenance`), and advance the cursor; for one question or many (`questions`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sanitize import Sanitizer
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.call_node import call_node
from memagent_graph.nodes.graph_node import GraphNode
from memagent_graph.nodes.memory_budget import BudgetedMemory, enforce_memory_budget
from memagent_graph.nodes.memory_policy import MemoryPolicy, MemoryRequest
from memagent_graph.nodes.model_call import CallOptions, Completion, add_usage, call_options
from memagent_graph.nodes.policy_registry import build_memory_policy
from memagent_graph.nodes.provenance import ReadChunk, trace_memory
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.nodes.read_chunk import check_same_document
from memagent_graph.nodes.segments import MERGE_ORIGIN, MergeRound, merge_round, merge_update, merge_view
from memagent_graph.state import PROGRESS_EVENT, StepRecord

READ_AHEAD_CHARS = 512
"""How much of the next chunk a memory request carries (`MemoryRequest.following`)."""


class _Read(NamedTuple):
    """What one step read: each question's request, the chunk as in the document, and the run's call options."""

    requests: list[MemoryRequest]
    chunk: ReadChunk
    options: CallOptions


class _MergePlan(NamedTuple):
    """A merge round of parallel segments (`segments.merge_round`), the state its questions read from, and the
    read of the questions with a section left (None: none has)."""

    round: MergeRound
    view: dict[str, Any]
    read: _Read | None


@dataclass(frozen=True)
class _MemoryStep:
    """The node's work around the policy call: `read` before it, `write` (or `awrite`) it, `finish` (budget, trace,
    progress) after it."""

    documents: DocumentRegistry
    tokenizer: Tokenizer
    config: MemAgentConfig
    questions: Questions
    policy: MemoryPolicy

    @cached_property
    def sanitizer(self) -> Sanitizer:
        """Defangs control tokens in the chunk and the memory (`Sanitizer.for_reading`)."""
        return Sanitizer.for_reading(self.config.prompts, self.tokenizer)

    def read(self, state: Mapping[str, Any]) -> _Read:
        """Chunk ``cursor`` (of the document the read began with), sanitised into each question's request."""
        doc = self.documents.chunked(state["doc_id"], self.tokenizer, self.config.chunk_tokens)
        check_same_document(state, doc)
        cursor = state["cursor"]
        text, source = doc.chunk_text(cursor), doc.chunk_metadata(cursor).get("source")
        chunk = ReadChunk(
            state["doc_id"], cursor, text, doc.chunk_origin(cursor), None if source is None else str(source)
        )
        section = self.sanitizer.clean(text).text
        following = (
            self.sanitizer.clean(doc.chunk_text(cursor + 1)[:READ_AHEAD_CHARS]).text
            if cursor + 1 < doc.num_chunks
            else ""
        )
        requests = [
            MemoryRequest(question, memory, section, following)
            for question, memory in zip(self.questions.questions(state), self.questions.memories(state), strict=True)
        ]
        return _Read(requests, chunk, call_options(self.config, budget="memory_tokens"))

    def write(self, read: _Read, config: RunnableConfig) -> list[Completion]:
        """The policy's new memories."""
        return self.policy.write(read.requests, read.options, config)

    async def awrite(self, read: _Read, config: RunnableConfig) -> list[Completion]:
        """Async `write`: in a worker thread when the policy has no `awrite` (CPU-bound work)."""
        if self.policy.awrite is None:
            return await asyncio.to_thread(self.write, read, config)
        return await self.policy.awrite(read.requests, read.options, config)

    def finish(self, state: Mapping[str, Any], read: _Read, completions: list[Completion]) -> dict[str, Any]:
        """Hold each new memory to the budget, trace it to the document, report progress; the state update."""
        memories = [
            enforce_memory_budget(
                completion.text,
                previous=previous,
                tokenizer=self.tokenizer,
                budget=read.options.max_tokens,
                sanitizer=self.sanitizer,
            )
            for completion, previous in zip(completions, self.questions.memories(state), strict=True)
        ]
        evidence = [
            trace_memory(memory.text, chunk=read.chunk, previous=previous, min_score=self.config.evidence_min_score)
            for memory, previous in zip(memories, self.questions.evidence(state), strict=True)
        ]
        emit_progress(state, **self.questions.progress(memories))
        steps = [memory_step(read.chunk.index, c, m) for c, m in zip(completions, memories, strict=True)]
        return {
            **self.questions.memory_state([memory.text for memory in memories], evidence, steps),
            "cursor": read.chunk.index + 1,
            "usage": add_usage(state.get("usage"), completions),
        }


def update_memory(
    model: BaseChatModel,
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    memagent_config: MemAgentConfig,
    policy: MemoryPolicy | None = None,
    questions: Questions = ONE_QUESTION,
) -> GraphNode:
    """Build the node that reads chunk ``cursor`` (after checking the document is the one the read began),
    rewrites each question's memory from it with ``policy`` (default: the one ``memagent_config`` names) and
    advances the cursor."""
    policy = policy or build_memory_policy(model, tokenizer, memagent_config)
    step = _MemoryStep(documents, tokenizer, memagent_config, questions, policy)
    return call_node("update_memory", prepare=step.read, call=step.write, acall=step.awrite, finish=step.finish)


def merge_segments(
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    memagent_config: MemAgentConfig,
    policy: MemoryPolicy,
    questions: Questions = ONE_QUESTION,
) -> GraphNode:
    """Build the node that merges parallel segments (`memagent_graph.nodes.segments`), one round per superstep:
    each question's segment memories, in document order, packed into chunk-sized sections, are read as one more
    pass by the same policy and prompt from an empty memory (the questions with a section left in one batched
    call); the merged memory's spans keep their segments' sources."""
    step = _MemoryStep(documents, tokenizer, memagent_config, questions, policy)

    def plan(state: Mapping[str, Any]) -> _MergePlan:
        round_ = merge_round(state, questions, tokenizer, chunk_tokens=memagent_config.chunk_tokens)
        if not round_.active:
            return _MergePlan(round_, {}, None)
        asked = questions.questions(state)
        requests = [
            MemoryRequest(
                asked[q],
                round_.memories[q],
                round_.sections[q][round_.index],
                "".join(round_.sections[q][round_.index + 1 : round_.index + 2])[:READ_AHEAD_CHARS],
            )
            for q in round_.active
        ]
        chunk = ReadChunk(state["doc_id"], state["num_chunks"] - 1, "", MERGE_ORIGIN, None)
        read = _Read(requests, chunk, call_options(memagent_config, budget="memory_tokens"))
        return _MergePlan(round_, merge_view(state, questions, round_), read)

    def write(planned: _MergePlan, config: RunnableConfig) -> list[Completion] | None:
        return None if planned.read is None else step.write(planned.read, config)

    async def awrite(planned: _MergePlan, config: RunnableConfig) -> list[Completion] | None:
        return None if planned.read is None else await step.awrite(planned.read, config)

    def finish(state: Mapping[str, Any], planned: _MergePlan, completions: list[Completion] | None) -> dict[str, Any]:
        done = None if planned.read is None else step.finish(planned.view, planned.read, completions or [])
        return merge_update(questions, planned.round, done, num_chunks=state["num_chunks"])

    return call_node("merge_segments", prepare=plan, call=write, acall=awrite, finish=finish)


def memory_step(cursor: int, completion: Completion, memory: BudgetedMemory) -> StepRecord:
    """The step record of one memory update."""
    return {
        "node": "update_memory",
        "chunk": cursor,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "finish_reason": completion.finish_reason,
        "retries": completion.attempts - 1,
        "memory_tokens": memory.tokens,
        "truncated": memory.truncated,
        "empty": memory.empty,
        "sanitized": memory.sanitized,
    }


def emit_progress(state: Mapping[str, Any], **memory: Any) -> None:
    """Send the ``memagent.progress`` custom stream event for the chunk just read."""
    get_stream_writer()(
        {
            "type": PROGRESS_EVENT,
            "doc_id": state["doc_id"],
            "chunk": state["cursor"] + 1,
            "total": state["num_chunks"],
            **({"segment": state["segment"]} if "segment" in state else {}),
            **memory,
            "elapsed_s": round(time.time() - state.get("started_at", time.time()), 3),
        }
    )
