"""RULER's synthetic long-context tasks, generated offline at any length (NVIDIA/RULER, Apache-2.0).

Needle-in-a-haystack (single, multi-key, multi-value, multi-query; number or UUID values; a text haystack or
one made of distractor needles), variable tracking, common-words and frequent-words extraction. Each task is
scored by RULER's string match (`rewards.ruler_match_all`: the fraction of gold strings found in the answer).

Keys and word lists come from the ``wonderwords`` package (MIT); haystacks from `haystacks`. The ``eval``
phrasing of needles and questions is RULER's own; ``train`` draws from other phrasings, so a policy trained
on ``train`` tasks is evaluated on wording it never saw.
"""

from __future__ import annotations

import random
import string
import uuid
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import files
from typing import Literal

from memagent_graph.documents.haystack import insert_at_depths
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.training.data.haystacks import HaystackSource, filler
from memagent_graph.training.data.tasks import Task

Split = Literal["train", "eval"]


@dataclass(frozen=True)
class Phrasing:
    """How a needle is written and asked about: ``{kind}`` is "number" or "UUID"."""

    needle: str
    question: str
    """For one key and one value."""
    question_all: str
    """For every value of ``{keys}`` (one key with several values, or several keys)."""


RULER_PHRASING = Phrasing(
    needle="One of the special magic {kind}s for {key} is: {value}.",
    question="What is the special magic {kind} for {keys} mentioned in the provided text?",
    question_all="What are all the special magic {kind}s for {keys} mentioned in the provided text?",
)
# Training wording: a frame (how the fact and the question are worded) around a noun ("access number"),
# 10 frames x 12 nouns = 120 phrasings, none of them RULER's ("special magic"), so that a policy learns to
# find the fact that names the asked key rather than one sentence pattern.
_TRAIN_FRAMES = (
    ("The {noun} of {key} is {value}.", "What is the {noun} of {keys}?", "What are all the {noun}s of {keys}?"),
    (
        "Remember this: the {noun} for {key} is {value}.",
        "What is the {noun} for {keys}?",
        "List every {noun} for {keys}.",
    ),
    (
        "{value} is the {noun} that belongs to {key}.",
        "Which {noun} belongs to {keys}?",
        "Which {noun}s belong to {keys}?",
    ),
    ("Note: {key} has {value} as its {noun}.", "What {noun} does {keys} have?", "Which {noun}s do {keys} have?"),
    (
        "The {noun} registered under the name {key} is {value}.",
        "Which {noun} is registered under the name {keys}?",
        "Which {noun}s are registered under the names {keys}?",
    ),
    (
        "For the record, {key} was given the {noun} {value}.",
        "Which {noun} was {keys} given?",
        "Which {noun}s was {keys} given?",
    ),
    (
        "Keep in mind that one {noun} of {key} is {value}.",
        "Tell me the {noun} of {keys} from the text.",
        "Tell me every {noun} of {keys} from the text.",
    ),
    (
        "An important fact: the {noun} linked to {key} equals {value}.",
        "What {noun} is linked to {keys} in the document?",
        "Which {noun}s are linked to {keys} in the document?",
    ),
    ("{key} -> {noun}: {value}.", "Find the {noun} of {keys}.", "Find every {noun} of {keys}."),
    (
        "According to the archive, the {noun} for {key} is: {value}.",
        "According to the archive, what is the {noun} for {keys}?",
        "According to the archive, what are the {noun}s for {keys}?",
    ),
)
_TRAIN_NOUNS = (
    "secret", "hidden", "lucky", "assigned", "personal", "reserved",
    "registered", "private", "chosen", "backup", "reference", "access",
)  # fmt: skip
TRAIN_PHRASINGS = tuple(
    Phrasing(*(part.replace("{noun}", f"{noun} {{kind}}") for part in frame))
    for frame in _TRAIN_FRAMES
    for noun in _TRAIN_NOUNS
)


def phrasing(split: Split, rng: random.Random) -> Phrasing:
    """RULER's wording for evaluation, one of the others for training."""
    return RULER_PHRASING if split == "eval" else rng.choice(TRAIN_PHRASINGS)


@lru_cache(maxsize=1)
def word_lists() -> dict[str, tuple[str, ...]]:
    """wonderwords' nouns, adjectives and verbs (lowercase letters only)."""
    assets = files("wonderwords.assets")
    lists = {}
    for name in ("noun", "adjective", "verb"):
        words = (assets / f"{name}list.txt").read_text(encoding="utf-8").split()
        lists[name] = tuple(sorted({w for w in words if w.isalpha() and w.islower()}))
    return lists


def random_key(rng: random.Random) -> str:
    """A RULER key: an adjective-noun pair such as "lively-grass"."""
    words = word_lists()
    return f"{rng.choice(words['adjective'])}-{rng.choice(words['noun'])}"


def random_value(kind: str, rng: random.Random) -> str:
    """A 7-digit number or a UUID."""
    return str(rng.randint(1_000_000, 9_999_999)) if kind == "number" else str(uuid.UUID(int=rng.getrandbits(128)))


def _join(keys: list[str]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]


def niah(
    tokens: int,
    tokenizer: Tokenizer,
    rng: random.Random,
    *,
    split: Split,
    haystack: HaystackSource | Literal["needles"] = "kjv",
    key_kind: Literal["word", "uuid"] = "word",
    value_kind: Literal["number", "uuid"] = "number",
    keys: int = 1,
    values: int = 1,
    queries: int = 1,
) -> Task:
    """A needle-in-a-haystack task: ``keys`` keys (``queries`` of them asked) with ``values`` values each;
    the other keys are distractors. ``haystack="needles"`` fills the document with distractor needles."""
    words = phrasing(split, rng)
    kind = "number" if value_kind == "number" else "UUID"

    def new_key() -> str:
        return random_key(rng) if key_kind == "word" else random_value("uuid", rng)

    planted = {new_key(): [random_value(value_kind, rng) for _ in range(values)] for _ in range(keys)}
    asked = rng.sample(list(planted), queries)
    needles = [words.needle.format(kind=kind, key=k, value=v) for k, vs in planted.items() for v in vs]
    budget = tokens - sum(tokenizer.count(n) + 1 for n in needles)
    if haystack == "needles":
        units = _distractor_needles(budget, tokenizer, rng, words, kind, new_key, value_kind, set(planted))
    else:
        units = filler(budget, source=haystack, tokenizer=tokenizer, rng=rng)
    document = insert_at_depths(units, [(rng.random(), needle) for needle in needles])
    template = words.question_all if values > 1 or queries > 1 else words.question
    question = template.format(kind=kind, keys=_join(asked))
    answering = {words.needle.format(kind=kind, key=k, value=v) for k in asked for v in planted[k]}
    evidence = tuple(line for line in document if line in answering)
    return Task(question, "\n".join(document), [v for k in asked for v in planted[k]], evidence)


def _distractor_needles(budget, tokenizer, rng, words, kind, new_key, value_kind, taken) -> list[str]:
    """Needles with other keys, about ``budget`` tokens of them (RULER's "needle" haystack)."""
    sample = [words.needle.format(kind=kind, key=new_key(), value=random_value(value_kind, rng)) for _ in range(32)]
    per_needle = sum(tokenizer.count(s) + 1 for s in sample) / len(sample)
    needles = []
    while len(needles) * per_needle < budget:
        key = new_key()
        if key not in taken:
            needles.append(words.needle.format(kind=kind, key=key, value=random_value(value_kind, rng)))
    return needles


def variable_tracking(tokens: int, tokenizer: Tokenizer, rng: random.Random, *, split: Split, hops: int = 4) -> Task:
    """A chain ``VAR A = 12345``, ``VAR B = VAR A``, ... (``hops`` links) spread through the noise haystack;
    the answer is every variable that holds the value."""
    names: list[str] = []
    while len(names) < hops + 1:
        name = "".join(rng.choices(string.ascii_uppercase, k=5))
        if name not in names:
            names.append(name)
    value = str(rng.randint(10_000, 99_999))
    chain = [f"VAR {names[0]} = {value}."] + [f"VAR {b} = VAR {a}." for a, b in zip(names, names[1:], strict=False)]
    budget = tokens - sum(tokenizer.count(line) + 1 for line in chain)
    units = filler(budget, source="noise", tokenizer=tokenizer, rng=rng)
    depths = sorted(rng.random() for _ in chain)  # in order: each assignment follows the one it copies
    document = insert_at_depths(units, list(zip(depths, chain, strict=True)))
    question = (
        f"Find all variables that are assigned the value {value} in the text."
        if split == "eval"
        else f"Which variable names end up holding the value {value}?"
    )
    return Task(question, "\n".join(document), names, tuple(chain))


def _vocabulary(count: int, rng: random.Random) -> list[str]:
    """``count`` distinct words: wonderwords' lists, then made-up syllable words when those run out."""
    pool = [w for name in ("noun", "adjective", "verb") for w in word_lists()[name]]
    pool = sorted(set(pool))
    rng.shuffle(pool)
    words, seen = pool[:count], set(pool[:count])
    while len(words) < count:
        made = "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(rng.randint(3, 4)))
        if made not in seen:
            seen.add(made)
            words.append(made)
    return words


def common_words(tokens: int, tokenizer: Tokenizer, rng: random.Random, *, split: Split) -> Task:
    """A numbered list of words where 10 appear 30 times and the rest 3 times; name the 10 most common."""
    state = rng.getstate()
    rare_count = max(int((tokens / 4 - 300) / 3), 10)  # a first guess at 4 tokens per item, then corrected
    for _ in range(3):
        rng.setstate(state)
        vocabulary = _vocabulary(10 + rare_count, rng)
        common, rare = vocabulary[:10], vocabulary[10:]
        items = common * 30 + rare * 3
        rng.shuffle(items)
        document = " ".join(f"{i}. {word}" for i, word in enumerate(items, start=1))
        scale = tokens / tokenizer.count(document)
        if abs(scale - 1) < 0.02:
            break
        rare_count = max(int((len(items) * scale - 300) / 3), 10)
    question = (
        "What are the 10 most common words in the list?"
        if split == "eval"
        else "Name the ten words that occur most often in this numbered list."
    )
    return Task(question, document, common)


def frequent_words(tokens: int, tokenizer: Tokenizer, rng: random.Random, *, split: Split, alpha: float = 2.0) -> Task:
    """Coded words drawn with Zipf frequencies (the most frequent replaced by "...." noise); name the three
    most frequent words (counted in the drawn text, so a close call in the draw cannot make the gold wrong)."""
    vocabulary = ["".join(rng.choices(string.ascii_lowercase, k=6)) for _ in range(max(tokens // 50, 8))]
    weights = [(rank + 1) ** -alpha for rank in range(len(vocabulary))]
    per_word = tokenizer.count(" abcdef") + 0.2
    drawn = rng.choices(range(len(vocabulary)), weights=weights, k=max(int(tokens / per_word), 100))
    document = " ".join("...." if i == 0 else vocabulary[i] for i in drawn)
    counts = Counter(i for i in drawn if i != 0)
    top = [vocabulary[i] for i, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:3]]
    question = (
        "What are the three most frequently appeared coded words in the coded text?"
        if split == "eval"
        else "Which three coded words appear most often in the text (ignore the dots)?"
    )
    return Task(question, document, top)
