"""The one retry layer of a run: every model call of the graph goes through here, and nowhere else retries.

Transient failures (rate limits, 5xx, timeouts, connection resets, malformed replies, empty completions) are
retried with exponential backoff and full jitter, honouring the server's ``Retry-After``, up to
``RetrySettings.max_attempts`` tries; permanent ones (400, 401, 403, 404, 422) fail at once. `openai_compatible`
turns the OpenAI client's own retries off so that the server sees at most ``max_attempts`` requests per call.

Written on tenacity rather than LangGraph's node ``RetryPolicy``: a node policy cannot wait for the
``Retry-After`` a 429 carries, and it cannot see an empty completion, which is a reply, not an exception.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx
import openai
import tenacity
from langchain_core.messages import BaseMessage

from memagent_graph.config import RetrySettings

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class EmptyReply(Exception):
    """A completion with no text: retried like a transient fault; after the last try the empty reply is kept."""

    def __init__(self, message: BaseMessage) -> None:
        super().__init__("the model returned an empty completion")
        self.message = message


def is_transient(exc: BaseException) -> bool:
    """True for failures worth another try: the same request may succeed in a moment."""
    if isinstance(exc, EmptyReply | openai.APIConnectionError | openai.APITimeoutError | httpx.TransportError):
        return True
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError):
        return True  # a reply cut short or garbled on the way: the next one is usually whole
    status = getattr(exc, "status_code", None)
    return status in TRANSIENT_STATUS or (status is not None and status >= 500)


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a server asked for (``Retry-After`` in seconds or as an HTTP date, or ``retry-after-ms``)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when is not None else None


def backoff_s(settings: RetrySettings, attempt: int, exc: BaseException | None) -> float:
    """Seconds to wait after failed try number ``attempt``: the server's ``Retry-After`` when it sent one
    (capped), else full jitter over ``initial * 2**(attempt-1)`` (capped at ``max_backoff_s``)."""
    asked = retry_after_s(exc) if exc is not None else None
    if asked is not None:
        return min(asked, settings.max_retry_after_s)
    return random.uniform(0, min(settings.max_backoff_s, settings.initial_backoff_s * 2 ** (attempt - 1)))


def _retrying_kwargs(settings: RetrySettings, *, on_retry: Callable[[int], None] | None) -> dict[str, object]:
    def wait(state: tenacity.RetryCallState) -> float:
        return backoff_s(settings, state.attempt_number, state.outcome.exception() if state.outcome else None)

    def give_up(state: tenacity.RetryCallState) -> BaseMessage:
        exc = state.outcome.exception()
        if isinstance(exc, EmptyReply):
            return exc.message  # kept: the memory node keeps the previous memory and records `empty`
        raise exc

    def before_sleep(state: tenacity.RetryCallState) -> None:
        if on_retry is not None:
            on_retry(state.attempt_number)

    return {
        "stop": tenacity.stop_after_attempt(settings.max_attempts),
        "wait": wait,
        "retry": tenacity.retry_if_exception(is_transient),
        "retry_error_callback": give_up,
        "before_sleep": before_sleep,
    }


def call_with_retries(
    settings: RetrySettings, call: Callable[[], BaseMessage], *, on_retry: Callable[[int], None] | None = None
) -> BaseMessage:
    """Run ``call`` until it returns a non-empty reply, a permanent error, or the tries run out."""
    return tenacity.Retrying(**_retrying_kwargs(settings, on_retry=on_retry))(lambda: _check(call(), settings))


async def acall_with_retries(
    settings: RetrySettings,
    call: Callable[[], Awaitable[BaseMessage]],
    *,
    on_retry: Callable[[int], None] | None = None,
) -> BaseMessage:
    """Async `call_with_retries` (waits without blocking the event loop)."""

    async def checked() -> BaseMessage:
        return _check(await call(), settings)

    return await tenacity.AsyncRetrying(**_retrying_kwargs(settings, on_retry=on_retry))(checked)


def _check(message: BaseMessage, settings: RetrySettings) -> BaseMessage:
    if settings.retry_empty and not message.text.strip():
        raise EmptyReply(message)
    return message


class _BatchRound:
    """One batch's bookkeeping across tries: which prompts still need a reply, and how many tries each took."""

    def __init__(self, settings: RetrySettings, size: int) -> None:
        self.settings, self.attempt = settings, 1
        self.pending = list(range(size))
        self.replies: list[BaseMessage | None] = [None] * size
        self.attempts = [1] * size
        self._failures: list[BaseException] = []

    def take(self, replies: Sequence[BaseMessage | BaseException]) -> bool:
        """Record one try's replies; True when another try is needed (raises a permanent or final error)."""
        still, self._failures = [], []
        for index, reply in zip(self.pending, replies, strict=True):
            self.attempts[index] = self.attempt
            failure = reply if isinstance(reply, BaseException) else None
            if failure is None and self.settings.retry_empty and not reply.text.strip():
                failure = EmptyReply(reply)
            if failure is None:
                self.replies[index] = reply
            elif not is_transient(failure) or self.attempt >= self.settings.max_attempts:
                if not isinstance(failure, EmptyReply):
                    raise failure
                self.replies[index] = failure.message
            else:
                still.append(index)
                self._failures.append(failure)
        self.pending = still
        return bool(still)

    def next_wait_s(self) -> float:
        wait = max(backoff_s(self.settings, self.attempt, exc) for exc in self._failures)
        self.attempt += 1
        return wait


def batch_with_retries(
    settings: RetrySettings, call: Callable[[list[int]], Sequence[BaseMessage | BaseException]], size: int
) -> tuple[list[BaseMessage], list[int]]:
    """Run a batch of ``size`` prompts; ``call(indices)`` sends those prompts as one batch and returns replies or
    exceptions in order. Only failed prompts are sent again. Returns the replies and each prompt's tries."""
    batch = _BatchRound(settings, size)
    while batch.take(call(batch.pending)):
        time.sleep(batch.next_wait_s())
    return batch.replies, batch.attempts  # type: ignore[return-value]


async def abatch_with_retries(
    settings: RetrySettings,
    call: Callable[[list[int]], Awaitable[Sequence[BaseMessage | BaseException]]],
    size: int,
) -> tuple[list[BaseMessage], list[int]]:
    """Async `batch_with_retries`."""
    batch = _BatchRound(settings, size)
    while batch.take(await call(batch.pending)):
        await asyncio.sleep(batch.next_wait_s())
    return batch.replies, batch.attempts  # type: ignore[return-value]
