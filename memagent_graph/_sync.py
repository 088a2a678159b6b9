"""Run the async implementation from sync code, also when the caller already runs an event loop."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")
_DONE = object()


def run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``make()`` to completion; in a worker thread when this thread already has a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def iterate_sync(make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate ``make()`` from sync code: a worker thread runs the loop and hands items over a queue."""
    items: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()

    async def pump() -> None:
        try:
            async for item in make():
                items.put(item)
                if stop.is_set():
                    break
        except BaseException as exc:
            items.put(_Failure(exc))
        finally:
            items.put(_DONE)

    thread = threading.Thread(target=lambda: asyncio.run(pump()), daemon=True)
    thread.start()
    try:
        while (item := items.get()) is not _DONE:
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error
