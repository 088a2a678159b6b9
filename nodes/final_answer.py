"""`final_answer`: one call that sees only the question and the final memory, then extracts the boxed answer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from memagent_graph.nodes.answer_extraction import extract_answer
from memagent_graph.nodes.model_call import add_usage, complete

from memagent_graph.config import MemAgentConfig
from memagent_graph.state import MemAgentState, RunSettings, StepRecord
from memagent_graph.tokenization import Tokenizer

AnswerNode = Callable[[MemAgentState, Runtime[RunSettings], RunnableConfig], Awaitable[dict[str, Any]]]


def final_answer(model: BaseChatModel, tokenizer: Tokenizer, *, memagent_config: MemAgentConfig) -> AnswerNode:
    """Build the node that answers from the memory and records whether the answer was boxed."""

    async def final_answer(
        state: MemAgentState, runtime: Runtime[RunSettings], config: RunnableConfig
    ) -> dict[str, Any]:
        settings = runtime.context or RunSettings()
        memory = state.get("memory", "")
        completion = await complete(
            model,
            memagent_config.prompts.render_answer(question=state["question"], memory=memory),
            max_tokens=int(settings.value("answer_tokens", memagent_config.answer_tokens)),
            temperature=settings.value("temperature", memagent_config.temperature),
            top_p=settings.value("top_p", memagent_config.top_p),
            tokenizer=tokenizer,
            config=config,
        )
        answer, source = extract_answer(completion.text)
        step: StepRecord = {
            "node": "final_answer",
            "chunk": state["num_chunks"],
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "latency_s": completion.latency_s,
            "finish_reason": completion.finish_reason,
            "memory_tokens": tokenizer.count(memory) if memory else 0,
            "truncated": False,
            "empty": not completion.text.strip(),
            "answer_source": source,
        }
        return {
            "answer": answer,
            "answer_source": source,
            "last_step": step,
            "usage": add_usage(state.get("usage"), completion),
        }

    return final_answer
