"""Verifiable rewards: MemAgent's training verifier, the usual QA metrics and RULER's string match, in a registry.

Every reward function takes the model's final reply (or extracted answer) and the list of gold answers and
returns a float in [0, 1]. Register your own with `@register_reward("name")` (a name taken is refused unless
``replace=True``); look them up with `get_reward`.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

from memagent_graph.errors import ConfigError
from memagent_graph.nodes.answer_extraction import last_boxed
from memagent_graph.registries import registrar

RewardFn = Callable[[str, Sequence[str]], float]
REWARDS: dict[str, RewardFn] = {}

_VERIFIER_TAIL = 300  # MemAgent's verifier reads only the end of the reply (a box early on does not count)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def register_reward(name: str, *, replace: bool = False) -> Callable[[RewardFn], RewardFn]:
    """Decorator: add a reward function to `REWARDS` under ``name``.

    A name taken by another function is refused (`ConfigError`) unless ``replace=True`` overrides it on purpose.
    """
    return registrar(REWARDS, name, replace=replace, what="a reward", decorator="register_reward")


def get_reward(name: str) -> RewardFn:
    """The reward registered as ``name``; `ConfigError` lists the known ones."""
    try:
        return REWARDS[name]
    except KeyError:
        raise ConfigError(f"unknown reward {name!r}; known: {', '.join(sorted(REWARDS))}") from None


def strip_math(text: str) -> str:
    """MemAgent's (MATH-style) answer normaliser: no whitespace, ``\\left``/``\\right``, ``$``, ``%``, degree
    marks; ``\\tfrac``/``\\dfrac`` as ``\\frac``; a leading ``.5`` as ``0.5``."""
    text = re.sub(r"\s+", "", text)
    text = text.replace("\\left", "").replace("\\right", "").replace("\\!", "")
    text = text.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\$", "").replace("$", "")
    text = text.replace("\\%", "").replace("%", "").replace("tfrac", "frac").replace("dfrac", "frac")
    return "0" + text if text.startswith(".") else text


def normalize_answer(text: str) -> str:
    """SQuAD/HotpotQA normalisation: lowercase, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


@register_reward("memagent_verifier")
def memagent_verifier(reply: str, golds: Sequence[str]) -> float:
    """1.0 when the last ``\\boxed{}`` in the reply's last 300 characters equals a gold answer after lowercasing
    and `strip_math` (MemAgent's training reward: strict, no partial credit), else 0.0."""
    boxed = last_boxed(reply[-_VERIFIER_TAIL:].lower())
    if boxed is None:
        return 0.0
    answer = strip_math(boxed)
    return float(any(answer == strip_math(gold.lower()) for gold in golds))


@register_reward("exact_match")
def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer."""
    return float(any(normalize_answer(prediction) == normalize_answer(gold) for gold in golds))


@register_reward("substring_match")
def substring_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when a normalised gold answer contains, or is contained in, the normalised (non-empty) prediction."""
    return max(gold_in_answer(prediction, golds), answer_in_gold(prediction, golds))


def gold_in_answer(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when a normalised (non-empty) gold answer is inside the normalised (non-empty) prediction."""
    predicted = normalize_answer(prediction)
    return float(bool(predicted) and any((gold := normalize_answer(g)) and gold in predicted for g in golds))


def answer_in_gold(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised (non-empty) prediction is inside a normalised gold answer."""
    predicted = normalize_answer(prediction)
    return float(bool(predicted) and any(predicted in normalize_answer(g) for g in golds))


@register_reward("token_f1")
def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """Best token-level F1 against the gold answers (``yes``/``no``/``noanswer`` must match exactly)."""
    return max((_f1(normalize_answer(prediction), normalize_answer(gold)) for gold in golds), default=0.0)


def _f1(predicted: str, gold: str) -> float:
    special = {"yes", "no", "noanswer"}
    if (predicted in special or gold in special) and predicted != gold:
        return 0.0
    common = Counter(predicted.split()) & Counter(gold.split())
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted.split()), same / len(gold.split())
    return 2 * precision * recall / (precision + recall)


@register_reward("ruler_match_all")
def ruler_match_all(prediction: str, golds: Sequence[str]) -> float:
    """RULER ``string_match_all``: the share of gold strings found in the prediction (case-insensitive)."""
    if not golds:
        return 0.0
    lowered = prediction.lower()
    return sum(gold.lower() in lowered for gold in golds) / len(golds)


@register_reward("ruler_match_part")
def ruler_match_part(prediction: str, golds: Sequence[str]) -> float:
    """RULER ``string_match_part``: 1.0 when any gold string is found in the prediction (case-insensitive)."""
    lowered = prediction.lower()
    return float(any(gold.lower() in lowered for gold in golds))
