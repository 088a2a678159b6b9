"""Lockstep reading: Q questions over one document, each chunk read once, all Q memories updated by one
batched model call per chunk (an engine such as vLLM or the embedded one runs them as one batch).

Same shape as the single-question graph: ``read_chunk -> update_memories -> ... -> final_answers``; the
state holds Q memories (a fixed-size list, never growing per step) instead of one.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, NotRequired

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sanitize import Sanitizer
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.nodes.answer_extraction import extract_answer
from memagent_graph.nodes.final_answer import answer_step
from memagent_graph.nodes.memory_budget import enforce_memory_budget
from memagent_graph.nodes.model_call import Completion, call_options, complete_batch, complete_batch_sync
from memagent_graph.nodes.read_checks import ReadChecks
from memagent_graph.nodes.read_chunk import read_chunk
from memagent_graph.nodes.update_memory import emit_progress, memory_step
from memagent_graph.state import RunSettings, StepRecord, Usage


class LockstepInput(TypedDict):
    """The questions and the id of one registered document."""

    questions: list[str]
    doc_id: str
    settings_key: NotRequired[str]


class LockstepState(LockstepInput, total=False):
    """One cursor, Q memories; ``last_steps`` holds the latest step of each question (Q records, replaced)."""

    fingerprint: str
    num_chunks: int
    cursor: int
    finished: bool
    chunk: dict[str, int]
    memories: list[str]
    started_at: float
    last_steps: list[StepRecord]
    usage: Usage
    answers: list[str]
    answer_sources: list[str]


def _reset_questions(state: Any) -> dict[str, Any]:
    questions = state["questions"]
    return {"memories": [""] * len(questions), "answers": [], "answer_sources": []}


def _total(usage: Usage | None, completions: list[Completion]) -> Usage:
    usage = usage or {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    return {
        "calls": usage["calls"] + len(completions),
        "prompt_tokens": usage["prompt_tokens"] + sum(c.prompt_tokens for c in completions),
        "completion_tokens": usage["completion_tokens"] + sum(c.completion_tokens for c in completions),
    }


def build_lockstep_graph(
    model: BaseChatModel,
    *,
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    config: MemAgentConfig | None = None,
    answer_model: BaseChatModel | None = None,
) -> StateGraph:
    """The uncompiled lockstep graph (input ``{"questions": [...], "doc_id": ...}``).

    Each batched call sends all Q requests at once; cap them at the client (`openai_compatible(max_concurrency=)`).
    """
    reading = config or MemAgentConfig()
    if reading.memory_policy != "generate":
        raise ConfigError(
            f"lockstep reading supports memory_policy='generate' only, not {reading.memory_policy!r}; "
            "ask the questions one at a time (MemAgent.batch) or use memory_policy='generate'"
        )
    sanitizer = Sanitizer.for_reading(reading.prompts, tokenizer)

    def update_prompts(state: LockstepState) -> list[str]:
        section = documents.chunked(state["doc_id"], tokenizer, reading.chunk_tokens).chunk_text(state["cursor"])
        section = sanitizer.clean(section).text
        return [
            reading.prompts.render_update(question=q, memory=m, section=section)
            for q, m in zip(state["questions"], state["memories"], strict=True)
        ]

    def after_update(state: LockstepState, completions: list[Completion], budget: int) -> dict[str, Any]:
        memories = [
            enforce_memory_budget(c.text, previous=previous, tokenizer=tokenizer, budget=budget, sanitizer=sanitizer)
            for c, previous in zip(completions, state["memories"], strict=True)
        ]
        emit_progress(state, memory_tokens=[m.tokens for m in memories], memory=[m.text for m in memories])
        return {
            "memories": [m.text for m in memories],
            "cursor": state["cursor"] + 1,
            "last_steps": [memory_step(state["cursor"], c, m) for c, m in zip(completions, memories, strict=True)],
            "usage": _total(state.get("usage"), completions),
        }

    def after_answer(state: LockstepState, completions: list[Completion], _budget: int) -> dict[str, Any]:
        extracted = [extract_answer(c.text) for c in completions]
        return {
            "answers": [answer for answer, _ in extracted],
            "answer_sources": [source for _, source in extracted],
            "finished": True,
            "last_steps": [
                answer_step(state["num_chunks"], c, m, tokenizer)
                for c, m in zip(completions, state["memories"], strict=True)
            ],
            "usage": _total(state.get("usage"), completions),
        }

    def answer_prompts(state: LockstepState) -> list[str]:
        return [
            reading.prompts.render_answer(question=q, memory=m)
            for q, m in zip(state["questions"], state["memories"], strict=True)
        ]

    def batched(name: str, chat_model: BaseChatModel, prompts_of: Any, budget: Any, after: Any) -> RunnableLambda:
        """A node that sends one prompt per question in one batched call, then folds the replies in."""

        def sync(state: LockstepState, config: RunnableConfig) -> dict[str, Any]:
            options = call_options(reading, budget=budget)
            prompts = prompts_of(state)
            completions = complete_batch_sync(chat_model, prompts, options, tokenizer=tokenizer, config=config)
            return after(state, completions, options.max_tokens)

        async def async_(state: LockstepState, config: RunnableConfig) -> dict[str, Any]:
            options = call_options(reading, budget=budget)
            prompts = await asyncio.to_thread(prompts_of, state)  # tokenizer work may be blocking I/O
            completions = await complete_batch(chat_model, prompts, options, tokenizer=tokenizer, config=config)
            return await asyncio.to_thread(after, state, completions, options.max_tokens)

        return RunnableLambda(sync, afunc=async_, name=name)

    def more_chunks(state: LockstepState) -> Literal["read_chunk", "final_answers"]:
        return "read_chunk" if state["cursor"] < state["num_chunks"] else "final_answers"

    builder = StateGraph(LockstepState, context_schema=RunSettings, input_schema=LockstepInput)
    builder.add_node(
        "read_chunk",
        read_chunk(
            documents,
            tokenizer,
            chunk_tokens=reading.chunk_tokens,
            checks=ReadChecks(reading, tokenizer),
            reset=_reset_questions,
        ),
    )
    builder.add_node(
        "update_memories", batched("update_memories", model, update_prompts, "memory_tokens", after_update)
    )
    builder.add_node(
        "final_answers", batched("final_answers", answer_model or model, answer_prompts, "answer_tokens", after_answer)
    )
    builder.add_edge(START, "read_chunk")
    builder.add_edge("read_chunk", "update_memories")
    builder.add_conditional_edges("update_memories", more_chunks, ["read_chunk", "final_answers"])
    builder.add_edge("final_answers", END)
    return builder
