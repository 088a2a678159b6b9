"""What the quote policy keeps: the sentence that predicts the question best, its second hops, then the rest
that beat an empty passage, within the memory budget (the pure ranking behind `quote_memory` and
`quote_answer`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memagent_graph.config import MemAgentConfig
from memagent_graph.nodes.quote_scoring import GainCache, ScoreTally, bridge_terms, words


@dataclass(frozen=True)
class QuoteSettings:
    """The quote policy's thresholds (from `MemAgentConfig`)."""

    min_gain: float
    """Nats by which a sentence must beat the empty passage at predicting the question."""
    hop_min_share: float
    """Share of the bridge terms' surprise a second hop must explain (above 1: no second hops)."""
    prefilter: int
    """Sentences of a chunk the BM25 first stage passes to the model (0: all)."""

    @classmethod
    def of(cls, config: MemAgentConfig) -> QuoteSettings:
        """The settings of ``config``."""
        return cls(config.quote_min_gain, config.quote_hop_min_share, config.quote_prefilter)


def rank_quotes(
    question: str, candidates: Sequence[str], cache: GainCache, *, settings: QuoteSettings, tally: ScoreTally
) -> list[str]:
    """The candidates worth keeping, in memory order: the one that predicts ``question`` best, its second hops
    (`second_hops`), then the others that beat the empty passage by ``min_gain``, best first."""
    unique = list(dict.fromkeys(candidates))
    gains = cache.gains(question, unique, tally)
    ranked = [
        c for g, c in sorted(zip(gains, unique, strict=True), key=lambda pair: -pair[0]) if g >= settings.min_gain
    ]
    if not ranked:
        return []
    hops = second_hops(question, ranked[0], unique, cache, min_share=settings.hop_min_share, tally=tally)
    return list(dict.fromkeys([ranked[0], *hops, *ranked[1:]]))


def second_hops(
    question: str, line: str, candidates: Sequence[str], cache: GainCache, *, min_share: float, tally: ScoreTally
) -> list[str]:
    """The candidates that mention a bridge term of ``line`` (`bridge_terms`) and explain at least ``min_share``
    of the bridge's surprise, best first: what the question asks about the thing ``line`` names."""
    bridge = bridge_terms(line, question)
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
