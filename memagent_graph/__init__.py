"""memagent-graph: MemAgent as a LangGraph component.

An LLM reads a document of any length in fixed-size token chunks, overwriting a bounded memory after each
chunk, then answers from the memory alone. Cost is linear in length; every call's context is constant.

The public surface is below; tokenizers and chunking live in `memagent_graph.documents`, models and LangChain
interfaces in `memagent_graph.integrations`, the trainer in `memagent_graph.training`. Names are imported on
first use (PEP 562), so ``import memagent_graph`` and the CLI start fast.
"""

from __future__ import annotations

import warnings
from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "MemAgent": "agent",
    "MemAgentConfig": "config",
    "MemAgentError": "errors",
    "MemAgentResult": "state",
    "PromptSet": "prompts",
    "build_memagent_graph": "graph",
    "create_memagent": "graph",
    "DocumentRegistry": "documents",
    "DocumentSource": "documents",
    "FileDocument": "documents",
    "HuggingFaceTokenizer": "documents",
    "LangChainDocuments": "documents",
    "TextDocument": "documents",
}
_MOVED = {
    "ApproximateTokenizer": "documents",
    "ChunkedDocument": "documents",
    "Tokenizer": "documents",
    "VLLMServerTokenizer": "documents",
    "chunk_document": "documents",
    "RunSettings": "state",
    "recursion_limit_for": "graph",
}
"""Names exported here before the surface was trimmed: still importable, with a `DeprecationWarning`."""

__all__ = [
    "DocumentRegistry",
    "DocumentSource",
    "FileDocument",
    "HuggingFaceTokenizer",
    "LangChainDocuments",
    "MemAgent",
    "MemAgentConfig",
    "MemAgentError",
    "MemAgentResult",
    "PromptSet",
    "TextDocument",
    "build_memagent_graph",
    "create_memagent",
]

if TYPE_CHECKING:
    from memagent_graph.agent import MemAgent
    from memagent_graph.config import MemAgentConfig
    from memagent_graph.documents import (
        DocumentRegistry,
        DocumentSource,
        FileDocument,
        HuggingFaceTokenizer,
        LangChainDocuments,
        TextDocument,
    )
    from memagent_graph.errors import MemAgentError
    from memagent_graph.graph import build_memagent_graph, create_memagent
    from memagent_graph.prompts import PromptSet
    from memagent_graph.state import MemAgentResult


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        module = f"memagent_graph.{_MOVED[name]}"
        warnings.warn(f"memagent_graph.{name} moved: import it from {module}", DeprecationWarning, stacklevel=2)
        return getattr(import_module(module), name)
    if name not in _EXPORTS:
        raise AttributeError(f"module 'memagent_graph' has no attribute {name!r}")
    value = getattr(import_module(f"memagent_graph.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
