"""The named task families `memagent eval` and the trainer draw from, with their metrics and seeds.

`generate_tasks("niah_single_2", 20, tokens=65_536, tokenizer=tok, split="eval")` gives the same 20 tasks on
every machine. Seeds are derived from the split's name, so training tasks (``split="train"``) and evaluation
tasks never share a seed, and training uses other phrasings of needles and questions than evaluation.

Three splits are asked for: ``train``, ``validation`` (what a trainer checks itself on while it trains) and
``eval`` (what `memagent eval` reports). A generated family has one held-out split, its evaluation phrasing:
``validation`` draws the same tasks as ``eval``. ``realtext`` (questions mined from the King James Version,
`real_text`) keeps them apart by book: train from Exodus-Joshua and 2 Samuel-2 Kings, validation from Judges,
eval from Genesis (the held-out test); its task ``i`` is question ``i`` of a seeded order, so each held-out
question is read once.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Literal

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.real_text import (
    RealTextSplit,
    RealTextTask,
    RealTextTasks,
    in_haystack,
    real_text_tasks,
)
from memagent_graph.training.data.ruler_tasks import Split, common_words, frequent_words, niah, variable_tracking
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.data.two_hop import two_hop


@dataclass(frozen=True)
class TaskKind:
    """A family of generated tasks: how to make one, how to score its answer, what it tests."""

    make: Callable[..., Task]
    """``make(tokens, tokenizer, rng, split=...) -> Task``, or for an ``indexed`` family
    ``make(index, tokens=..., tokenizer=..., split=..., seed=...) -> Task``."""
    metric: str
    """A reward name (`rewards.get_reward`)."""
    description: str
    indexed: bool = False
    """Task ``index`` is the index-th of a fixed list in a seeded order (mined tasks), not one drawn from a seed."""


SuiteSplit = Literal["train", "validation", "eval"]
"""Training, a trainer's held-out check, `memagent eval`'s held-out report (see the module's docstring)."""
SUITE_SPLITS: tuple[SuiteSplit, ...] = ("train", "validation", "eval")
_REAL_TEXT_SPLITS: dict[str, RealTextSplit] = {"train": "train", "validation": "validation", "eval": "test"}


def check_split(split: str) -> SuiteSplit:
    """``split`` if it is one of `SUITE_SPLITS`, else `ConfigError` naming them."""
    for known in SUITE_SPLITS:
        if split == known:
            return known
    raise ConfigError(f"unknown split {split!r}: use one of {', '.join(SUITE_SPLITS)}")


def real_text_task(index: int, *, tokens: int, tokenizer: Tokenizer, split: SuiteSplit, seed: int = 0) -> RealTextTask:
    """Mined question ``index`` of ``split``'s books (`real_text.real_text_tasks`); the training list is read in
    turn again past its end, a held-out list is not (`ConfigError`: fewer tasks asked for are needed)."""
    tasks = _real_text_list(_REAL_TEXT_SPLITS[check_split(split)], tokens, tokenizer.name, tokenizer, seed)
    if not tasks:
        raise ConfigError(f"no real-text question of the {split} split fits in a document of {tokens} tokens")
    if split == "train":
        return tasks[index % len(tasks)]
    if index >= len(tasks):
        raise ConfigError(
            f"the {split} split has {len(tasks)} real-text questions in documents of at most {tokens} tokens: "
            f"ask for at most {len(tasks)}"
        )
    return tasks[index]


def real_text_haystack_task(index: int, *, tokens: int, tokenizer: Tokenizer, split: SuiteSplit, seed: int = 0) -> Task:
    """`real_text_task` ``index`` at ``tokens``, its window (the split's books whole, where they are shorter) at a
    seeded depth of CPython's help topics up to ``tokens`` (`real_text.in_haystack`): real text at 1M tokens."""
    task = real_text_task(index, tokens=tokens, tokenizer=tokenizer, split=split, seed=seed)
    rng = random.Random(task_seed("realtext_haystack", split, seed, index))
    return in_haystack(task, tokens=tokens, tokenizer=tokenizer, rng=rng)


@lru_cache(maxsize=8)
def _real_text_list(
    split: RealTextSplit, tokens: int, tokenizer_name: str, tokenizer: Tokenizer, seed: int
) -> RealTextTasks:
    return real_text_tasks(split, tokens=tokens, tokenizer=tokenizer, seed=seed)


_ALL = "ruler_match_all"
TASK_KINDS: dict[str, TaskKind] = {
    "niah_single_1": TaskKind(partial(niah, haystack="noise"), _ALL, "one needle (number) in repeated noise"),
    "niah_single_2": TaskKind(partial(niah, haystack="kjv"), _ALL, "one needle (number) in the KJV text"),
    "niah_single_3": TaskKind(partial(niah, value_kind="uuid"), _ALL, "one needle (UUID) in the KJV text"),
    "niah_multikey_1": TaskKind(partial(niah, keys=4), _ALL, "one of 4 keys asked, 3 distractor needles"),
    "niah_multikey_2": TaskKind(partial(niah, haystack="needles"), _ALL, "a haystack made of distractor needles"),
    "niah_multikey_3": TaskKind(
        partial(niah, haystack="needles", key_kind="uuid", value_kind="uuid"), _ALL, "UUID keys and values"
    ),
    "niah_multivalue": TaskKind(partial(niah, values=4), _ALL, "4 values of one key, all asked"),
    "niah_multiquery": TaskKind(partial(niah, keys=4, queries=4), _ALL, "4 keys asked at once"),
    "vt": TaskKind(variable_tracking, _ALL, "variable tracking: a 4-hop chain of assignments"),
    "cwe": TaskKind(common_words, _ALL, "the 10 most common words of a list"),
    "fwe": TaskKind(frequent_words, _ALL, "the 3 most frequent coded words"),
    "two_hop": TaskKind(two_hop, _ALL, "two linked facts far apart"),
    "realtext": TaskKind(
        real_text_task, "substring_match", "questions mined from the King James Version, held out by book", True
    ),
    "realtext_haystack": TaskKind(
        real_text_haystack_task,
        "substring_match",
        "realtext questions, their books at a seeded depth of CPython's help topics (for lengths past the books)",
        True,
    ),
}


def task_seed(name: str, split: Split, seed: int, index: int) -> int:
    """The seed of task ``index`` of family ``name``: a hash of all four (splits and families never collide)."""
    digest = hashlib.sha256(f"{name}/{split}/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def get_task_kind(name: str) -> TaskKind:
    """The task family ``name``; `ConfigError` lists the known ones."""
    try:
        return TASK_KINDS[name]
    except KeyError:
        raise ConfigError(f"unknown task {name!r}: choose one of {', '.join(TASK_KINDS)}") from None


def generate_tasks(
    name: str, count: int, *, tokens: int, tokenizer: Tokenizer, split: SuiteSplit = "eval", seed: int = 0
) -> list[Task]:
    """``count`` tasks of family ``name``, each about ``tokens`` tokens long in ``tokenizer``'s tokens."""
    return [
        suite_task(name, index, tokens=tokens, tokenizer=tokenizer, split=split, seed=seed) for index in range(count)
    ]


def suite_task(name: str, index: int, *, tokens: int, tokenizer: Tokenizer, split: SuiteSplit, seed: int = 0) -> Task:
    """Task ``index`` of family ``name`` in ``split``: the same on every machine; `ConfigError` names the
    families and the splits."""
    kind, split = get_task_kind(name), check_split(split)
    if kind.indexed:
        return kind.make(index, tokens=tokens, tokenizer=tokenizer, split=split, seed=seed)
    drawn: Split = "train" if split == "train" else "eval"
    rng = random.Random(task_seed(name, drawn, seed, index))
    return kind.make(tokens, tokenizer, rng, split=drawn)
