"""One rule for every registry by name (advantage estimators, rewards, memory policies): a name taken by
another entry is refused with the way to override it, ``replace=True`` overrides on purpose, and registering
the same entry again changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memagent_graph.errors import ConfigError
from memagent_graph.nodes import policy_registry
from memagent_graph.training import rewards
from memagent_graph.training.rl import algorithms

REGISTRIES = {  # the registry's dict (module, attribute), its decorator, a name it holds
    "advantage": ((algorithms, "ADVANTAGE_ESTIMATORS"), algorithms.register_advantage, "grpo"),
    "reward": ((rewards, "REWARDS"), rewards.register_reward, "exact_match"),
    "memory policy": ((policy_registry, "_POLICIES"), policy_registry.register_memory_policy, "quote"),
}


@pytest.fixture(params=list(REGISTRIES))
def registry(request, monkeypatch) -> tuple[dict[str, Any], Callable[..., Any], str]:
    """One registry, restored after the test: its entries, its decorator and a name taken."""
    (module, attribute), register, taken = REGISTRIES[request.param]
    entries = dict(getattr(module, attribute))
    monkeypatch.setattr(module, attribute, entries)
    return entries, register, taken


def _other(*args: Any, **kwargs: Any) -> Any:
    return None


def test_a_taken_name_is_refused_with_the_way_to_override_it(registry):
    entries, register, taken = registry
    before = entries[taken]
    with pytest.raises(ConfigError, match=rf"named '{taken}' is registered already.*replace=True"):
        register(taken)(_other)
    assert entries[taken] is before


def test_replace_overrides_a_taken_name_on_purpose(registry):
    entries, register, taken = registry
    assert register(taken, replace=True)(_other) is _other
    assert entries[taken] is _other


def test_registering_the_same_entry_again_changes_nothing(registry):
    entries, register, _ = registry
    register("test-registry-entry")(_other)
    register("test-registry-entry")(_other)
    assert entries["test-registry-entry"] is _other
