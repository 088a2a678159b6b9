"""The quote policy's choices as a policy: which candidates it keeps, in what order, drawn at a temperature.

At temperature 0 the choice is the deterministic rule: every candidate whose gain reaches ``stop_gain``, best
first. At a temperature T the order is drawn from the Plackett-Luce distribution over the gains and a *stop*
option worth ``stop_gain`` (one softmax of value / T per pick over what is left, as Gumbel top-k draws): the
draw ends when stop is picked or nothing is left. Without a stop option (the answer's pick) one candidate is
drawn. The draw's log-probability is what the learner recomputes under its own weights
(`memagent_graph.training.rl.algorithms.plackett_luce_logprob`); rollouts sample, inference is greedy.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Choice:
    """What was drawn: candidate indices in the order picked, whether the draw ended on stop, and its
    log-probability under the drawing policy (0 when greedy)."""

    order: tuple[int, ...]
    stopped: bool
    logprob: float


@dataclass(frozen=True)
class Draw:
    """One choice as a trainer records it: the query the candidates were scored for, the candidates, what was
    drawn, the stop option's value (None: none) and the temperature."""

    query: str
    candidates: tuple[str, ...]
    choice: Choice
    stop_gain: float | None
    temperature: float


def choose(
    gains: Sequence[float], *, stop_gain: float | None, temperature: float, rng: random.Random | None = None
) -> Choice:
    """Draw an order of ``gains``' candidates (module doc); ``stop_gain`` None draws exactly one (none from an
    empty list). ``rng`` draws when ``temperature`` > 0."""
    if not gains:
        return Choice((), stop_gain is not None, 0.0)
    if temperature == 0:
        return _greedy(gains, stop_gain=stop_gain)
    rng = rng or random.Random()
    left = list(range(len(gains)))
    order: list[int] = []
    logprob = 0.0
    while left:
        values = [gains[i] / temperature for i in left] + ([stop_gain / temperature] if stop_gain is not None else [])
        top = max(values)
        log_total = top + math.log(sum(math.exp(v - top) for v in values))
        pick = rng.choices(range(len(values)), weights=[math.exp(v - log_total) for v in values])[0]
        logprob += values[pick] - log_total
        if pick == len(left):  # the stop option
            return Choice(tuple(order), True, logprob)
        order.append(left.pop(pick))
        if stop_gain is None:
            break
    return Choice(tuple(order), False, logprob)


def _greedy(gains: Sequence[float], *, stop_gain: float | None) -> Choice:
    ranked = sorted(range(len(gains)), key=lambda i: -gains[i])
    if stop_gain is None:
        return Choice((ranked[0],), False, 0.0)
    kept = tuple(i for i in ranked if gains[i] >= stop_gain)
    return Choice(kept, len(kept) < len(gains), 0.0)
