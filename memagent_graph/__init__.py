"""memagent-graph: MemAgent as a LangGraph component.

An LLM reads a document of any length in fixed-size token chunks, overwriting a bounded memory after each
chunk, then answers from the memory alone. Cost is linear in length; every call's context is constant.
"""

from memagent_graph.agent import MemAgent
from memagent_graph.chunking import ChunkedDocument, chunk_document
from memagent_graph.config import MemAgentConfig
from memagent_graph.documents import DocumentSource, FileDocument, LangChainDocuments, TextDocument
from memagent_graph.errors import MemAgentError
from memagent_graph.graph import build_memagent_graph, create_memagent, recursion_limit_for
from memagent_graph.prompts import PromptSet
from memagent_graph.registry import DocumentRegistry
from memagent_graph.state import MemAgentResult, RunSettings
from memagent_graph.tokenization import (
    ApproximateTokenizer,
    HuggingFaceTokenizer,
    Tokenizer,
    VLLMServerTokenizer,
)

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
