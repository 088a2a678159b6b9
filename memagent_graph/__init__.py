"""memagent-graph: MemAgent as a LangGraph component.

An LLM reads a document of any length in fixed-size token chunks, overwriting a bounded memory after each
chunk, then answers from the memory alone. Cost is linear in length; every call's context is constant.

The public surface is below; tokenizers and chunking live in `memagent_graph.documents`, models and LangChain
interfaces in `memagent_graph.integrations`, the trainer in `memagent_graph.training`. Names are imported on
first use (PEP 562), so ``import memagent_graph`` and the CLI start fast.
"""

from __future__ import annotations

import os
import pkgutil
from typing import TYPE_CHECKING

from memagent_graph.lazy_exports import lazy_attributes

# A Ray worker on another environment's Python (the vLLM rollout actors) gets the driver's folder first on its
# path; from a source checkout that is this folder without `nodes`, `integrations` and `training` (an editable
# install maps them from beside it): there, and only there, the package's links on the path complete it
# (`integrations.models.vllm_environment.package_links` sets MEMAGENT_PACKAGE_LINKS).
if os.environ.get("MEMAGENT_PACKAGE_LINKS"):
    __path__ = pkgutil.extend_path(__path__, __name__)

_EXPORTS = {
    "MemAgent": "memagent_graph.agent",
    "MemAgentConfig": "memagent_graph.config",
    "MemAgentError": "memagent_graph.errors",
    "MemAgentResult": "memagent_graph.state",
    "PromptSet": "memagent_graph.prompts",
    "build_memagent_graph": "memagent_graph.graph",
    "create_memagent": "memagent_graph.graph",
    "DocumentRegistry": "memagent_graph.documents",
    "DocumentSource": "memagent_graph.documents",
    "FileDocument": "memagent_graph.documents",
    "HuggingFaceTokenizer": "memagent_graph.documents",
    "LangChainDocuments": "memagent_graph.documents",
    "TextDocument": "memagent_graph.documents",
}
_MOVED = {
    "ApproximateTokenizer": "memagent_graph.documents",
    "ChunkedDocument": "memagent_graph.documents",
    "Tokenizer": "memagent_graph.documents",
    "VLLMServerTokenizer": "memagent_graph.documents",
    "chunk_document": "memagent_graph.documents",
    "RunSettings": "memagent_graph.state",
    "recursion_limit_for": "memagent_graph.graph",
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

__getattr__ = lazy_attributes(__name__, _EXPORTS, moved=_MOVED)
