"""The memory budget: a new memory is cut to ``memory_tokens`` by the policy tokenizer; empty keeps the old one."""

from __future__ import annotations

from dataclasses import dataclass

from memagent_graph.documents.sanitize import Sanitizer
from memagent_graph.documents.tokenization import Tokenizer


@dataclass(frozen=True)
class BudgetedMemory:
    """The memory to keep, its size in tokens, and what the budget did to it."""

    text: str
    tokens: int
    truncated: bool
    empty: bool
    sanitized: int = 0


def enforce_memory_budget(
    reply: str, *, previous: str, tokenizer: Tokenizer, budget: int, sanitizer: Sanitizer | None = None
) -> BudgetedMemory:
    """Turn a model reply into the next memory: strip reasoning before ``</think>``, defang control tokens
    (``sanitizer``), cut to ``budget`` tokens.

    An empty reply keeps ``previous`` (flagged ``empty``) so one bad call never erases what was read.
    """
    text = reply.rsplit("</think>", 1)[-1].strip()
    cleaned = (sanitizer or Sanitizer()).clean(text)
    text, sanitized = cleaned.text, cleaned.changes
    if not text:
        tokens = tokenizer.count(previous) if previous else 0
        return BudgetedMemory(previous, tokens, truncated=False, empty=True, sanitized=sanitized)
    ids = tokenizer.encode(text)
    if len(ids) <= budget:
        return BudgetedMemory(text, len(ids), truncated=False, empty=False, sanitized=sanitized)
    cut = tokenizer.decode(ids[:budget]).rstrip("\ufffd")
    return BudgetedMemory(cut, tokenizer.count(cut), truncated=True, empty=False, sanitized=sanitized)
