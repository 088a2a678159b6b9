"""One chat-model call with the run's token limit and sampling, timed and measured (sync and async)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.runtime import get_runtime

from memagent_graph.config import MemAgentConfig
from memagent_graph.errors import translate_model_error
from memagent_graph.state import EMPTY_USAGE, RunSettings, Usage
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
    return await asyncio.to_thread(_measure, message, prompt, tokenizer, time.perf_counter() - started)


def complete_batch_sync(
    model: BaseChatModel,
    prompts: Sequence[str],
    options: CallOptions,
    *,
    tokenizer: Tokenizer,
    config: RunnableConfig | None,
) -> list[Completion]:
    """`complete_sync` for several prompts in one ``batch`` call (an engine may run them as one batch)."""
    started = time.perf_counter()
    with _translated_errors(model):
        messages = _bound(model, options).batch([[HumanMessage(p)] for p in prompts], config)
    latency = time.perf_counter() - started
    return [_measure(message, prompt, tokenizer, latency) for message, prompt in zip(messages, prompts, strict=True)]


async def complete_batch(
    model: BaseChatModel,
    prompts: Sequence[str],
    options: CallOptions,
    *,
    tokenizer: Tokenizer,
    config: RunnableConfig | None,
) -> list[Completion]:
    """Async `complete_batch_sync`."""
    started = time.perf_counter()
    with _translated_errors(model):
        messages = await _bound(model, options).abatch([[HumanMessage(p)] for p in prompts], config)
    latency = time.perf_counter() - started
    return await asyncio.to_thread(
        lambda: [_measure(m, prompt, tokenizer, latency) for m, prompt in zip(messages, prompts, strict=True)]
    )


def call_options(memagent_config: MemAgentConfig, *, budget: Literal["memory_tokens", "answer_tokens"]) -> CallOptions:
    """The token limit and sampling of a call in this run: the run's `RunSettings` over the config."""
    settings = get_runtime(RunSettings).context or RunSettings()
    return CallOptions(
        max_tokens=int(settings.value(budget, getattr(memagent_config, budget))),
        temperature=settings.value("temperature", memagent_config.temperature),
        top_p=settings.value("top_p", memagent_config.top_p),
    )


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
