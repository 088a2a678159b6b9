"""The quote policy's ``extract`` answer: the model chooses the phrase of the answering note.

Every run of one to `MAX_SPAN_WORDS` consecutive words of the note is a candidate, except those that repeat a
name the question (or the first hop, for a second hop) already gives: a small model's likeliest "answer" is
often an echo of the asked-about name. Each candidate is scored as the model's continuation of a plain-text
prompt (`PROMPT`) followed by a line break, log p(" span\\n" | prompt): the line break is the model's own length
prior, saying where its answer ends. The best candidate answers, so every answer character is the note's and
the choice is the model's. Chosen on the validation book (benchmarks/answer_extraction.py): the chat template
scores worse than plain text, as a probe on other text found (../shared/research/real_text.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote.scoring import ScoreTally, words

PROMPT = "Passage: {line}\nQuestion: {question}\nShort answer, copied from the passage:"
"""What a candidate span continues (then a line break ends it)."""
MAX_SPAN_WORDS = 5
"""The longest candidate, in words: long enough for "nine hundred sixty and nine years"."""
_WORD = re.compile(r"[\w'’-]*\w")
_POSSESSIVE = re.compile(r"['’]s?$")


@runtime_checkable
class SpanScorer(Protocol):
    """A model that scores continuations of a prompt: the embedded engine is one."""

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """log p(continuation | prompt) for each continuation, summed over its tokens."""
        ...


def require_span_scorer(model: object) -> SpanScorer:
    """``model`` as a `SpanScorer`, or a `ConfigError` naming the fix."""
    if not isinstance(model, SpanScorer):
        raise ConfigError(
            f"`quote_answer` 'extract' needs a model that scores continuations (score_continuations), and "
            f"{type(model).__name__} does not; use the embedded engine, or `quote_answer` 'span'"
        )
    return model


def candidate_spans(line: str, *, asked: str) -> list[str]:
    """The runs of 1 to `MAX_SPAN_WORDS` words of ``line`` (as written, inner punctuation kept) that repeat no
    capitalised word of ``asked`` (the question and what it already knows; "Heber's" repeats "Heber"), each
    once, in reading order."""
    names = {_bare(w) for w in words(asked) if w[:1].isupper()}
    found = list(_WORD.finditer(line))
    spans = []
    for first in range(len(found)):
        for last in range(first, min(first + MAX_SPAN_WORDS, len(found))):
            if _bare(found[last].group()) in names:
                break
            spans.append(line[found[first].start() : found[last].end()])
    return list(dict.fromkeys(spans))


def extract_span(
    line: str, question: str, scorer: SpanScorer, *, known: str = "", tally: ScoreTally | None = None
) -> str:
    """The candidate span of ``line`` (`candidate_spans`, ``known`` the first hop's names) the model scores
    highest as the answer to ``question``, or ``line`` itself when it has no candidate; what the model scored
    is added to ``tally``."""
    spans = candidate_spans(line, asked=f"{question} {known}")
    if not spans:
        return line
    prompt, continuations = PROMPT.format(line=line, question=question), [f" {s}\n" for s in spans]
    scores = scorer.score_continuations(prompt, continuations)
    if tally is not None:
        tally.add_continuations(prompt, continuations)
    return spans[max(range(len(spans)), key=scores.__getitem__)]


def _bare(word: str) -> str:
    """``word`` lowercased without a possessive ending."""
    return _POSSESSIVE.sub("", word.lower())
