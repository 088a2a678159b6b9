"""A progress bar on stderr for long reads: chunk i/n, document tokens per second, ETA (rich)."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class ProgressBar:
    """Render ``memagent.progress`` events; a no-op when disabled."""

    def __init__(self, *, total: int, tokens: int, enabled: bool = True) -> None:
        self._tokens_per_chunk = tokens / max(total, 1)
        self._progress = Progress(
            TextColumn("chunk"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            disable=not enabled,
            transient=False,
        )
        self._task = self._progress.add_task("read", total=total, rate="")

    def __enter__(self) -> ProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._progress.stop()

    def advance(self, event: dict[str, Any]) -> None:
        """Move to the chunk an event reports."""
        elapsed = max(float(event.get("elapsed_s", 0.0)), 1e-6)
        rate = event["chunk"] * self._tokens_per_chunk / elapsed
        self._progress.update(self._task, completed=event["chunk"], rate=f"{rate:,.0f} tok/s")
