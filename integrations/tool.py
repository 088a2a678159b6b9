"""MemAgent as a LangChain tool: an agent names a document (an id, or a path under an allowed folder) and a
question; the tool reads the document in chunks and returns the answer, with the memory as its artifact.

The model sees only ``question`` and ``document``. Documents are resolved by a `DocumentRegistry`, so a
model can read registered documents and files under ``allowed_root`` and nothing else. Progress events go
to the calling graph's ``custom`` stream; a `MemAgentError` comes back to the agent as a tool error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from langchain_core.tools import StructuredTool, ToolException
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field

from memagent_graph.agent import MemAgent
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sources import DocumentSource
from memagent_graph.errors import ConfigError, MemAgentError
from memagent_graph.state import MemAgentResult

DEFAULT_NAME = "read_long_document"
DEFAULT_DESCRIPTION = (
    "Read a long document from start to end and answer one question about it. Use it whenever the answer "
    "is in a document too long to read directly (contracts, reports, logs, books): the tool reads it in "
    "chunks, takes notes, and answers from its notes. `document` is a document id or a path relative to the "
    "allowed folder. Ask one self-contained question per call."
)


class ReadDocumentArgs(BaseModel):
    """What the model passes to the tool."""

    question: str = Field(
        description="One self-contained question; the reader sees only this question and the document."
    )
    document: str = Field(
        description=(
            "The document to read: its id, or a file path relative to the allowed folder "
            "(absolute paths and '..' are refused)."
        )
    )


ToolOutput = tuple[str, dict[str, Any]]


def create_memagent_tool(
    agent: MemAgent,
    documents: DocumentRegistry | Mapping[str, DocumentSource] | None = None,
    *,
    allowed_root: str | os.PathLike[str] | None = None,
    name: str = DEFAULT_NAME,
    description: str = DEFAULT_DESCRIPTION,
) -> StructuredTool:
    """A tool that answers ``question`` about ``document`` with ``agent``.

    ``document`` is looked up in ``documents`` (a registry, or a mapping of ids to sources, plus files under
    ``allowed_root``); with neither given, in ``agent.documents``.
    """
    registry = _registry(agent, documents, allowed_root)

    # ``runtime`` is injected by the agent's ToolNode and hidden from the model. It must be annotated exactly
    # ``ToolRuntime`` to be detected (``ToolRuntime | None`` is not); it stays None when called directly.
    def read(question: str, document: str, runtime: ToolRuntime = None) -> ToolOutput:
        try:
            for item in agent.stream(question, registry.get(document)):
                _forward(item, runtime)
        except MemAgentError as exc:
            raise ToolException(str(exc)) from exc
        return _output(item)  # the last item is the result

    async def aread(question: str, document: str, runtime: ToolRuntime = None) -> ToolOutput:
        try:
            async for item in agent.astream(question, registry.get(document)):
                _forward(item, runtime)
        except MemAgentError as exc:
            raise ToolException(str(exc)) from exc
        return _output(item)  # the last item is the result

    return StructuredTool.from_function(
        func=read,
        coroutine=aread,
        name=name,
        description=description,
        args_schema=ReadDocumentArgs,
        response_format="content_and_artifact",
        handle_tool_error=True,
    )


def _registry(
    agent: MemAgent,
    documents: DocumentRegistry | Mapping[str, DocumentSource] | None,
    allowed_root: str | os.PathLike[str] | None,
) -> DocumentRegistry:
    if isinstance(documents, DocumentRegistry):
        if allowed_root is not None:
            raise ConfigError("pass allowed_root to the DocumentRegistry itself, not to create_memagent_tool")
        return documents
    if documents is None and allowed_root is None:
        return agent.documents
    return DocumentRegistry(documents, allowed_root=allowed_root)


def _forward(item: dict[str, Any] | MemAgentResult, runtime: ToolRuntime | None) -> None:
    """Pass a progress event on to the calling graph's ``custom`` stream (none outside a graph)."""
    if runtime is not None and isinstance(item, dict):
        runtime.stream_writer(item)


def _output(result: MemAgentResult) -> ToolOutput:
    artifact = result.model_dump(
        include={"memory", "num_chunks", "usage", "thread_id", "answer_source", "citations", "unsupported"}
    )
    return result.answer, artifact
