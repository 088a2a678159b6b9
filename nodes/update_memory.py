"""`update_memory`: show the model (question, memory, current chunk), keep its reply as the new bounded memory.

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
from memagent_graph.nodes.model_call import CallOptions, Completion, add_usage, call_options, complete, complete_sync
from memagent_graph.nodes.quote_memory import quote_update, require_scorer
from memagent_graph.state import PROGRESS_EVENT, MemAgentState, StepRecord


def update_memory(
    model: BaseChatModel, documents: DocumentRegistry, tokenizer: Tokenizer, *, memagent_config: MemAgentConfig
) -> RunnableLambda:
    """Build the node that rewrites the memory from chunk ``cursor`` and advances the cursor."""
    config_ = memagent_config
    sanitizer = Sanitizer.for_reading(config_.prompts, tokenizer)

    scorer = require_scorer(model) if config_.memory_policy == "quote" else None

    def section_of(state: MemAgentState) -> str:
        doc = documents.chunked(state["doc_id"], tokenizer, config_.chunk_tokens)
        return sanitizer.clean(doc.chunk_text(state["cursor"])).text

    def prompt_of(state: MemAgentState, section: str) -> str:
        return config_.prompts.render_update(
            question=state["question"], memory=state.get("memory", ""), section=section
        )

    def quote(state: MemAgentState, section: str, options: CallOptions) -> Completion:
        return quote_update(
            scorer,
            question=state["question"],
            previous=state.get("memory", ""),
            section=section,
            tokenizer=tokenizer,
            budget=options.max_tokens,
            min_gain=config_.quote_min_gain,
        )

    def finish(state: MemAgentState, completion: Completion, options: CallOptions) -> dict[str, Any]:
        cursor, previous = state["cursor"], state.get("memory", "")
        memory = enforce_memory_budget(
            completion.text, previous=previous, tokenizer=tokenizer, budget=options.max_tokens, sanitizer=sanitizer
        )
        emit_progress(state, memory_tokens=memory.tokens, memory=memory.text)
        return {
            "memory": memory.text,
            "cursor": cursor + 1,
            "last_step": memory_step(cursor, completion, memory),
            "usage": add_usage(state.get("usage"), completion),
        }

    def sync(state: MemAgentState, config: RunnableConfig) -> dict[str, Any]:
        section, options = section_of(state), call_options(config_, budget="memory_tokens")
        if scorer is not None:
            return finish(state, quote(state, section, options), options)
        completion = complete_sync(model, prompt_of(state, section), options, tokenizer=tokenizer, config=config)
        return finish(state, completion, options)

    async def async_(state: MemAgentState, config: RunnableConfig) -> dict[str, Any]:
        # tokenizer work may be blocking I/O (a server's /tokenize): keep it off the event loop
        section, options = await asyncio.to_thread(section_of, state), call_options(config_, budget="memory_tokens")
        if scorer is not None:  # local scoring is CPU-bound: off the event loop too
            return await asyncio.to_thread(lambda: finish(state, quote(state, section, options), options))
        prompt = await asyncio.to_thread(prompt_of, state, section)
        completion = await complete(model, prompt, options, tokenizer=tokenizer, config=config)
        return await asyncio.to_thread(finish, state, completion, options)

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
