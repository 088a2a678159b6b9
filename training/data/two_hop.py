"""Synthetic two-hop questions: two linked facts far apart in a long document (offline, any length).

"Ilvara Tesk's mentor is Dovan Maruk." early on, "Dovan Maruk was born in Quelmarsh." much later; the question
asks where Ilvara Tesk's mentor was born. People and places are made-up words, so the answer cannot come from
what a model already knows, and distractor facts about other people share both relations, so neither fact
alone answers it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from memagent_graph.documents.haystack import insert_at_depths
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.training.data.haystacks import HaystackSource, filler
from memagent_graph.training.data.ruler_tasks import Split
from memagent_graph.training.data.tasks import Task

_ONSETS = "b d f g k l m n p r s t v z br dr gr kl st tr".split()
_VOWELS = "a e i o u ai ei ou".split()
_PLACE_ENDINGS = ("marsh", "ford", "holm", "wick", "dale", "mere")


@dataclass(frozen=True)
class Relations:
    """The wording of the two facts and of the question."""

    link: str
    """Fact one, ``{a}`` to ``{b}``."""
    place: str
    """Fact two, ``{b}`` to ``{place}``."""
    question: str
    """About ``{a}``."""


EVAL_RELATIONS = Relations(
    link="{a}'s mentor is {b}.", place="{b} was born in {place}.", question="In which town was {a}'s mentor born?"
)
# Training wording: a link relation (with how a question names the linked person) and a place relation
# (with its question), 6 x 4 = 24 pairs; none says "mentor" or "born", the evaluation's wording.
_TRAIN_LINKS = (
    ("{a} shares an office with {b}.", "the person who shares an office with {a}"),
    ("{b} is the older sibling of {a}.", "{a}'s older sibling"),
    ("{a} works as an assistant to {b}.", "the person {a} assists"),
    ("{a} is married to {b}.", "{a}'s spouse"),
    ("{b} taught {a} to paint.", "the person who taught {a} to paint"),
    ("{a} rents a room from {b}.", "{a}'s landlord"),
)
_TRAIN_PLACES = (
    ("{b} grew up in {place}.", "Where did {who} grow up?"),
    ("{b} now lives in {place}.", "In which town does {who} live now?"),
    ("{b} runs a bakery in {place}.", "In which town does {who} run a bakery?"),
    ("{b} retired to {place}.", "To which town did {who} retire?"),
)
TRAIN_RELATIONS = tuple(
    Relations(link=link, place=place, question=question.replace("{who}", who))
    for link, who in _TRAIN_LINKS
    for place, question in _TRAIN_PLACES
)


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)).capitalize()


def made_up_name(rng: random.Random) -> str:
    """A two-part made-up personal name, e.g. "Drei Kobumo"."""
    return f"{_word(rng, rng.randint(2, 3))} {_word(rng, rng.randint(2, 3))}"


def made_up_place(rng: random.Random) -> str:
    """A made-up town name, e.g. "Toubraholm"."""
    return _word(rng, 2) + rng.choice(_PLACE_ENDINGS)


def two_hop(
    tokens: int,
    tokenizer: Tokenizer,
    rng: random.Random,
    *,
    split: Split,
    haystack: HaystackSource = "kjv",
    distractors: int = 3,
) -> Task:
    """A two-hop question: the link fact in the first 40% of the document, the place fact in the last 40%,
    and ``distractors`` other people with both relations scattered around."""
    relations = EVAL_RELATIONS if split == "eval" else rng.choice(TRAIN_RELATIONS)
    people = set()
    while len(people) < 2 * (distractors + 1):
        people.add(made_up_name(rng))
    ordered = sorted(people)
    rng.shuffle(ordered)
    pairs = [(ordered[2 * i], ordered[2 * i + 1]) for i in range(distractors + 1)]
    places: list[str] = []
    while len(places) < len(pairs):
        place = made_up_place(rng)
        places += [] if place in places else [place]
    facts = [(rng.uniform(0.0, 0.4), relations.link.format(a=pairs[0][0], b=pairs[0][1]))]
    facts.append((rng.uniform(0.6, 1.0), relations.place.format(b=pairs[0][1], place=places[0])))
    for (a, b), place in zip(pairs[1:], places[1:], strict=True):
        facts.append((rng.random(), relations.link.format(a=a, b=b)))
        facts.append((rng.random(), relations.place.format(b=b, place=place)))
    budget = tokens - sum(tokenizer.count(fact) + 1 for _, fact in facts)
    document = insert_at_depths(filler(budget, source=haystack, tokenizer=tokenizer, rng=rng), facts)
    evidence = (facts[0][1], facts[1][1])  # the link comes first: its depth is below every place fact's
    return Task(relations.question.format(a=pairs[0][0]), "\n".join(document), [places[0]], evidence)
