"""How the quote policy judges a sentence: query likelihood against an empty passage, cached, and the bridge
terms that carry a question to its second hop.

A sentence's *gain* for a query is log p(query | sentence) − log p(query | empty passage), summed over the
query's tokens (UPR's query likelihood, Sachan et al., 2022). The gains of the memory's own lines are asked
again at every chunk, so `GainCache` keeps them: a line is scored once per query and policy version.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.quote.choice import Draw

_WORD = re.compile(r"[\w'’-]+")
_STRIP = "'’-"
_OPENING = re.compile(r"(?:^|\n|[.!?;:]\s+)[\"'‘“(\[]*\s*$")
"""What comes before a word that opens a sentence: nothing, a line break or a sentence end (then maybe a quote)."""


@runtime_checkable
class PassageScorer(Protocol):
    """A chat model that can say how well each passage predicts a question, and whether its calls accept
    ``quote_from`` (the reply must copy one line of it): the embedded engine is one."""

    accepts_quote_from: bool
    """True when the model's calls take ``quote_from``: the text one whole line of which the reply must copy."""

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """log p(question | passage) for each passage, summed over the question's tokens."""
        ...


@runtime_checkable
class VersionedScorer(Protocol):
    """A scorer whose weights change while it is in use (the trainer's recording policy, at each weight sync)."""

    policy_version: int
    """Which weights score now: every weight sync gives it a new value."""


@runtime_checkable
class ChoiceRecorder(Protocol):
    """A scorer that records the quote policy's draws for training (the trainer's recording policy)."""

    def record_choice(self, draw: Draw, *, metadata: Mapping[str, Any]) -> None:
        """Record one draw; ``metadata`` is the run's (episode and group ids, the graph node)."""
        ...


def require_scorer(model: object, *, copies: bool = True) -> PassageScorer:
    """``model`` as a `PassageScorer` (that copies a line of a text when ``copies``: the ``copy`` answer), or
    a `ConfigError` naming the fix."""
    if not isinstance(model, PassageScorer) or (copies and not model.accepts_quote_from):
        needs = "scores passages (score_passages) and copies a line of them (accepts_quote_from)"
        raise ConfigError(
            f"`memory_policy` 'quote' needs a model that {needs if copies else 'scores passages (score_passages)'}, "
            f"and {type(model).__name__} does not; use the embedded engine, or `memory_policy` 'generate'"
        )
    return model


@dataclass
class ScoreTally:
    """What one memory update asked of the model: passages scored and the tokens they and their queries hold
    (``count`` tokens each)."""

    count: Callable[[str], int]
    passages: int = 0
    tokens: int = 0

    def add(self, query: str, passages: Sequence[str]) -> None:
        """Count ``passages`` scored for ``query``."""
        self.passages += len(passages)
        self.tokens += sum(self.count(p) for p in passages) + len(passages) * self.count(query)

    def add_continuations(self, prompt: str, continuations: Sequence[str]) -> None:
        """Count ``continuations`` scored after one ``prompt`` (computed once)."""
        self.tokens += self.count(prompt) + sum(self.count(c) for c in continuations)


class GainCache:
    """Gains of passages for queries, each (query, passage) pair scored once per policy version for as long as
    it stays among the ``max_entries`` most recently used; a query's empty passage is scored in the same batch
    as its first passages. Safe to share between threads (a pair two threads miss at once is scored twice,
    harmlessly).

    Scores are keyed by the scorer's ``policy_version`` (a `VersionedScorer`; 0 for a scorer whose weights never
    change) rather than cleared when weights load: the cache lives inside a graph's policy, which a rollout
    worker's ``load_weights`` does not reach, while the scorer always knows which weights score. A score is
    filed under the version it was asked for, and an older version's scores, never asked for again, are the
    least recently used: the first to go.
    """

    def __init__(self, scorer: PassageScorer, *, max_entries: int = 16_384) -> None:
        self.scorer = scorer
        self.max_entries = max_entries
        self._versioned = scorer if isinstance(scorer, VersionedScorer) else None
        self._scores: OrderedDict[tuple[int, str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def gains(self, query: str, passages: Sequence[str], tally: ScoreTally | None = None) -> list[float]:
        """The gain of each passage for ``query``; what the model scored is added to ``tally``."""
        scores = self._scores_of(query, passages, tally)
        return [scores[p] - scores[""] for p in passages]

    def surprise(self, query: str, tally: ScoreTally | None = None) -> float:
        """−log p(query | empty passage): the most any passage can gain for ``query``."""
        return -self._scores_of(query, [], tally)[""]

    def _scores_of(self, query: str, passages: Sequence[str], tally: ScoreTally | None) -> dict[str, float]:
        version = 0 if self._versioned is None else self._versioned.policy_version
        wanted = list(dict.fromkeys(["", *passages]))
        with self._lock:
            known = {p: self._recall((version, query, p)) for p in wanted if (version, query, p) in self._scores}
        missing = [p for p in wanted if p not in known]
        if missing:
            known.update(zip(missing, self.scorer.score_passages(query, missing), strict=True))
            with self._lock:
                self._scores.update(((version, query, p), known[p]) for p in missing)
                while len(self._scores) > self.max_entries:
                    self._scores.popitem(last=False)
            if tally is not None:
                tally.add(query, missing)
        return known

    def _recall(self, key: tuple[int, str, str]) -> float:
        self._scores.move_to_end(key)
        return self._scores[key]


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """The words of ``text`` (letters, digits, inner apostrophes and hyphens), as written, each with its
    (start, end) in ``text``."""
    spans = []
    for match in _WORD.finditer(text):
        if word := match.group().strip(_STRIP):
            start = match.start() + match.group().index(word)
            spans.append((start, start + len(word), word))
    return spans


def words(text: str) -> list[str]:
    """The words of ``text`` (`word_spans`), as written."""
    return [word for _, _, word in word_spans(text)]


def is_name_or_value(word: str) -> bool:
    """A word that names something or states a value: it has a digit, or it starts with a capital and has more
    than one letter ("I", "A" and "O" are not names)."""
    return _has_digit(word) or (word[:1].isupper() and len(word) > 1)


def names_and_values(text: str, *, context: str = "") -> list[tuple[int, int]]:
    """The (start, end) of each word of ``text`` that `is_name_or_value`, less the capitalised words that only
    open a sentence ("And", "Then", "Tell"): an opening word counts when ``text`` or ``context`` also writes it
    capitalised inside a sentence ("Dovan" of "Dovan Maruk was born…" after "…mentor is Dovan Maruk."); a
    value (a word with a digit) always counts."""
    found = [(start, end, word) for start, end, word in word_spans(text) if is_name_or_value(word)]
    inside = {word for start, _, word in found if not _opens_sentence(text, start)} | _inside_names(context)
    return [
        (start, end)
        for start, end, word in found
        if word in inside or _has_digit(word) or not _opens_sentence(text, start)
    ]


def _has_digit(word: str) -> bool:
    return any(c.isdigit() for c in word)


def _opens_sentence(text: str, start: int) -> bool:
    return _OPENING.search(text[:start]) is not None


def _inside_names(text: str) -> set[str]:
    return {word for start, _, word in word_spans(text) if is_name_or_value(word) and not _opens_sentence(text, start)}


def bridge_terms(line: str, question: str, *, context: str = "") -> str:
    """The names and values of ``line`` (`names_and_values`, ``context`` the rest of the memory) that
    ``question`` does not mention, in order ("Dovan Maruk" for "Ilvara Tesk's mentor is Dovan Maruk." asked
    "Where was Ilvara Tesk's mentor born?"): what a second hop must be about. Empty when ``line`` adds none."""
    asked = {w.lower() for w in words(question)}
    named = (line[start:end] for start, end in names_and_values(line, context=context))
    return " ".join(w for w in named if w.lower() not in asked)
