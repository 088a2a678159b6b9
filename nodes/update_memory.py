"""`update_memory`: read chunk ``cursor``, let the memory policy turn each question's (question, memory, chunk)
into its new memory (`memory_policy`, by name from `policy_registry`), hold it to the memory budget, trace its
spans to the document (`provenance`), and advance the cursor; for one question or many (`questions`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sanitize import Sanitizer
from memagent_graph.documents.tokenization import Tokenizer
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


@dataclass(frozen=True)
class _MemoryStep:
    """The node's work around the policy call: `read` before it, `finish` (budget, trace, progress) after it."""

    documents: DocumentRegistry
    tokenizer: Tokenizer
    config: MemAgentConfig
    questions: Questions
    sanitizer: Sanitizer

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
    sanitizer = Sanitizer.for_reading(memagent_config.prompts, tokenizer)
    step = _MemoryStep(documents, tokenizer, memagent_config, questions, sanitizer)

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        read = step.read(state)
        return step.finish(state, read, policy.write(read.requests, read.options, config))

    async def async_(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        # tokenizer work may be blocking I/O (a server's /tokenize) and a policy without `awrite` is CPU-bound:
        # they run in worker threads, off the event loop
        read = await asyncio.to_thread(step.read, state)
        completions = await _awrite(policy, read, config)
        return await asyncio.to_thread(step.finish, state, read, completions)

    return GraphNode(sync, async_, name="update_memory")


async def _awrite(policy: MemoryPolicy, read: _Read, config: RunnableConfig) -> list[Completion]:
    """The policy's memory updates, off the event loop when the policy has no `awrite` (CPU-bound work)."""
    if policy.awrite is None:
        return await asyncio.to_thread(policy.write, read.requests, read.options, config)
    return await policy.awrite(read.requests, read.options, config)


def merge_segments(
    model: BaseChatModel,
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    memagent_config: MemAgentConfig,
    policy: MemoryPolicy | None = None,
    questions: Questions = ONE_QUESTION,
) -> GraphNode:
    """Build the node that merges parallel segments (`memagent_graph.nodes.segments`), one round per superstep:
    each question's segment memories, in document order, packed into chunk-sized sections, are read as one more
    pass by the same policy and prompt from an empty memory (the questions with a section left in one batched
    call); the merged memory's spans keep their segments' sources."""
    policy = policy or build_memory_policy(model, tokenizer, memagent_config)
    sanitizer = Sanitizer.for_reading(memagent_config.prompts, tokenizer)
    step = _MemoryStep(documents, tokenizer, memagent_config, questions, sanitizer)

    def plan(state: Mapping[str, Any]) -> tuple[MergeRound, dict[str, Any], _Read | None]:
        round_ = merge_round(state, questions, tokenizer, chunk_tokens=memagent_config.chunk_tokens)
        if not round_.active:
            return round_, {}, None
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
        view = merge_view(state, questions, round_)
        return round_, view, _Read(requests, chunk, call_options(memagent_config, budget="memory_tokens"))

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        round_, view, read = plan(state)
        done = None if read is None else step.finish(view, read, policy.write(read.requests, read.options, config))
        return merge_update(questions, round_, done, num_chunks=state["num_chunks"])

    async def async_(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        round_, view, read = await asyncio.to_thread(plan, state)
        done = None
        if read is not None:
            completions = await _awrite(policy, read, config)
            done = await asyncio.to_thread(step.finish, view, read, completions)
        return merge_update(questions, round_, done, num_chunks=state["num_chunks"])

    return GraphNode(sync, async_, name="merge_segments")


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
