"""The quote policy's cheap first stage: BM25 over a chunk's sentences passes the few worth a model's judgement.

The query is the question plus the bridge terms of the memory's best line (the names a second hop must
mention), so a sentence about the person the memory points to is passed although it shares no word with the
question. Scores are BM25 within the chunk (``rank_bm25``'s Okapi BM25: the chunk is the corpus, so a word
common in this chunk weighs little), and a sentence must share a *telling* query word: one in at most
`TELLING_SHARE` of the chunk's sentences, or in one ("the", "of", "number" in a chunk of needles pass nothing
alone).
"""

from __future__ import annotations

from collections.abc import Sequence

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote.scoring import words

TELLING_SHARE = 0.1
"""A query word in more of the chunk's sentences than this share passes no sentence by itself. Set on
training-split tasks at 16K: evidence recall was the same with every word (36 of 39 sentences) as at 0.1,
and the sentences passed per chunk fell from 13.5 to 3.5."""


def prefilter(query: str, sentences: Sequence[str], *, keep: int) -> list[str]:
    """The ``keep`` sentences BM25 ranks best for ``query``, in their order in ``sentences``, of those that share
    a telling word with it (`TELLING_SHARE`)."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError as error:  # pragma: no cover - rank-bm25 is in the `local` extra
        raise ConfigError(
            "the quote policy's first stage needs rank-bm25: pip install 'memagent-graph[local]', "
            "or set `quote_prefilter` to 0 to score every sentence"
        ) from error
    query_words = set(_terms(query))
    tokenized = [_terms(sentence) for sentence in sentences]
    vocabularies = [set(terms) for terms in tokenized]
    most = max(1.0, TELLING_SHARE * len(sentences))  # a word in one sentence always tells
    telling = {word for word in query_words if sum(word in v for v in vocabularies) <= most}
    matching = [i for i, vocabulary in enumerate(vocabularies) if telling & vocabulary]
    if not matching:
        return []
    scores = BM25Okapi(tokenized).get_scores(list(query_words))
    best = sorted(matching, key=lambda i: -scores[i])[:keep]
    return [sentences[i] for i in sorted(best)]


def _terms(text: str) -> list[str]:
    return [w.lower() for w in words(text)]
