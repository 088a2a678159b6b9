"""`update_memory`: show the model (question, memory, current chunk), keep its reply as the new bounded memory
(for each question of the read: `questions`).

With ``memory_policy="quote"`` the model does not write the memory: it picks it from the previous notes and
the chunk's sentences (`memagent_graph.nodes.quote_memory`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.config import get_stream_writer

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sanitize import Sanitizer
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.memory_budget import BudgetedMemory, enforce_memory_budget
from memagent_graph.nodes.model_call import (
    CallOptions,
    Completion,
    add_usage,
    call_options,
    complete_all,
    complete_all_sync,
)
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.nodes.quote_memory import quote_update, require_scorer
from memagent_graph.state import PROGRESS_EVENT, StepRecord


def update_memory(
    model: BaseChatModel,
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    memagent_config: MemAgentConfig,
    questions: Questions = ONE_QUESTION,
) -> RunnableLambda:
    """Build the node that rewrites each question's memory from chunk ``cursor`` (one model call for one
    question, one batched call for many) and advances the cursor."""
    config_ = memagent_config
    sanitizer = Sanitizer.for_reading(config_.prompts, tokenizer)

    scorer = require_scorer(model) if config_.memory_policy == "quote" else None

    def section_of(state: Mapping[str, Any]) -> str:
        doc = documents.chunked(state["doc_id"], tokenizer, config_.chunk_tokens)
        return sanitizer.clean(doc.chunk_text(state["cursor"])).text

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

    def finish(state: Mapping[str, Any], completions: list[Completion], options: CallOptions) -> dict[str, Any]:
        cursor = state["cursor"]
        memories = [
            enforce_memory_budget(
                completion.text, previous=previous, tokenizer=tokenizer, budget=options.max_tokens, sanitizer=sanitizer
            )
            for completion, previous in zip(completions, questions.memories(state), strict=True)
        ]
        emit_progress(state, **questions.progress(memories))
        steps = [memory_step(cursor, c, m) for c, m in zip(completions, memories, strict=True)]
        return {
            **questions.memory_update(memories, steps),
            "cursor": cursor + 1,
            "usage": add_usage(state.get("usage"), completions),
        }

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        section, options = section_of(state), call_options(config_, budget="memory_tokens")
        if scorer is not None:
            return finish(state, quotes(state, section, options), options)
        prompts = prompts_of(state, section)
        return finish(state, complete_all_sync(model, prompts, options, tokenizer=tokenizer, config=config), options)

    async def async_(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        # tokenizer work may be blocking I/O (a server's /tokenize): keep it off the event loop
        section, options = await asyncio.to_thread(section_of, state), call_options(config_, budget="memory_tokens")
        if scorer is not None:  # local scoring is CPU-bound: off the event loop too
            return await asyncio.to_thread(lambda: finish(state, quotes(state, section, options), options))
        prompts = await asyncio.to_thread(prompts_of, state, section)
        completions = await complete_all(model, prompts, options, tokenizer=tokenizer, config=config)
        return await asyncio.to_thread(finish, state, completions, options)

    return RunnableLambda(sync, afunc=async_, name="update_memory")


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
