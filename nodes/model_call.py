"""One chat-model call with the run's token limit and sampling, retried (`retry`), timed and measured."""

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

from memagent_graph.config import MemAgentConfig, RetrySettings
from memagent_graph.documents.sanitize import encodable
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import translate_model_error
from memagent_graph.nodes.retry import (
    abatch_with_retries,
    acall_with_retries,
    batch_with_retries,
    call_with_retries,
)
from memagent_graph.state import EMPTY_USAGE, RunSettings, Usage


@dataclass(frozen=True)
class CallOptions:
    """Token limit and sampling of one call."""

    max_tokens: int
    temperature: float
    top_p: float
    retries: RetrySettings = RetrySettings()
    quote_from: str | None = None
    """When set, the reply must be one whole line of this text (the quote policy's answer; the embedded engine)."""


@dataclass(frozen=True)
class Completion:
    """A model reply and its measurements (token counts from the server when it reports them)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None
    attempts: int = 1


class _Attempts:
    """Counts the tries of one call (the retry layer reports each retry)."""

    def __init__(self) -> None:
        self.count = 1

    def retried(self, failed_attempt: int) -> None:
        self.count = failed_attempt + 1


def complete_sync(
    model: BaseChatModel, prompt: str, options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig | None
) -> Completion:
    """Send ``prompt`` as one user message; client errors become `ModelError`s with a clear message."""
    started, attempts, bound = time.perf_counter(), _Attempts(), _bound(model, options)
    with _translated_errors(model):
        message = call_with_retries(
            options.retries, lambda: bound.invoke([HumanMessage(prompt)], config), on_retry=attempts.retried
        )
    return _measure(message, prompt, tokenizer, time.perf_counter() - started, attempts.count)


async def complete(
    model: BaseChatModel, prompt: str, options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig | None
) -> Completion:
    """Async `complete_sync`."""
    started, attempts, bound = time.perf_counter(), _Attempts(), _bound(model, options)
    with _translated_errors(model):
        message = await acall_with_retries(
            options.retries, lambda: bound.ainvoke([HumanMessage(prompt)], config), on_retry=attempts.retried
        )
    latency = time.perf_counter() - started
    return await asyncio.to_thread(_measure, message, prompt, tokenizer, latency, attempts.count)


def complete_batch_sync(
    model: BaseChatModel,
    prompts: Sequence[str],
    options: CallOptions,
    *,
    tokenizer: Tokenizer,
    config: RunnableConfig | None,
) -> list[Completion]:
    """`complete_sync` for several prompts in one ``batch`` call (an engine may run them as one batch)."""
    started, bound = time.perf_counter(), _bound(model, options)
    inputs = [[HumanMessage(p)] for p in prompts]
    with _translated_errors(model):
        messages, attempts = batch_with_retries(
            options.retries,
            lambda indices: bound.batch(
                [inputs[i] for i in indices], _all_at_once(config, len(indices)), return_exceptions=True
            ),
            len(prompts),
        )
    latency = time.perf_counter() - started
    return _measure_all(messages, prompts, tokenizer, latency, attempts)


async def complete_batch(
    model: BaseChatModel,
    prompts: Sequence[str],
    options: CallOptions,
    *,
    tokenizer: Tokenizer,
    config: RunnableConfig | None,
) -> list[Completion]:
    """Async `complete_batch_sync`."""
    started, bound = time.perf_counter(), _bound(model, options)
    inputs = [[HumanMessage(p)] for p in prompts]
    with _translated_errors(model):
        messages, attempts = await abatch_with_retries(
            options.retries,
            lambda indices: bound.abatch(
                [inputs[i] for i in indices], _all_at_once(config, len(indices)), return_exceptions=True
            ),
            len(prompts),
        )
    latency = time.perf_counter() - started
    return await asyncio.to_thread(_measure_all, messages, prompts, tokenizer, latency, attempts)


def complete_all_sync(
    model: BaseChatModel,
    prompts: Sequence[str],
    options: CallOptions,
    *,
    tokenizer: Tokenizer,
    config: RunnableConfig | None,
) -> list[Completion]:
    """One completion per prompt: a single call for one prompt, one batched call for several."""
    if len(prompts) == 1:
        return [complete_sync(model, prompts[0], options, tokenizer=tokenizer, config=config)]
    return complete_batch_sync(model, prompts, options, tokenizer=tokenizer, config=config)


async def complete_all(
    model: BaseChatModel,
    prompts: Sequence[str],
    options: CallOptions,
    *,
    tokenizer: Tokenizer,
    config: RunnableConfig | None,
) -> list[Completion]:
    """Async `complete_all_sync`."""
    if len(prompts) == 1:
        return [await complete(model, prompts[0], options, tokenizer=tokenizer, config=config)]
    return await complete_batch(model, prompts, options, tokenizer=tokenizer, config=config)


def _all_at_once(config: RunnableConfig | None, size: int) -> RunnableConfig:
    """Send a batch's prompts together (LangChain's default pool is cpu_count + 4 threads); a cap, if any,
    belongs to the client (`openai_compatible(max_concurrency=)`)."""
    return {**(config or {}), "max_concurrency": size}


def call_options(memagent_config: MemAgentConfig, *, budget: Literal["memory_tokens", "answer_tokens"]) -> CallOptions:
    """The token limit and sampling of a call in this run: the run's `RunSettings` over the config."""
    settings = get_runtime(RunSettings).context or RunSettings()
    return CallOptions(
        max_tokens=int(settings.value(budget, getattr(memagent_config, budget))),
        temperature=settings.value("temperature", memagent_config.temperature),
        top_p=settings.value("top_p", memagent_config.top_p),
        retries=memagent_config.retries,
    )


def add_usage(usage: Usage | None, completions: Sequence[Completion]) -> Usage:
    """Running totals after one more step's calls."""
    usage = usage or EMPTY_USAGE
    return {
        "calls": usage["calls"] + len(completions),
        "prompt_tokens": usage["prompt_tokens"] + sum(c.prompt_tokens for c in completions),
        "completion_tokens": usage["completion_tokens"] + sum(c.completion_tokens for c in completions),
    }


def _bound(model: BaseChatModel, options: CallOptions) -> Runnable:
    quote = {"quote_from": options.quote_from} if options.quote_from else {}
    return model.bind(max_tokens=options.max_tokens, temperature=options.temperature, top_p=options.top_p, **quote)


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


def _measure_all(
    messages: Sequence[BaseMessage], prompts: Sequence[str], tokenizer: Tokenizer, latency: float, attempts: list[int]
) -> list[Completion]:
    return [
        _measure(message, prompt, tokenizer, latency, tries)
        for message, prompt, tries in zip(messages, prompts, attempts, strict=True)
    ]


def _measure(message: BaseMessage, prompt: str, tokenizer: Tokenizer, latency: float, attempts: int) -> Completion:
    text = message.text  # kept as sent: the memory's sanitizer replaces (and counts) invalid characters
    usage = getattr(message, "usage_metadata", None) or {}
    return Completion(
        text=text,
        prompt_tokens=int(usage.get("input_tokens") or tokenizer.count(prompt)),
        completion_tokens=int(usage.get("output_tokens") or (tokenizer.count(encodable(text)) if text else 0)),
        latency_s=round(latency, 4),
        finish_reason=(message.response_metadata or {}).get("finish_reason"),
        attempts=attempts,
    )
