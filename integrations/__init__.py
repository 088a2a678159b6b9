"""Ways in and out of the MemAgent graph: chat-model backends (OpenAI-compatible, the embedded local engine)."""

from memagent_graph.integrations.openai_compatible import (
    Endpoint,
    chat_model_from_env,
    endpoint_from_env,
    openai_compatible,
    served_model,
)
from memagent_graph.registry import DocumentRegistry

__all__ = [
    "DocumentRegistry",
    "Endpoint",
    "chat_model_from_env",
    "endpoint_from_env",
    "openai_compatible",
    "served_model",
]
