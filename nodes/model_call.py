"""One chat-model call with the run's token limit and sampling, timed and measured (sync and async)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig

from memagent_graph.errors import translate_model_error
from memagent_graph.state import EMPTY_USAGE, Usage
from memagent_graph.tokenization import Tokenizer


@dataclass(frozen=True)
class CallOptions:
    """Token limit and sampling of one call."""

    max_tokens: int
    temperature: float
    top_p: float


@dataclass(frozen=True)
class Completion:
    """A model reply and its measurements (token counts from the server when it reports them)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None


def complete_sync(
    model: BaseChatModel, prompt: str, options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig | None
) -> Completion:
    """Send ``prompt`` as one user message; client errors become `ModelError`s with a clear message."""
    started = time.perf_counter()
    with _translated_errors(model):
        message = _bound(model, options).invoke([HumanMessage(prompt)], config)
    return _measure(message, prompt, tokenizer, time.perf_counter() - started)


async def complete(
    model: BaseChatModel, prompt: str, options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig | None
) -> Completion:
    """Async `complete_sync`."""
    started = time.perf_counter()
    with _translated_errors(model):
        message = await _bound(model, options).ainvoke([HumanMessage(prompt)], config)
    return _measure(message, prompt, tokenizer, time.perf_counter() - started)


def add_usage(usage: Usage | None, completion: Completion) -> Usage:
    """Running totals after one more call."""
    usage = usage or EMPTY_USAGE
    return {
        "calls": usage["calls"] + 1,
        "prompt_tokens": usage["prompt_tokens"] + completion.prompt_tokens,
        "completion_tokens": usage["completion_tokens"] + completion.completion_tokens,
    }


def _bound(model: BaseChatModel, options: CallOptions) -> Runnable:
    return model.bind(max_tokens=options.max_tokens, temperature=options.temperature, top_p=options.top_p)


@contextmanager
def _translated_errors(model: BaseChatModel) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        base = getattr(model, "openai_api_base", None)
        translated = translate_model_error(exc, endpoint=str(base) if base else None)
        if translated is None or translated is exc:
            raise
        raise translated from exc


def _measure(message: BaseMessage, prompt: str, tokenizer: Tokenizer, latency: float) -> Completion:
    text = message.text
    usage = getattr(message, "usage_metadata", None) or {}
    return Completion(
        text=text,
        prompt_tokens=int(usage.get("input_tokens") or tokenizer.count(prompt)),
        completion_tokens=int(usage.get("output_tokens") or (tokenizer.count(text) if text else 0)),
        latency_s=round(latency, 4),
        finish_reason=(message.response_metadata or {}).get("finish_reason"),
    )
