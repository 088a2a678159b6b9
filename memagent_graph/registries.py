"""The one rule of every registry of named functions (memory policies, rewards, advantage estimators): a name
held by another entry is refused, unless the caller overrides it on purpose with ``replace=True``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from memagent_graph.errors import ConfigError

__all__ = ["registrar"]

Entry = TypeVar("Entry")


def registrar(
    table: dict[str, Entry], name: str, *, replace: bool, what: str, decorator: str
) -> Callable[[Entry], Entry]:
    """A decorator that adds its argument to ``table`` under ``name``; ``what`` ("a reward") and ``decorator``
    (the public decorator's name) word the refusal of a name another entry holds."""

    def add(entry: Entry) -> Entry:
        if not replace and table.get(name, entry) is not entry:
            raise ConfigError(
                f"{what} named {name!r} is registered already: choose another name, or "
                f"{decorator}(name, replace=True) to override it"
            )
        table[name] = entry
        return entry

    return add
