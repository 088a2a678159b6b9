"""The quote policy's ``extract`` answer: the model chooses the phrase of the answering note.

The candidates are the note's phrases (`phrases.phrase_runs`: runs of names and of values the question does
not already give, and each name of a longer run); a small model's likeliest "answer" is otherwise often an echo
of the asked-about name or a function word. Each candidate is scored as the model's continuation of a plain-text
prompt (`PROMPT`) followed by a line break, which is the model's own length prior (where its answer ends),
less `PRIOR_WEIGHT` times its score after the same prompt without the passage: a phrase the model would say
for any passage ("Israel") loses to the one this passage makes likely, and less `DISTANCE_WEIGHT` nats per word
between the candidate and the nearest name the question (or its first hop) gives: the answer to "Who was the
father of Jonathan?" stands next to "Jonathan" ("Jonathan, the son of Gershom"), not at the other end of the
verse (classic QA's proximity feature; a 135M model alone often picks the verse's most familiar name). A
question that asks for a quantity is answered by one of the note's values when it has any (the answer type). The
best candidate answers, so every answer character is the note's and the choice is the model's. Chosen on the
validation book (Judges, 56 questions, the answering verse given: `benchmarks/answer_extraction.py`); the chat
template scored worse than plain text in a probe on other text (../shared/research/real_text.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote.phrases import Span, bare, phrase_runs
from memagent_graph.nodes.quote.scoring import ScoreTally, word_spans, words

PROMPT = "Passage: {line}\nQuestion: {question}\nShort answer, copied from the passage:"
"""What a candidate continues (then a line break ends it)."""
PRIOR_WEIGHT = 0.25
"""How much of a candidate's score without the passage is taken off its score with it (0: none; 1: pointwise
mutual information). Chosen on the validation book among 0, 0.25, 0.5, 0.75 and 1."""
DISTANCE_WEIGHT = 1.0
"""Nats taken off a candidate per word between it and the nearest name the question gives. Chosen on the
validation book among 0, 0.25, 0.5, 1 and 2 (EM 57.1 without, 76.8 with; the nearest candidate alone: 71.4)."""
_NAME = re.compile(r"\S+")
"""A word of a run of names (runs join names across spaces only)."""
_NOT_ANCHORS = frozenset(
    "who whom whose what which where when why how the a an in on of for from to and then name text".split()
)
"""Capitalised words that open a question without naming anything in the line."""
_ASKS_QUANTITY = re.compile(r"\b(?:how (?:many|much|long|old)|what age|(?:which|what) year)\b", re.IGNORECASE)
"""A question whose answer is a quantity: the answer type that a 135M model most often ignores (asked "For how
long was Ahaziah king?", it scores "Ahab" above "two"). Answering with a value when the note has one: EM 44.7 to
48.7 on 150 training-split questions with their verse given (no validation question asks a quantity)."""


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


def asks_quantity(question: str) -> bool:
    """Whether ``question`` asks how many, how much, how long, how old, what age or which year."""
    return _ASKS_QUANTITY.search(question) is not None


def candidate_spans(line: str, *, asked: str, context: str = "") -> list[Span]:
    """Where the phrases of ``line`` that could answer are (`phrase_runs`: names and values that ``asked`` does
    not mention, ``context`` the rest of the memory), with each name of a run of several ("Jael" of "Jael
    Heber"), in reading order; only the values when ``asked`` asks for a quantity and the line has one."""
    names, values = phrase_runs(line, asked=asked, context=context)
    if values and asks_quantity(asked):
        return values
    words = [(start + w.start(), start + w.end()) for start, end in names for w in _NAME.finditer(line[start:end])]
    return sorted({*names, *values, *words})


def asked_names(line: str, *, asked: str) -> list[int]:
    """The word positions (`word_spans`) of ``line``'s capitalised words that ``asked`` also writes capitalised:
    its names, the one that opens it too ("Ehud was the son of whom?"), not its question words."""
    anchors = {bare(word) for word in words(asked) if word[:1].isupper()} - _NOT_ANCHORS
    return [i for i, (_, _, word) in enumerate(word_spans(line)) if word[:1].isupper() and bare(word) in anchors]


def word_distances(line: str, spans: Sequence[Span], *, asked: str) -> list[int]:
    """For each span of ``line``, the words between it and the nearest of the names ``asked`` gives
    (`asked_names`); 0 for every span when ``line`` has none."""
    places = asked_names(line, asked=asked)
    if not places:
        return [0] * len(spans)
    tokens = word_spans(line)
    covered = [[i for i, (a, b, _) in enumerate(tokens) if a < end and b > start] for start, end in spans]
    return [min(abs(i - p) for i in indices for p in places) if indices else 0 for indices in covered]


@dataclass(frozen=True)
class SpanScores:
    """The candidates of a note and the model's score of each as the answer, with and without the note."""

    line: str
    spans: list[str]
    given: list[float]
    """log p(" span\n" | the prompt with the note)."""
    prior: list[float]
    """log p(" span\n" | the prompt with an empty passage)."""
    distances: list[int]
    """Words between each span and the nearest name the question gives (`word_distances`)."""

    def scores(self, prior_weight: float = PRIOR_WEIGHT, distance_weight: float = DISTANCE_WEIGHT) -> list[float]:
        """Each candidate's ``given - prior_weight * prior - distance_weight * distance``."""
        return [
            g - prior_weight * p - distance_weight * d
            for g, p, d in zip(self.given, self.prior, self.distances, strict=True)
        ]

    def best(self, prior_weight: float = PRIOR_WEIGHT, distance_weight: float = DISTANCE_WEIGHT) -> str:
        """The candidate of the highest `scores` (the first of a tie): the ``extract`` answer; the line itself
        when it has no candidate."""
        if not self.spans:
            return self.line
        scores = self.scores(prior_weight, distance_weight)
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
    asked = f"{question} {known}"
    places = candidate_spans(line, asked=asked, context=context)
    if not places:
        return SpanScores(line, [], [], [], [])
    # each phrase once, at its first place: a name said everywhere ("Israel") is near a name asked somewhere
    # (measured at its nearest place instead, EM fell from 76.8 to 75.0 on the validation book)
    first: dict[str, int] = {}
    for (start, end), distance in zip(places, word_distances(line, places, asked=asked), strict=True):
        first.setdefault(line[start:end], distance)
    spans = list(first)
    continuations = [f" {span}\n" for span in spans]
    prompt, bare = PROMPT.format(line=line, question=question), PROMPT.format(line="", question=question)
    given = scorer.score_continuations(prompt, continuations)
    prior = scorer.score_continuations(bare, continuations)
    if tally is not None:
        tally.add_continuations(prompt, continuations)
        tally.add_continuations(bare, continuations)
    return SpanScores(line, spans, given, prior, list(first.values()))
