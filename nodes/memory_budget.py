"""The memory budget: a new memory is cut to ``memory_tokens`` by the policy tokenizer; empty keeps the old one."""

from __future__ import annotations

from dataclasses import dataclass

from memagent_graph.tokenization import Tokenizer


@dataclass(frozen=True)
class BudgetedMemory:
    """The memory to keep, its size in tokens, and what the budget did to it."""

    text: str
    tokens: int
    truncated: bool
    empty: bool


def enforce_memory_budget(reply: str, *, previous: str, tokenizer: Tokenizer, budget: int) -> BudgetedMemory:
    """Turn a model reply into the next memory: strip reasoning before ``</think>``, cut to ``budget`` tokens.

    An empty reply keeps ``previous`` (flagged ``empty``) so one bad call never erases what was read.
    """
    text = reply.rsplit("</think>", 1)[-1].strip()
    if not text:
        return BudgetedMemory(previous, tokenizer.count(previous) if previous else 0, truncated=False, empty=True)
    ids = tokenizer.encode(text)
    if len(ids) <= budget:
        return BudgetedMemory(text, len(ids), truncated=False, empty=False)
    cut = tokenizer.decode(ids[:budget]).rstrip("\ufffd")
    return BudgetedMemory(cut, tokenizer.count(cut), truncated=True, empty=False)
