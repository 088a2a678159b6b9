"""What the quote policy keeps: the sentence that predicts the question best, its second hops, then the rest
that beat an empty passage, within the memory budget (the pure ranking behind `quote.memory` and
`quote.answer`); at a temperature, the order is drawn (`quote.choice`) and the second hops follow the first
pick."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from langgraph.runtime import get_runtime

from memagent_graph.config import MemAgentConfig
from memagent_graph.nodes.quote.choice import Draw, choose
from memagent_graph.nodes.quote.scoring import GainCache, ScoreTally, bridge_terms, words
from memagent_graph.state import RunSettings


@dataclass(frozen=True)
class QuoteSettings:
    """The quote policy's thresholds (from `MemAgentConfig`)."""

    min_gain: float
    """Nats by which a sentence must beat the empty passage at predicting the question."""
    hop_min_share: float
    """Share of the bridge terms' surprise a second hop must explain (above 1: no second hops)."""
    prefilter: int
    """Sentences of a chunk the BM25 first stage passes to the model (0: all)."""
    temperature: float = 0.0
    """The temperature the choices are drawn at (0: greedy, the deterministic rule)."""

    @classmethod
    def of(cls, config: MemAgentConfig) -> QuoteSettings:
        """The settings of ``config``."""
        return cls(config.quote_min_gain, config.quote_hop_min_share, config.quote_prefilter, config.quote_temperature)

    def in_run(self) -> QuoteSettings:
        """These settings with the running graph's quote temperature (`RunSettings.quote_temperature`)."""
        run = get_runtime(RunSettings).context or RunSettings()
        return replace(self, temperature=float(run.value("quote_temperature", self.temperature)))


@dataclass(frozen=True)
class Ranking:
    """What `rank_quotes` keeps, in memory order, and the draw that chose it."""

    kept: list[str]
    draw: Draw


def rank_quotes(
    question: str,
    candidates: Sequence[str],
    cache: GainCache,
    *,
    settings: QuoteSettings,
    tally: ScoreTally,
    rng: random.Random | None = None,
) -> Ranking:
    """The candidates worth keeping, in memory order: those that beat the empty passage by ``min_gain``, best
    first (drawn from ``rng`` at ``settings.temperature``), with the first one's second hops (`second_hops`)
    right after it. When none is kept, the best candidate alone: a short real question ("Who was the father of
    Caleb?") often leaves every sentence under ``min_gain``, and an empty memory cannot answer (19 of 100
    held-out Genesis reads ended empty). This fallback is not part of the draw, and follows no second hop."""
    unique = list(dict.fromkeys(candidates))
    gains = cache.gains(question, unique, tally)
    choice = choose(gains, stop_gain=settings.min_gain, temperature=settings.temperature, rng=rng)
    draw = Draw(question, tuple(unique), choice, settings.min_gain, settings.temperature)
    ranked = [unique[i] for i in choice.order]
    if not ranked:  # the best alone, without second hops: a weak note's names bridge to nothing in particular
        return Ranking([unique[i] for i in choose(gains, stop_gain=None, temperature=0).order], draw)
    hops = second_hops(question, ranked[0], unique, cache, min_share=settings.hop_min_share, tally=tally)
    return Ranking(list(dict.fromkeys([ranked[0], *hops, *ranked[1:]])), draw)


def second_hops(
    question: str, line: str, candidates: Sequence[str], cache: GainCache, *, min_share: float, tally: ScoreTally
) -> list[str]:
    """The candidates that mention a bridge term of ``line`` (`bridge_terms`) and explain at least ``min_share``
    of the bridge's surprise, best first: what the question asks about the thing ``line`` names."""
    bridge = bridge_terms(line, question, context="\n".join(candidates))
    linked = {w.lower() for w in words(bridge)}
    mentions = [c for c in candidates if c != line and linked.intersection(w.lower() for w in words(c))]
    if not mentions or min_share > 1:
        return []
    surprise = cache.surprise(bridge, tally)
    gains = cache.gains(bridge, mentions, tally)
    return [
        c for g, c in sorted(zip(gains, mentions, strict=True), key=lambda pair: -pair[0]) if g >= min_share * surprise
    ]


def fit_budget(ranked: Sequence[str], *, count: Callable[[str], int], budget: int) -> list[str]:
    """``ranked`` in order, each kept while the total (one per line, ``count`` tokens each) fits in ``budget``
    tokens; one too big to fit is skipped. This is the memory budget of a quote update: no memory is cut."""
    kept: list[str] = []
    used = 0
    for quote in ranked:
        cost = count(quote) + (1 if kept else 0)  # the newline between notes
        if used + cost <= budget:
            kept.append(quote)
            used += cost
    return kept
