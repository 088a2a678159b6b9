"""`update_memory`: show the model (question, memory, current chunk), keep its reply as the new bounded memory."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from memagent_graph.nodes.memory_budget import enforce_memory_budget
from memagent_graph.nodes.model_call import add_usage, complete

from memagent_graph.config import MemAgentConfig
from memagent_graph.registry import DocumentRegistry
from memagent_graph.state import PROGRESS_EVENT, MemAgentState, RunSettings, StepRecord
from memagent_graph.tokenization import Tokenizer

UpdateNode = Callable[[MemAgentState, Runtime[RunSettings], RunnableConfig], Awaitable[dict[str, Any]]]


def update_memory(
    model: BaseChatModel, documents: DocumentRegistry, tokenizer: Tokenizer, *, memagent_config: MemAgentConfig
) -> UpdateNode:
    """Build the node that rewrites the memory from chunk ``cursor`` and advances the cursor."""

    async def update_memory(
        state: MemAgentState, runtime: Runtime[RunSettings], config: RunnableConfig
    ) -> dict[str, Any]:
        settings = runtime.context or RunSettings()
        cursor = state["cursor"]
        doc = documents.chunked(state["doc_id"], tokenizer, memagent_config.chunk_tokens)
        previous = state.get("memory", "")
        budget = int(settings.value("memory_tokens", memagent_config.memory_tokens))
        prompt = memagent_config.prompts.render_update(
            question=state["question"], memory=previous, section=doc.chunk_text(cursor)
        )
        completion = await complete(
            model,
            prompt,
            max_tokens=budget,
            temperature=settings.value("temperature", memagent_config.temperature),
            top_p=settings.value("top_p", memagent_config.top_p),
            tokenizer=tokenizer,
            config=config,
        )
        memory = enforce_memory_budget(completion.text, previous=previous, tokenizer=tokenizer, budget=budget)
        step: StepRecord = {
            "node": "update_memory",
            "chunk": cursor,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "latency_s": completion.latency_s,
            "finish_reason": completion.finish_reason,
            "memory_tokens": memory.tokens,
            "truncated": memory.truncated,
            "empty": memory.empty,
        }
        runtime.stream_writer(
            {
                "type": PROGRESS_EVENT,
                "doc_id": state["doc_id"],
                "chunk": cursor + 1,
                "total": state["num_chunks"],
                "memory_tokens": memory.tokens,
                "memory": memory.text,
                "elapsed_s": round(time.time() - state.get("started_at", time.time()), 3),
            }
        )
        return {
            "memory": memory.text,
            "cursor": cursor + 1,
            "last_step": step,
            "usage": add_usage(state.get("usage"), completion),
        }

    return update_memory
