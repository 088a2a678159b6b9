"""The quote policy's ``extract`` answer: the model chooses the phrase of the answering note.

The candidates are the note's phrases (`phrases.phrase_runs`: runs of names and of values the question does
not already give, and each name of a longer run); a small model's likeliest "answer" is otherwise often an echo
of the asked-about name or a function word. Each candidate is scored as the model's continuation of a plain-text
prompt (`PROMPT`) followed by a line break, which is the model's own length prior (where its answer ends),
less `PRIOR_WEIGHT` times its score after the same prompt without the passage: a phrase the model would say
for any passage ("Israel") loses to the one this passage makes likely. The best candidate answers, so every
answer character is the note's and the choice is the model's. Chosen on the validation book (Judges, 56
questions, the answering verse given: `benchmarks/answer_extraction.py`); the chat template scored worse than
plain text in a probe on other text (../shared/research/real_text.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote.phrases import phrase_runs
from memagent_graph.nodes.quote.scoring import ScoreTally

PROMPT = "Passage: {line}\nQuestion: {question}\nShort answer, copied from the passage:"
"""What a candidate continues (then a line break ends it)."""
PRIOR_WEIGHT = 0.25
"""How much of a candidate's score without the passage is taken off its score with it (0: none; 1: pointwise
mutual information). Chosen on the validation book among 0, 0.25, 0.5, 0.75 and 1."""
_NAME = re.compile(r"\S+")
"""A word of a run of names (runs join names across spaces only)."""


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


def candidate_spans(line: str, *, asked: str, context: str = "") -> list[str]:
    """The phrases of ``line`` that could answer (`phrase_runs`: names and values that ``asked`` does not
    mention, ``context`` the rest of the memory), and each name of a run of several ("Jael" of "Jael Heber"),
    each once, in reading order."""
    names, values = phrase_runs(line, asked=asked, context=context)
    words = [(start + w.start(), start + w.end()) for start, end in names for w in _NAME.finditer(line[start:end])]
    return list(dict.fromkeys(line[start:end] for start, end in sorted({*names, *values, *words})))


@dataclass(frozen=True)
class SpanScores:
    """The candidates of a note and the model's score of each as the answer, with and without the note."""

    line: str
    spans: list[str]
    given: list[float]
    """log p(" span\n" | the prompt with the note)."""
    prior: list[float]
    """log p(" span\n" | the prompt with an empty passage)."""

    def best(self, prior_weight: float = PRIOR_WEIGHT) -> str:
        """The candidate with the highest ``given - prior_weight * prior`` (the first of a tie): the ``extract``
        answer; the line itself when it has no candidate."""
        if not self.spans:
            return self.line
        scores = [g - prior_weight * p for g, p in zip(self.given, self.prior, strict=True)]
        return self.spans[max(range(len(self.spans)), key=scores.__getitem__)]


def score_spans(
    line: str,
    question: str,
    scorer: SpanScorer,
    *,
    known: str = "",
    context: str = "",
    tally: ScoreTally | None = None,
) -> SpanScores:
    """The candidates of ``line`` (`candidate_spans`, ``known`` the first hop's names) scored by the model as
    the answer to ``question``, with the note and without it; what it scored is added to ``tally``."""
    spans = candidate_spans(line, asked=f"{question} {known}", context=context)
    if not spans:
        return SpanScores(line, [], [], [])
    continuations = [f" {span}\n" for span in spans]
    prompt, bare = PROMPT.format(line=line, question=question), PROMPT.format(line="", question=question)
    given = scorer.score_continuations(prompt, continuations)
    prior = scorer.score_continuations(bare, continuations)
    if tally is not None:
        tally.add_continuations(prompt, continuations)
        tally.add_continuations(bare, continuations)
    return SpanScores(line, spans, given, prior)
