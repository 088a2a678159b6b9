"""One chat-model call with the run's token limit and sampling, timed and measured."""

from __future__ import annotations

import time
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from memagent_graph.errors import translate_model_error
from memagent_graph.state import EMPTY_USAGE, Usage
from memagent_graph.tokenization import Tokenizer


@dataclass(frozen=True)
class Completion:
    """A model reply and its measurements (token counts from the server when it reports them)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None


async def complete(
    model: BaseChatModel,
    prompt: str,
    *,
    max_tokens: int,
    temperature: float,
    top_p: float,
    tokenizer: Tokenizer,
    config: RunnableConfig | None = None,
) -> Completion:
    """Send ``prompt`` as one user message; client errors become `ModelError`s with a clear message."""
    bound = model.bind(max_tokens=max_tokens, temperature=temperature, top_p=top_p)
    started = time.perf_counter()
    try:
        message = await bound.ainvoke([HumanMessage(prompt)], config)
    except Exception as exc:
        translated = translate_model_error(exc, endpoint=_endpoint(model))
        if translated is None or translated is exc:
            raise
        raise translated from exc
    latency = time.perf_counter() - started
    text = message.text if isinstance(message, AIMessage) else str(message.content)
    usage = getattr(message, "usage_metadata", None) or {}
    metadata = getattr(message, "response_metadata", None) or {}
    return Completion(
        text=text,
        prompt_tokens=int(usage.get("input_tokens") or tokenizer.count(prompt)),
        completion_tokens=int(usage.get("output_tokens") or (tokenizer.count(text) if text else 0)),
        latency_s=round(latency, 4),
        finish_reason=metadata.get("finish_reason"),
    )


def _endpoint(model: BaseChatModel) -> str | None:
    base = getattr(model, "openai_api_base", None) or getattr(model, "base_url", None)
    return str(base) if base else None


def add_usage(usage: Usage | None, completion: Completion) -> Usage:
    """Running totals after one more call."""
    usage = usage or EMPTY_USAGE
    return {
        "calls": usage["calls"] + 1,
        "prompt_tokens": usage["prompt_tokens"] + completion.prompt_tokens,
        "completion_tokens": usage["completion_tokens"] + completion.completion_tokens,
    }
