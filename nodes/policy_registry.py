"""The memory policies by name (``MemAgentConfig.memory_policy``): ``generate`` (MemAgent: the model writes its
notes) and ``quote`` (the model picks document sentences), plus any registered with `register_memory_policy`.

A third-party policy registers a `PolicyFactory` under a new name, then reads with
``MemAgentConfig(memory_policy=name)``; nothing in the graph changes.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.language_models import BaseChatModel

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.nodes.generate_memory import generate_policy
from memagent_graph.nodes.memory_policy import MemoryPolicy, PolicyFactory
from memagent_graph.nodes.quote.memory import quote_policy
from memagent_graph.registries import registrar

_POLICIES: dict[str, PolicyFactory] = {"generate": generate_policy, "quote": quote_policy}


def register_memory_policy(name: str, *, replace: bool = False) -> Callable[[PolicyFactory], PolicyFactory]:
    """Decorator: make a `PolicyFactory` the policy called ``name``.

    A name taken by another factory is refused (`ConfigError`) unless ``replace=True`` overrides it on purpose.
    """
    return registrar(_POLICIES, name, replace=replace, what="a memory policy", decorator="register_memory_policy")


def memory_policy_names() -> list[str]:
    """The names `build_memory_policy` accepts."""
    return list(_POLICIES)


def build_memory_policy(model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig) -> MemoryPolicy:
    """The policy ``config.memory_policy`` names, built for this model (a `ConfigError` names the choices)."""
    factory = _POLICIES.get(config.memory_policy)
    if factory is None:
        raise ConfigError(
            f"unknown `memory_policy` {config.memory_policy!r}: choose from {', '.join(_POLICIES)}, "
            "or register one (memagent_graph.nodes.policy_registry.register_memory_policy)"
        )
    return factory(model, tokenizer, config)
