"""One `generate` for many concurrent episodes: a rollout backend wrapper that batches their calls.

Each episode reads in its own thread and makes one model call at a time. Wrapped in `BatchingRollout`, a call
waits until every episode still reading has a call waiting too, then all of them are generated together
(one batch per sampling setting, in episode-id order). Batches are therefore the same on every run, so a seeded
run samples the same tokens again, and a step costs one generate per round of calls, not one per call.

Written here because the parts that exist do not fit: transformers' `generate` takes one batch at a time, and a
time-window batcher (collect for N ms) would make batch composition, and so the sampled tokens, depend on
thread timing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from memagent_graph.training.rollout.backends import Generation, Sampling

_EPISODE: ContextVar[str | None] = ContextVar("memagent_episode", default=None)


class BatchingRollout:
    """Wraps a rollout backend; calls made inside `episode` are batched across episodes (see module doc).

    Everything else (``prompt_ids``, ``decode``, ``policy_version``, ``model``…) is the wrapped backend's.
    """

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self._cond = threading.Condition()
        self._reading: set[str] = set()
        self._waiting: dict[str, tuple[Sequence[list[int]], Sampling]] = {}
        self._done: dict[str, list[Generation] | BaseException] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["backend"], name)

    def expect(self, episode_ids: Sequence[str]) -> None:
        """Announce the episodes about to read (before any starts), so the first batch waits for all of them."""
        with self._cond:
            self._reading.update(episode_ids)

    @contextlib.contextmanager
    def episode(self, episode_id: str) -> Iterator[None]:
        """Run one announced episode's reading inside this block (its calls join the batches)."""
        token = _EPISODE.set(episode_id)
        try:
            yield
        finally:
            _EPISODE.reset(token)
            with self._cond:
                self._reading.discard(episode_id)
                self._run_if_all_waiting()

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling) -> list[Generation]:
        episode = _EPISODE.get()
        if episode is None:
            return self.backend.generate(prompts, sampling)
        with self._cond:
            self._waiting[episode] = (prompts, sampling)
            self._run_if_all_waiting()
            self._cond.wait_for(lambda: episode in self._done)
            result = self._done.pop(episode)
        if isinstance(result, BaseException):
            raise result
        return result

    def _run_if_all_waiting(self) -> None:
        """With the lock held: when every reading episode waits, generate for all of them and wake them."""
        if not self._waiting or set(self._waiting) != self._reading:
            return
        waiting, self._waiting = self._waiting, {}
        settings = sorted({sampling for _, sampling in waiting.values()}, key=lambda s: (s.max_tokens, s.temperature))
        for sampling in settings:
            members = sorted(e for e, (_, s) in waiting.items() if s == sampling)
            prompts = [prompt for e in members for prompt in waiting[e][0]]
            try:
                generations = self.backend.generate(prompts, sampling)
            except BaseException as error:  # every waiting episode must wake up and see it
                self._done.update(dict.fromkeys(members, error))
                continue
            start = 0
            for member in members:
                count = len(waiting[member][0])
                self._done[member] = generations[start : start + count]
                start += count
        self._cond.notify_all()
