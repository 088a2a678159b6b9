"""Ways in and out of the MemAgent graph: chat-model backends (OpenAI-compatible, the embedded engine), the
agent tool, the RAG retriever and compressor, the subgraph node, and the LangGraph server entry.

Names are imported on first use, so importing one backend does not load the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memagent_graph.lazy_exports import lazy_attributes

_EXPORTS = {
    "DocumentRegistry": "memagent_graph.documents.registry",
    "Endpoint": "memagent_graph.integrations.models.openai_endpoint",
    "chat_model_from_env": "memagent_graph.integrations.models.openai_endpoint",
    "endpoint_from_env": "memagent_graph.integrations.models.openai_endpoint",
    "openai_compatible": "memagent_graph.integrations.models.openai_endpoint",
    "served_model": "memagent_graph.integrations.models.openai_endpoint",
    "create_memagent_tool": "memagent_graph.integrations.tool",
    "MemAgentCompressor": "memagent_graph.integrations.retriever",
    "MemAgentRetriever": "memagent_graph.integrations.retriever",
    "memagent_node": "memagent_graph.integrations.subgraph",
    "LocalChatModel": "memagent_graph.integrations.models.embedded_chat",
    "embedded_chat_model": "memagent_graph.integrations.models.embedded_chat",
    "embedded_tokenizer": "memagent_graph.integrations.models.embedded_chat",
}

__all__ = [
    "DocumentRegistry",
    "Endpoint",
    "LocalChatModel",
    "MemAgentCompressor",
    "MemAgentRetriever",
    "chat_model_from_env",
    "create_memagent_tool",
    "embedded_chat_model",
    "embedded_tokenizer",
    "endpoint_from_env",
    "memagent_node",
    "openai_compatible",
    "served_model",
]

if TYPE_CHECKING:
    from memagent_graph.documents.registry import DocumentRegistry
    from memagent_graph.integrations.models.embedded_chat import LocalChatModel, embedded_chat_model, embedded_tokenizer
    from memagent_graph.integrations.models.openai_endpoint import (
        Endpoint,
        chat_model_from_env,
        endpoint_from_env,
        openai_compatible,
        served_model,
    )
    from memagent_graph.integrations.retriever import MemAgentCompressor, MemAgentRetriever
    from memagent_graph.integrations.subgraph import memagent_node
    from memagent_graph.integrations.tool import create_memagent_tool

__getattr__ = lazy_attributes(__name__, _EXPORTS)
