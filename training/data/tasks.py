"""Verifiable training tasks: a question, a document and its gold answers, generated offline from a seed.

`needle_tasks` plants one fact per document (see `memagent_graph.documents.haystack`) and keeps only documents whose
needle sits wholly inside one chunk, so a perfect reader can always answer (a needle cut in two by a chunk
boundary is unanswerable and would only add noise to the reward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from memagent_graph.documents.chunking import chunk_document
from memagent_graph.documents.haystack import NeedleTask, needle_document
from memagent_graph.documents.sources import TextDocument
from memagent_graph.documents.tokenization import Tokenizer


@dataclass(frozen=True)
class Task:
    """A verifiable question about a document."""

    question: str
    document: str
    golds: list[str]
    evidence: tuple[str, ...] = ()
    """The document's sentences that answer the question, in document order (what an oracle keeps in memory)."""
    reward: str | None = None
    """The reward that scores this task's answer (a `rewards` name); None: the run's ``reward``."""
    row: int | None = None
    """The row of the data file the task came from; None for a generated task."""


def needle_tasks(
    count: int,
    *,
    tokens: int,
    tokenizer: Tokenizer,
    chunk_tokens: int,
    seed: int = 0,
    value_kind: Literal["word-number", "word"] = "word-number",
    haystack: Literal["docs", "noise"] = "docs",
) -> list[Task]:
    """``count`` needle tasks of about ``tokens`` tokens each, reproducible from ``seed``."""
    tasks: list[Task] = []
    attempt = 0
    while len(tasks) < count:
        needle = needle_document(
            tokens=tokens, tokenizer=tokenizer, seed=seed * 100_003 + attempt, value_kind=value_kind, haystack=haystack
        )
        attempt += 1
        if not _straddles(needle, tokenizer, chunk_tokens):
            tasks.append(Task(needle.question, needle.text, [needle.answer], (needle_sentence(needle),)))
    return tasks


def needle_sentence(needle: NeedleTask) -> str:
    """The planted sentence of a needle document."""
    return next(line for line in needle.text.split("\n\n") if needle.answer in line)


def _straddles(needle: NeedleTask, tokenizer: Tokenizer, chunk_tokens: int) -> bool:
    """Whether no single chunk of the document holds the whole needle sentence."""
    sentence = needle_sentence(needle)
    chunked = chunk_document(TextDocument(needle.text), tokenizer, chunk_tokens)
    return not any(sentence in chunked.chunk_text(index) for index in range(chunked.num_chunks))
