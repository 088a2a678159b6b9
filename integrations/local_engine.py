"""Deprecated module path: the embedded engine lives in `memagent_graph.integrations.models`; import
`LocalChatModel`, `embedded_chat_model` and `embedded_tokenizer` from `memagent_graph.integrations`."""

import warnings

from memagent_graph.integrations.models.embedded_chat import LocalChatModel, embedded_chat_model, embedded_tokenizer
from memagent_graph.integrations.models.embedded_files import ensure_local_model

__all__ = ["LocalChatModel", "embedded_chat_model", "embedded_tokenizer", "ensure_local_model"]

warnings.warn(
    "memagent_graph.integrations.local_engine moved: import from memagent_graph.integrations",
    DeprecationWarning,
    stacklevel=2,
)
