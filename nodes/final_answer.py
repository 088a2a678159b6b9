"""`final_answer`: one call that sees only the question and the final memory, then extracts the boxed answer.

With ``memory_policy="quote"`` the prompt is the quote policy's and the reply must be one whole line of the
memory (extractive: nothing is invented).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig, RunnableLambda

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.answer_extraction import extract_answer
from memagent_graph.nodes.model_call import CallOptions, Completion, add_usage, call_options, complete, complete_sync
from memagent_graph.state import MemAgentState, StepRecord


def final_answer(model: BaseChatModel, tokenizer: Tokenizer, *, memagent_config: MemAgentConfig) -> RunnableLambda:
    """Build the node that answers from the memory and records whether the answer was boxed."""
    config_ = memagent_config

    def prepare(state: MemAgentState) -> tuple[str, CallOptions]:
        memory, quote = state.get("memory", ""), config_.memory_policy == "quote"
        prompt = config_.prompts.render_answer(question=state["question"], memory=memory, quote=quote)
        options = call_options(config_, budget="answer_tokens")
        if quote and memory.strip():
            options = replace(options, quote_from=memory)
        return prompt, options

    def finish(state: MemAgentState, completion: Completion) -> dict[str, Any]:
        answer, source = extract_answer(completion.text)
        return {
            "answer": answer,
            "answer_source": source,
            "finished": True,
            "last_step": answer_step(state["num_chunks"], completion, state.get("memory", ""), tokenizer),
            "usage": add_usage(state.get("usage"), completion),
        }

    def sync(state: MemAgentState, config: RunnableConfig) -> dict[str, Any]:
        prompt, options = prepare(state)
        return finish(state, complete_sync(model, prompt, options, tokenizer=tokenizer, config=config))

    async def async_(state: MemAgentState, config: RunnableConfig) -> dict[str, Any]:
        # tokenizer work may be blocking I/O (a server's /tokenize): keep it off the event loop
        prompt, options = await asyncio.to_thread(prepare, state)
        completion = await complete(model, prompt, options, tokenizer=tokenizer, config=config)
        return await asyncio.to_thread(finish, state, completion)

    return RunnableLambda(sync, afunc=async_, name="final_answer")


def answer_step(num_chunks: int, completion: Completion, memory: str, tokenizer: Tokenizer) -> StepRecord:
    """The step record of the answer call (``answer_source``: boxed or the trimmed reply)."""
    return {
        "node": "final_answer",
        "chunk": num_chunks,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "finish_reason": completion.finish_reason,
        "retries": completion.attempts - 1,
        "memory_tokens": tokenizer.count(memory) if memory else 0,
        "truncated": False,
        "empty": not completion.text.strip(),
        "answer_source": extract_answer(completion.text)[1],
    }
