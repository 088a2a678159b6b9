"""Needle-in-a-haystack documents from text that ships with CPython (offline).

Haystack: the help topics of CPython's `pydoc_data.topics` (Python documentation, © Python Software
Foundation, PSF License Agreement / BSD 0-clause for the docs text), or RULER's "noise" haystack (one
repeated paragraph, the easiest setting). A needle is one sentence, "The special magic <key> is <value>.",
inserted at a chosen depth.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
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
    chosen = consecutive_units(
        paragraphs,
        start=rng.randrange(len(paragraphs)),
        tokens=tokens - tokenizer.count(needle),
        count=lambda index: tokenizer.count(paragraphs[index]),
    )
    return NeedleTask(
        text="\n\n".join(insert_at_depths(chosen, [(depth, needle)])),
        question=f"What is the special magic {key}?",
        answer=value,
        depth=depth,
    )


def consecutive_units(units: Sequence[str], *, start: int, tokens: int, count: Callable[[int], int]) -> list[str]:
    """Units from index ``start`` on (cycling) until they hold about ``tokens`` tokens, counting one separator
    token per unit; ``count(index)`` is the token count of ``units[index]``."""
    chosen: list[str] = []
    total, index = 0, start
    while total < tokens:
        chosen.append(units[index % len(units)])
        total += count(index % len(units)) + 1
        index += 1
    return chosen


def insert_at_depths(units: list[str], inserts: list[tuple[float, str]]) -> list[str]:
    """``units`` with each ``(depth, text)`` inserted at that fraction of the way through (0 start, 1 end)."""
    result = list(units)
    for depth, text in sorted(inserts, key=lambda item: item[0], reverse=True):
        result.insert(round(depth * len(units)), text)
    return result
