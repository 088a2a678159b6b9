"""Package names imported on first use (PEP 562), so importing a package does not load every backend."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_attributes(
    package: str, exports: Mapping[str, str], *, moved: Mapping[str, str] | None = None
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each name to the module that defines it;
    ``moved`` maps names that moved to their new module (they still import, with a `DeprecationWarning`)."""
    namespace = sys.modules[package].__dict__
    moved = moved or {}

    def __getattr__(name: str) -> Any:
        if name in moved:
            warnings.warn(f"{package}.{name} moved: import it from {moved[name]}", DeprecationWarning, stacklevel=2)
            return getattr(import_module(moved[name]), name)
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(exports[name]), name)
        namespace[name] = value  # later lookups skip this function
        return value

    return __getattr__
