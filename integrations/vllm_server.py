"""Deprecated module path: `VLLMServer` lives in `memagent_graph.integrations.models.vllm_server`."""

import warnings

from memagent_graph.integrations.models.vllm_server import VLLMServer, ensure_vllm_venv

__all__ = ["VLLMServer", "ensure_vllm_venv"]

warnings.warn(
    "memagent_graph.integrations.vllm_server moved: import from memagent_graph.integrations.models.vllm_server",
    DeprecationWarning,
    stacklevel=2,
)
