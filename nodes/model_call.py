"""One chat-model call with the run's token limit and sampling, retried (`retry`), timed and measured.

Sync and async calls share one core, `_Request` (the bound model, the messages, the tries, the measuring); only
the sending differs, in two small shells (`_send`: the retry layer's sync loop; `_asend`: its async loop, and the
measuring in a worker thread). Not an async core that the sync functions run: a sync graph run calls them in
LangGraph's worker threads with no event loop, and a sync-only chat model would be sent to a thread anyway.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, TypeVar

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

Reply = TypeVar("Reply")


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


def complete(
    model: BaseChatModel, prompt: str, options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig
) -> Completion:
    """Send ``prompt`` as one user message; client errors become `ModelError`s with a clear message."""
    [completion] = _send(_Request(model, [prompt], options, tokenizer, config, batched=False))
    return completion


async def acomplete(
    model: BaseChatModel, prompt: str, options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig
) -> Completion:
    """Async `complete`."""
    [completion] = await _asend(_Request(model, [prompt], options, tokenizer, config, batched=False))
    return completion


def complete_batch(
    model: BaseChatModel, prompts: Sequence[str], options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig
) -> list[Completion]:
    """`complete` for several prompts in one ``batch`` call (an engine may run them as one batch)."""
    return _send(_Request(model, prompts, options, tokenizer, config, batched=True))


async def acomplete_batch(
    model: BaseChatModel, prompts: Sequence[str], options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig
) -> list[Completion]:
    """Async `complete_batch`."""
    return await _asend(_Request(model, prompts, options, tokenizer, config, batched=True))


def complete_all(
    model: BaseChatModel, prompts: Sequence[str], options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig
) -> list[Completion]:
    """One completion per prompt: a single call for one prompt, one batched call for several."""
    return _send(_Request(model, prompts, options, tokenizer, config, batched=len(prompts) != 1))


async def acomplete_all(
    model: BaseChatModel, prompts: Sequence[str], options: CallOptions, *, tokenizer: Tokenizer, config: RunnableConfig
) -> list[Completion]:
    """Async `complete_all`."""
    return await _asend(_Request(model, prompts, options, tokenizer, config, batched=len(prompts) != 1))


class _Request:
    """One call (one prompt) or one batch (several prompts, one ``batch`` call) bound to the model with its
    options: all of a completion but the sending, which `_send` and `_asend` do."""

    def __init__(
        self,
        model: BaseChatModel,
        prompts: Sequence[str],
        options: CallOptions,
        tokenizer: Tokenizer,
        config: RunnableConfig,
        *,
        batched: bool,
    ) -> None:
        self.model, self.prompts, self.tokenizer, self.config = model, list(prompts), tokenizer, config
        self.batched, self.retries, self.bound = batched, options.retries, _bound(model, options)
        self.inputs = [[HumanMessage(prompt)] for prompt in prompts]
        self.attempts = [1] * len(prompts)
        self.started = time.perf_counter()

    def one(self, send: Callable[[list[HumanMessage], RunnableConfig], Reply]) -> Callable[[], Reply]:
        """The call of the one prompt with ``send`` (the bound model's ``invoke`` or ``ainvoke``)."""
        return lambda: send(self.inputs[0], self.config)

    def some(self, send: Callable[..., Reply]) -> Callable[[list[int]], Reply]:
        """The batch of the prompts at some indices with ``send`` (``batch`` or ``abatch``): replies or
        exceptions, in order."""
        return lambda indices: send(
            [self.inputs[i] for i in indices], _all_at_once(self.config, len(indices)), return_exceptions=True
        )

    def retried(self, failed_attempt: int) -> None:
        """The retry layer's report on a single call: try ``failed_attempt`` failed."""
        self.attempts[0] = failed_attempt + 1

    def measure(self, messages: Sequence[BaseMessage], finished: float) -> list[Completion]:
        """The completions of the replies (token counts from the server, else from the tokenizer)."""
        latency = finished - self.started
        return [
            _measure(message, prompt, self.tokenizer, latency, tries)
            for message, prompt, tries in zip(messages, self.prompts, self.attempts, strict=True)
        ]


def _send(request: _Request) -> list[Completion]:
    """The sync shell: the retry layer's sync loop, in the calling thread (a sync graph run calls it from
    LangGraph's worker threads, where no event loop runs)."""
    with _translated_errors(request.model):
        if request.batched:
            send = request.some(request.bound.batch)
            replies, request.attempts = batch_with_retries(request.retries, send, len(request.inputs))
        else:
            replies = [call_with_retries(request.retries, request.one(request.bound.invoke), on_retry=request.retried)]
    return request.measure(replies, time.perf_counter())


async def _asend(request: _Request) -> list[Completion]:
    """The async shell: the retry layer's async loop; the replies measured in a worker thread (token counts may
    call a server's /tokenize)."""
    with _translated_errors(request.model):
        if request.batched:
            asend = request.some(request.bound.abatch)
            replies, request.attempts = await abatch_with_retries(request.retries, asend, len(request.inputs))
        else:
            acall = request.one(request.bound.ainvoke)
            replies = [await acall_with_retries(request.retries, acall, on_retry=request.retried)]
    return await asyncio.to_thread(request.measure, replies, time.perf_counter())


def _all_at_once(config: RunnableConfig, size: int) -> RunnableConfig:
    """Send a batch's prompts together (LangChain's default pool is cpu_count + 4 threads); a cap, if any,
    belongs to the client (`openai_compatible(max_concurrency=)`)."""
    return {**config, "max_concurrency": size}


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
