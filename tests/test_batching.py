"""BatchingRollout: concurrent episodes' calls become one generate per round, in a fixed order."""

from __future__ import annotations

import threading

import pytest

from memagent_graph.training.rollout.backends import Generation, Sampling
from memagent_graph.training.rollout.batching import BatchingRollout

SAMPLING = Sampling(max_tokens=4, temperature=1.0)


class CountingBackend:
    """Echoes each prompt's first id; remembers every batch it was given."""

    policy_version = 7

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.fail = fail

    def generate(self, prompts, sampling):
        self.batches.append([prompt[0] for prompt in prompts])
        if self.fail:
            raise RuntimeError("engine failed")
        return [Generation([prompt[0]], [0.0], "stop") for prompt in prompts]


def _read(batching: BatchingRollout, calls: dict[str, int], results: dict[str, list[int]]) -> None:
    batching.expect(list(calls))

    def episode(name: str) -> None:
        with batching.episode(name):
            for call in range(calls[name]):
                [generation] = batching.generate([[ord(name) * 10 + call]], SAMPLING)
                results.setdefault(name, []).append(generation.response_ids[0])

    threads = [threading.Thread(target=episode, args=(name,)) for name in reversed(list(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_concurrent_episodes_share_one_generate_per_round_in_episode_order():
    backend = CountingBackend()
    results: dict[str, list[int]] = {}
    _read(BatchingRollout(backend), {"a": 2, "b": 3, "c": 1, "d": 3}, results)
    a, b, c, d = (ord(x) * 10 for x in "abcd")
    assert backend.batches == [[a, b, c, d], [a + 1, b + 1, d + 1], [b + 2, d + 2]]
    assert results["b"] == [b, b + 1, b + 2]  # every episode gets its own replies back


def test_a_failed_batch_raises_in_every_waiting_episode():
    batching = BatchingRollout(CountingBackend(fail=True))
    errors: list[BaseException] = []

    def episode(name: str) -> None:
        with batching.episode(name):
            try:
                batching.generate([[1]], SAMPLING)
            except RuntimeError as error:
                errors.append(error)

    batching.expect(["x", "y"])
    threads = [threading.Thread(target=episode, args=(name,)) for name in "xy"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(errors) == 2


def test_calls_outside_an_episode_go_straight_to_the_backend():
    backend = CountingBackend()
    batching = BatchingRollout(backend)
    assert batching.generate([[5], [6]], SAMPLING)[1].response_ids == [6]
    assert batching.policy_version == 7  # everything else is the backend's
    with pytest.raises(AttributeError):
        batching.no_such_attribute  # noqa: B018
