"""memagent-graph: MemAgent as a LangGraph component.

An LLM reads a document of any length in fixed-size token chunks, overwriting a bounded memory after each
chunk, then answers from the memory alone. Cost is linear in length; every call's context is constant.

Names are imported on first use (PEP 562), so ``import memagent_graph`` and the CLI start fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "MemAgent": "agent",
    "ChunkedDocument": "chunking",
    "chunk_document": "chunking",
    "MemAgentConfig": "config",
    "DocumentSource": "documents",
    "FileDocument": "documents",
    "LangChainDocuments": "documents",
    "TextDocument": "documents",
    "MemAgentError": "errors",
    "build_memagent_graph": "graph",
    "create_memagent": "graph",
    "recursion_limit_for": "graph",
    "PromptSet": "prompts",
    "DocumentRegistry": "registry",
    "MemAgentResult": "state",
    "RunSettings": "state",
    "ApproximateTokenizer": "tokenization",
    "HuggingFaceTokenizer": "tokenization",
    "Tokenizer": "tokenization",
    "VLLMServerTokenizer": "tokenization",
}

__all__ = [
    "ApproximateTokenizer",
    "ChunkedDocument",
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
    "RunSettings",
    "TextDocument",
    "Tokenizer",
    "VLLMServerTokenizer",
    "build_memagent_graph",
    "chunk_document",
    "create_memagent",
    "recursion_limit_for",
]

if TYPE_CHECKING:
    from memagent_graph.agent import MemAgent
    from memagent_graph.chunking import ChunkedDocument, chunk_document
    from memagent_graph.config import MemAgentConfig
    from memagent_graph.documents import DocumentSource, FileDocument, LangChainDocuments, TextDocument
    from memagent_graph.errors import MemAgentError
    from memagent_graph.graph import build_memagent_graph, create_memagent, recursion_limit_for
    from memagent_graph.prompts import PromptSet
    from memagent_graph.registry import DocumentRegistry
    from memagent_graph.state import MemAgentResult, RunSettings
    from memagent_graph.tokenization import ApproximateTokenizer, HuggingFaceTokenizer, Tokenizer, VLLMServerTokenizer


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'memagent_graph' has no attribute {name!r}")
    value = getattr(import_module(f"memagent_graph.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
