"""The quote policy's draws: greedy is the deterministic rule, sampling follows Plackett-Luce with a stop
option, and the rollout's log-probability is the one the learner recomputes."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
import torch

from memagent_graph.nodes.quote.choice import choose
from memagent_graph.training.rl.algorithms import plackett_luce_logprob

GAINS = [3.0, 9.0, 1.0, 12.0]


def test_a_greedy_draw_keeps_what_beats_the_stop_value_best_first():
    choice = choose(GAINS, stop_gain=2.0, temperature=0.0)
    assert choice.order == (3, 1, 0)
    assert choice.stopped and choice.logprob == 0.0


def test_a_greedy_draw_without_a_stop_option_picks_the_best_one():
    assert choose(GAINS, stop_gain=None, temperature=0.0).order == (3,)


def test_a_sampled_first_pick_follows_the_softmax_over_candidates_and_stop():
    rng = random.Random(0)
    gains, stop = [1.0, 0.0], 0.5
    firsts = Counter(
        (choice.order[:1] or ("stop",))[0]
        for choice in (choose(gains, stop_gain=stop, temperature=1.0, rng=rng) for _ in range(20_000))
    )
    total = math.exp(1.0) + math.exp(0.0) + math.exp(0.5)
    assert firsts[0] / 20_000 == pytest.approx(math.exp(1.0) / total, abs=0.015)
    assert firsts["stop"] / 20_000 == pytest.approx(math.exp(0.5) / total, abs=0.015)


def test_a_cold_draw_is_the_greedy_one():
    rng = random.Random(1)
    assert choose(GAINS, stop_gain=2.0, temperature=0.01, rng=rng).order == (3, 1, 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("stop_gain", [4.0, None])
def test_the_drawn_log_probability_is_the_plackett_luce_log_probability(seed, stop_gain):
    choice = choose(GAINS, stop_gain=stop_gain, temperature=2.5, rng=random.Random(seed))
    recomputed = plackett_luce_logprob(
        torch.tensor(GAINS), choice.order, stopped=choice.stopped, stop_gain=stop_gain, temperature=2.5
    )
    assert float(recomputed) == pytest.approx(choice.logprob, abs=1e-5)


def test_every_possible_draw_adds_up_to_probability_one():
    gains = torch.tensor([1.0, -0.5, 0.3])
    draws = [((), True)]
    draws += [((a,), True) for a in range(3)]
    draws += [((a, b), True) for a in range(3) for b in range(3) if a != b]
    draws += [((a, b, c), False) for a in range(3) for b in range(3) for c in range(3) if len({a, b, c}) == 3]
    total = sum(
        math.exp(float(plackett_luce_logprob(gains, order, stopped=stopped, stop_gain=0.2, temperature=1.0)))
        for order, stopped in draws
    )
    assert total == pytest.approx(1.0, abs=1e-5)
