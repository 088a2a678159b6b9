"""The LangGraph server entry (``langgraph.json`` names ``memagent_graph.integrations.server:graph``).

`graph` is a graph factory: the server calls it per run, and it builds the MemAgent graph once, in a worker
thread, from the environment (all variables optional):

- ``MEMAGENT_BASE_URL`` / ``MEMAGENT_MODEL`` / ``MEMAGENT_API_KEY`` (or ``OPENAI_*``): the OpenAI-compatible
  endpoint; unset means the embedded SmolLM2 engine.
- ``MEMAGENT_TOKENIZER``: a local folder (or ``tokenizer.json``) of the served model's tokenizer; else the
  endpoint's ``/tokenize`` when it has one (vLLM), else the embedded engine's own, else an approximation.
- ``MEMAGENT_DOCUMENTS_DIR``: the folder clients name documents in, by relative path as ``doc_id`` (default:
  the server's working directory); nothing outside it can be read.
- ``MEMAGENT_<OPTION>`` for every `ReadingOptions` field: ``MEMAGENT_CHUNK_TOKENS``, ``MEMAGENT_MEMORY_TOKENS``,
  ``MEMAGENT_ANSWER_TOKENS``, ``MEMAGENT_TEMPERATURE``, ``MEMAGENT_TOP_P``, ``MEMAGENT_PROMPTS`` (a bundled set's
  name), ``MEMAGENT_MEMORY_POLICY``, ``MEMAGENT_QUOTE_MIN_GAIN``, ``MEMAGENT_MAX_ATTEMPTS``; unset ones take the
  engine's defaults, as ``memagent ask`` does (quote memory and 2,048-token chunks on the embedded engine).

The graph is compiled without a checkpointer: the server brings its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

from langgraph.graph.state import CompiledStateGraph

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DEFAULT_MAX_CACHED, DocumentRegistry
from memagent_graph.errors import ConfigError
from memagent_graph.graph import create_memagent
from memagent_graph.integrations.model_choice import choose_model, reading_config
from memagent_graph.reading_options import ReadingOptions

GRAPH_NAME = "memagent"
_lock = threading.Lock()
_built: CompiledStateGraph | None = None


def config_from_env() -> MemAgentConfig:
    """The `MemAgentConfig` of the ``MEMAGENT_*`` reading options over the engine's defaults (`reading_config`)."""
    return reading_config(ReadingOptions.from_env())


def documents_from_env() -> DocumentRegistry:
    """A registry that reads files by relative path under ``MEMAGENT_DOCUMENTS_DIR`` (else the working directory),
    caching a chunked document for every run the server runs at once (``N_JOBS_PER_WORKER``)."""
    root = Path(os.environ.get("MEMAGENT_DOCUMENTS_DIR") or os.getcwd()).expanduser()
    if not root.is_dir():
        raise ConfigError(f"MEMAGENT_DOCUMENTS_DIR={str(root)!r} is not a folder; point it at the documents to serve")
    # a server's runs hold no reference to their document between steps (the state carries only its id): a
    # cache smaller than the runs at once would chunk a document again at every step of every read
    return DocumentRegistry(allowed_root=root, max_cached=max(DEFAULT_MAX_CACHED, _concurrent_runs()))


def _concurrent_runs() -> int:
    """How many runs the LangGraph server runs at once (its ``N_JOBS_PER_WORKER``, default 10)."""
    value = os.environ.get("N_JOBS_PER_WORKER", "10")
    if not value.isdigit():
        raise ConfigError(f"N_JOBS_PER_WORKER={value!r} is not a whole number; set it to the runs to run at once")
    return int(value)


def build_graph() -> CompiledStateGraph:
    """Build the MemAgent graph from the environment (blocking: it may call the endpoint and load a tokenizer)."""
    config = config_from_env()
    documents = documents_from_env()
    choice = choose_model()
    return create_memagent(
        choice.model, documents=documents, tokenizer=choice.tokenizer, config=config, name=GRAPH_NAME
    )


def _shared_graph() -> CompiledStateGraph:
    global _built
    with _lock:
        if _built is None:
            _built = build_graph()
        return _built


async def graph() -> CompiledStateGraph:
    """The server's graph factory: the graph built once (off the event loop) and shared by every run."""
    return await asyncio.to_thread(_shared_graph)
