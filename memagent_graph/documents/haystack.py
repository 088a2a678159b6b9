"""Needle-in-a-haystack documents from text that ships with CPython (offline).

Haystack: the help topics of CPython's `pydoc_data.topics` (Python documentation, © Python Software
Foundation, PSF License Agreement / BSD 0-clause for the docs text), or RULER's "noise" haystack (one
repeated paragraph, the easiest setting). A needle is one sentence, "The special magic <key> is <value>.",
inserted at a chosen depth.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from memagent_graph.documents.tokenization import Tokenizer

HAYSTACK_SOURCE = "CPython pydoc_data.topics (Python documentation, PSF License)"
_KEYS = ("number", "city", "colour", "password", "river", "planet")
NOISE_PARAGRAPH = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
_WORDS = ("amber", "basil", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")


@dataclass(frozen=True)
class NeedleTask:
    """A document with one planted fact, the question about it and the expected answer."""

    text: str
    question: str
    answer: str
    depth: float


@lru_cache(maxsize=1)
def haystack_paragraphs() -> tuple[str, ...]:
    """Paragraphs of the bundled CPython help topics, in a fixed order."""
    from pydoc_data.topics import topics

    paragraphs = []
    for key in sorted(topics):
        paragraphs += [p.strip() for p in topics[key].split("\n\n") if len(p.strip()) > 80]
    return tuple(paragraphs)


def needle_document(
    *,
    tokens: int,
    tokenizer: Tokenizer,
    seed: int = 0,
    depth: float | None = None,
    value_kind: Literal["word-number", "word"] = "word-number",
    haystack: Literal["docs", "noise"] = "docs",
) -> NeedleTask:
    """A haystack of about ``tokens`` tokens with one needle at ``depth`` (0..1, random when None); the value
    is a word and a number ("amber-4821") or, for the easiest task, one of ten words."""
    rng = random.Random(seed)
    key = rng.choice(_KEYS)
    word, number = rng.choice(_WORDS), rng.randint(1000, 9999)
    value = word if value_kind == "word" else f"{word}-{number}"
    needle = f"The special magic {key} is {value}."
    depth = rng.random() if depth is None else depth
    paragraphs = list(haystack_paragraphs()) if haystack == "docs" else [NOISE_PARAGRAPH]
    start = rng.randrange(len(paragraphs))
    chosen: list[str] = []
    total = tokenizer.count(needle)
    index = start
    while total < tokens:
        paragraph = paragraphs[index % len(paragraphs)]
        chosen.append(paragraph)
        total += tokenizer.count(paragraph) + 1
        index += 1
    chosen.insert(round(depth * len(chosen)), needle)
    return NeedleTask(
        text="\n\n".join(chosen),
        question=f"What is the special magic {key}?",
        answer=value,
        depth=depth,
    )
