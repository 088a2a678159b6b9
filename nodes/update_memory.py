"""`update_memory`: show the model (question, memory, current chunk), keep its reply as the new bounded memory
(for each question of the read: `questions`), and trace each memory's spans to the document (`provenance`).

With ``memory_policy="quote"`` the model does not write the memory: it picks it from the previous notes and
the chunk's sentences (`memagent_graph.nodes.quote_memory`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sanitize import Sanitizer
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.graph_node import GraphNode
from memagent_graph.nodes.memory_budget import BudgetedMemory, enforce_memory_budget
from memagent_graph.nodes.model_call import (
    CallOptions,
    Completion,
    add_usage,
    call_options,
    complete_all,
    complete_all_sync,
)
from memagent_graph.nodes.provenance import ReadChunk, trace_memory
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.nodes.quote_memory import quote_update, require_scorer
from memagent_graph.nodes.read_chunk import check_same_document
from memagent_graph.state import PROGRESS_EVENT, StepRecord


def update_memory(
    model: BaseChatModel,
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    memagent_config: MemAgentConfig,
    questions: Questions = ONE_QUESTION,
) -> GraphNode:
    """Build the node that reads chunk ``cursor`` (after checking the document is the one the read began),
    rewrites each question's memory from it (one model call for one question, one batched call for many) and
    advances the cursor."""
    config_ = memagent_config
    sanitizer = Sanitizer.for_reading(config_.prompts, tokenizer)

    scorer = require_scorer(model) if config_.memory_policy == "quote" else None

    def read(state: Mapping[str, Any]) -> tuple[str, ReadChunk]:
        """The section the model is shown (sanitised) and the chunk as in the document."""
        doc, cursor = documents.chunked(state["doc_id"], tokenizer, config_.chunk_tokens), state["cursor"]
        check_same_document(state, doc)
        text = doc.chunk_text(cursor)
        source = doc.chunk_metadata(cursor).get("source")
        chunk = ReadChunk(
            state["doc_id"], cursor, text, doc.chunk_origin(cursor), None if source is None else str(source)
        )
        return sanitizer.clean(text).text, chunk

    def prompts_of(state: Mapping[str, Any], section: str) -> list[str]:
        return [
            config_.prompts.render_update(question=question, memory=memory, section=section)
            for question, memory in zip(questions.questions(state), questions.memories(state), strict=True)
        ]

    def quotes(state: Mapping[str, Any], section: str, options: CallOptions) -> list[Completion]:
        return [
            quote_update(
                scorer,
                question=question,
                previous=memory,
                section=section,
                tokenizer=tokenizer,
                budget=options.max_tokens,
                min_gain=config_.quote_min_gain,
            )
            for question, memory in zip(questions.questions(state), questions.memories(state), strict=True)
        ]

    def finish(
        state: Mapping[str, Any], chunk: ReadChunk, completions: list[Completion], options: CallOptions
    ) -> dict[str, Any]:
        cursor = state["cursor"]
        memories = [
            enforce_memory_budget(
                completion.text, previous=previous, tokenizer=tokenizer, budget=options.max_tokens, sanitizer=sanitizer
            )
            for completion, previous in zip(completions, questions.memories(state), strict=True)
        ]
        evidence = [
            trace_memory(memory.text, chunk=chunk, previous=previous, min_score=config_.evidence_min_score)
            for memory, previous in zip(memories, questions.evidence(state), strict=True)
        ]
        emit_progress(state, **questions.progress(memories))
        steps = [memory_step(cursor, c, m) for c, m in zip(completions, memories, strict=True)]
        return {
            **questions.memory_update(memories, steps, evidence),
            "cursor": cursor + 1,
            "usage": add_usage(state.get("usage"), completions),
        }

    def prepare(state: Mapping[str, Any]) -> tuple[ReadChunk, list[str]]:
        """The chunk read and each question's update prompt."""
        section, chunk = read(state)
        return chunk, prompts_of(state, section)

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        options = call_options(config_, budget="memory_tokens")
        if scorer is not None:
            section, chunk = read(state)
            return finish(state, chunk, quotes(state, section, options), options)
        chunk, prompts = prepare(state)
        completions = complete_all_sync(model, prompts, options, tokenizer=tokenizer, config=config)
        return finish(state, chunk, completions, options)

    async def async_(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        # tokenizer work may be blocking I/O (a server's /tokenize) and local scoring is CPU-bound: both run off
        # the event loop, in one hand-off to a thread before the model call and one after it
        if scorer is not None:
            return await asyncio.to_thread(sync, state, config)
        options = call_options(config_, budget="memory_tokens")
        chunk, prompts = await asyncio.to_thread(prepare, state)
        completions = await complete_all(model, prompts, options, tokenizer=tokenizer, config=config)
        return await asyncio.to_thread(finish, state, chunk, completions, options)

    return GraphNode(sync, async_, name="update_memory")


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
            **memory,
            "elapsed_s": round(time.time() - state.get("started_at", time.time()), 3),
        }
    )
