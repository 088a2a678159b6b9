"""Fair retrieval baselines: the sentences of the document that BM25, MiniLM or both fused (reciprocal-rank
fusion) rank highest, as many as fit the reader's memory budget, answered by the memory reader's own answer
step with those sentences as its memory.

Against MemAgent on the same model and config, the comparison isolates reading (which sentences the memory
keeps) from retrieving: both answer with the same step from the same number of tokens. Each reading cites its
sentences, so the evaluation's citation recall is the retriever's evidence recall at that budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.graph import create_answer_graph
from memagent_graph.nodes.quote.memory import split_sentences
from memagent_graph.nodes.quote.selection import fit_budget
from memagent_graph.training.eval.baselines import Reader, Reading, bm25_scores, embedding_scores

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack, Clarke and Buettcher, 2009): a sentence scores the sum of
1 / (RRF_K + rank) over the rankings."""

Ranking = Callable[[str, Sequence[str]], list[int]]
"""``ranking(question, sentences)``: the sentences' indices, best first."""


@dataclass(frozen=True)
class Sentence:
    """One sentence of a document and its (start, end) characters there."""

    text: str
    start: int
    end: int


def document_sentences(document: str) -> list[Sentence]:
    """The sentences of ``document`` as the quote memory keeps them (`split_sentences`), with their spans."""
    sentences, searched = [], 0
    for text in split_sentences(document):
        words = [re.escape(word) for word in text.split()]
        found = re.compile(r"\s+".join(words)).search(document, searched)
        assert found is not None, text  # split_sentences keeps every word, in order
        sentences.append(Sentence(text, found.start(), found.end()))
        searched = found.end()
    return sentences


def _best_first(scores: Sequence[float]) -> list[int]:
    """Indices by score, best first; ties in document order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def bm25_ranking(question: str, sentences: Sequence[str]) -> list[int]:
    """The sentences by BM25 (Okapi) score of the question's words, best first (`baselines.bm25_scores`)."""
    return _best_first(bm25_scores(question, sentences))


def minilm_ranking(question: str, sentences: Sequence[str]) -> list[int]:
    """The sentences by all-MiniLM-L6-v2 cosine similarity to the question, best first (each sentence encoded
    once while it is among the latest: `baselines.embedding_scores`)."""
    return _best_first(embedding_scores(question, sentences))


def reciprocal_rank_fusion(rankings: Sequence[Sequence[int]], *, k: int = RRF_K) -> list[int]:
    """One ranking from several: each index scores the sum of 1 / (k + rank) (rank from 1), best first."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, index in enumerate(ranking, start=1):
            scores[index] = scores.get(index, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda i: (-scores[i], i))


def hybrid_ranking(question: str, sentences: Sequence[str]) -> list[int]:
    """BM25's and MiniLM's rankings fused (`reciprocal_rank_fusion`)."""
    return reciprocal_rank_fusion([bm25_ranking(question, sentences), minilm_ranking(question, sentences)])


RANKINGS: dict[str, Ranking] = {"bm25": bm25_ranking, "minilm": minilm_ranking, "hybrid": hybrid_ranking}


def memory_answerer(model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig) -> Callable[[str, str], str]:
    """The memory reader's answer step, ``answer(question, memory) -> reply``: the graph's own answer step for
    ``config`` (`create_answer_graph`; a boxed answer comes back boxed, as `memagent eval` scores MemAgent's)."""
    graph = create_answer_graph(model, tokenizer=tokenizer, config=config)

    def answer(question: str, memory: str) -> str:
        result = graph.invoke({"question": question, "memory": memory})
        return f"\\boxed{{{result['answer']}}}" if result["answer_source"] == "boxed" else result["answer"]

    return answer


def kept_sentences(
    question: str, document: str, tokenizer: Tokenizer, *, ranking: Ranking, memory_tokens: int
) -> list[Sentence]:
    """The sentences of ``document`` that ``ranking`` puts first for ``question``, as many as fit ``memory_tokens``
    (`fit_budget`, one a line), in document order: a sentence baseline's memory."""
    sentences = document_sentences(document)
    # by index, not text: a document repeats sentences ("And the LORD spake unto Moses, saying,")
    costs = {str(i): tokenizer.count(sentences[i].text) for i in ranking(question, [s.text for s in sentences])}
    kept = set(fit_budget(list(costs), count=costs.__getitem__, budget=memory_tokens))
    return [sentence for index, sentence in enumerate(sentences) if str(index) in kept]


def sentence_reader(
    answer: Callable[[str, str], str], tokenizer: Tokenizer, *, ranking: Ranking, memory_tokens: int
) -> Reader:
    """A reader that keeps the sentences `kept_sentences` chooses and answers from them with ``answer``; it cites
    the sentences it kept."""

    def read(question: str, document: str) -> Reading:
        chosen = kept_sentences(question, document, tokenizer, ranking=ranking, memory_tokens=memory_tokens)
        memory = "\n".join(sentence.text for sentence in chosen)
        return Reading(answer(question, memory), tuple((s.start, s.end) for s in chosen))

    return read
