"""The named task families `memagent eval` and the trainer draw from, with their metrics and seeds.

`generate_tasks("niah_single_2", 20, tokens=65_536, tokenizer=tok, split="eval")` gives the same 20 tasks on
every machine. Seeds are derived from the split's name, so training tasks (``split="train"``) and evaluation
tasks never share a seed, and training uses other phrasings of needles and questions than evaluation.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.ruler_tasks import Split, common_words, frequent_words, niah, variable_tracking
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.data.two_hop import two_hop


@dataclass(frozen=True)
class TaskKind:
    """A family of generated tasks: how to make one, how to score its answer, what it tests."""

    make: Callable[..., Task]
    """``make(tokens, tokenizer, rng, split=...) -> Task``."""
    metric: str
    """A reward name (`rewards.get_reward`)."""
    description: str


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
    name: str, count: int, *, tokens: int, tokenizer: Tokenizer, split: Split = "eval", seed: int = 0
) -> list[Task]:
    """``count`` tasks of family ``name``, each about ``tokens`` tokens long in ``tokenizer``'s tokens."""
    return [
        suite_task(name, index, tokens=tokens, tokenizer=tokenizer, split=split, seed=seed) for index in range(count)
    ]


def suite_task(name: str, index: int, *, tokens: int, tokenizer: Tokenizer, split: Split, seed: int = 0) -> Task:
    """Task ``index`` of family ``name`` in ``split``: the same on every machine."""
    rng = random.Random(task_seed(name, split, seed, index))
    return get_task_kind(name).make(tokens, tokenizer, rng, split=split)
