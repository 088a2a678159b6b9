"""The quote policy's cheap first stage: BM25 over a chunk's sentences passes the few worth a model's judgement.

The query is the question plus the bridge terms of the memory's best line (the names a second hop must
mention), so a sentence about the person the memory points to is passed although it shares no word with the
question. Scores are BM25 within the chunk (``rank_bm25``'s Okapi BM25: the chunk is the corpus, so a word
common in this chunk weighs little).
"""

from __future__ import annotations

from collections.abc import Sequence

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote_scoring import words


def prefilter(query: str, sentences: Sequence[str], *, keep: int) -> list[str]:
    """The ``keep`` sentences BM25 ranks best for ``query``, in their order in ``sentences``; a sentence that
    shares no word with ``query`` is never passed."""
    if len(sentences) <= keep:
        return list(sentences)
    try:
        from rank_bm25 import BM25Okapi
    except ImportError as error:  # pragma: no cover - rank-bm25 is in the `local` extra
        raise ConfigError(
            "the quote policy's first stage needs rank-bm25: pip install 'memagent-graph[local]', "
            "or set `quote_prefilter` to 0 to score every sentence"
        ) from error
    query_words = set(_terms(query))
    tokenized = [_terms(sentence) for sentence in sentences]
    scores = BM25Okapi(tokenized).get_scores(list(query_words))
    matching = [i for i, terms in enumerate(tokenized) if query_words.intersection(terms)]
    best = sorted(matching, key=lambda i: -scores[i])[:keep]
    return [sentences[i] for i in sorted(best)]


def _terms(text: str) -> list[str]:
    return [w.lower() for w in words(text)]
