"""`memagent mcp`: the reader as a Model Context Protocol server, for agent hosts outside LangChain.

Built on the official SDK's ``FastMCP`` (`mcp.server.fastmcp`): typed tools whose pydantic return types become
the tools' output schemas, per-request progress and cancellation, stdio and streamable HTTP from one object.
The separate ``fastmcp`` package adds clients, proxies and auth providers this server does not need.

Tools: ``read_document`` (one question, one read: the answer as text; memory, citations and usage as
structured content), ``ask_many`` (several questions, one read in lockstep) and ``list_documents``. Each
registered document (``--document NAME=PATH``) is also a resource with its metadata. Documents are registered
names or files under the allowed root (`DocumentRegistry`: absolute paths, ``..`` and symlinks out are
refused), as for the LangChain tool. A read reports MCP progress after every chunk; a cancelled call stops
within the chunk it is reading (no further model calls). Bad input is a one-line tool error.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from memagent_graph.agent import MemAgent
from memagent_graph.documents.sources import FileDocument
from memagent_graph.errors import MemAgentError
from memagent_graph.state import MemAgentResult

SERVER_NAME = "memagent"
MAX_LISTED = 1000
"""`list_documents` names at most this many files under the allowed root."""
DOCUMENT_URI = "memagent://documents/{name}"
"""The resource of a registered document's metadata."""


class Citation(BaseModel):
    """Where a note of the memory was read: the file (or document id), its character span and first line."""

    document: str
    start: int
    end: int
    line: int


class ReadOutput(BaseModel):
    """One question's read: the answer, the memory it was given from, where that memory was read, and usage."""

    answer: str
    memory: str
    citations: list[Citation]
    num_chunks: int
    usage: dict[str, int]
    elapsed_s: float


class ManyOutput(BaseModel):
    """``ask_many``'s results, one per question, in order."""

    results: list[ReadOutput]


class DocumentInfo(BaseModel):
    """A document a caller may name: a registered name or a file under the allowed root."""

    name: str
    kind: str = Field(description="'registered' or 'file'")
    bytes: int


class DocumentList(BaseModel):
    """What ``list_documents`` found: the registered documents, then files under the root in path order."""

    documents: list[DocumentInfo]
    truncated: bool = Field(False, description=f"whether files beyond the first {MAX_LISTED} were left out")


def create_mcp_server(
    agent: MemAgent,
    *,
    registered: Mapping[str, Path] | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> FastMCP:
    """An MCP server whose tools read with ``agent``: the files under its registry's ``allowed_root`` and the
    ``registered`` documents (name to path), which are added to the registry, listed and offered as resources."""
    named = dict(registered or {})
    for name, path in named.items():
        agent.documents.add(FileDocument(path), doc_id=name)
    server = FastMCP(SERVER_NAME, instructions=_INSTRUCTIONS, host=host, port=port)

    @server.tool(description=_READ_DESCRIPTION)
    async def read_document(
        question: Annotated[str, Field(description="One self-contained question about the document.")],
        document: Annotated[str, Field(description=_DOCUMENT_FIELD)],
        ctx: Context,
    ) -> Annotated[CallToolResult, ReadOutput]:
        with _tool_errors():
            result = await _read_with_progress(agent, question, document, ctx)
        output = _read_output(result)
        return CallToolResult(
            content=[TextContent(type="text", text=result.answer)], structuredContent=output.model_dump()
        )

    @server.tool(description=_MANY_DESCRIPTION)
    async def ask_many(
        questions: Annotated[list[str], Field(description="The questions, each self-contained.", min_length=1)],
        document: Annotated[str, Field(description=_DOCUMENT_FIELD)],
    ) -> ManyOutput:
        with _tool_errors():
            results = await agent.aask_many(questions, agent.documents.get(document))
        return ManyOutput(results=[_read_output(result) for result in results])

    @server.tool(description="The documents this server may read: registered names and files under its root.")
    def list_documents() -> DocumentList:
        return _list_documents(agent, named)

    for name, path in named.items():
        _add_document_resource(server, name, path)
    return server


async def _read_with_progress(agent: MemAgent, question: str, document: str, ctx: Context) -> MemAgentResult:
    """Read, reporting each chunk as MCP progress; a cancelled call also tells the read to stop, so no model
    call starts after the chunk in flight."""
    stop = threading.Event()
    result = None
    try:
        source = agent.documents.get(document)
        tokens = (await asyncio.to_thread(agent.chunk, source)).num_tokens  # chunked once: the read reuses it
        async for item in agent.astream(question, source, stop=stop):
            if isinstance(item, MemAgentResult):
                result = item
                continue
            done = tokens * item["chunk"] // item["total"]
            speed = done / item["elapsed_s"] if item["elapsed_s"] else 0.0
            message = f"chunk {item['chunk']} of {item['total']}, {speed:,.0f} tokens/s"
            await ctx.report_progress(item["chunk"], item["total"], message)
    finally:
        stop.set()
    assert result is not None
    return result


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """A `MemAgentError` inside becomes a one-line MCP tool error (bad input, a path outside the root)."""
    try:
        yield
    except MemAgentError as error:
        raise ToolError(str(error)) from None


def _read_output(result: MemAgentResult) -> ReadOutput:
    citations = [
        Citation(document=c["source"] or c["doc_id"], start=c["start"], end=c["end"], line=c["line"])
        for c in result.citations
    ]
    return ReadOutput(
        answer=result.answer,
        memory=result.memory,
        citations=citations,
        num_chunks=result.num_chunks,
        usage=dict(result.usage),
        elapsed_s=round(result.elapsed_s, 3),
    )


def _list_documents(agent: MemAgent, named: Mapping[str, Path]) -> DocumentList:
    listed = [DocumentInfo(name=name, kind="registered", bytes=path.stat().st_size) for name, path in named.items()]
    root = agent.documents.allowed_root
    files = list(itertools.islice(_files_under(root), MAX_LISTED + 1)) if root is not None else []
    listed += [
        DocumentInfo(name=str(path.relative_to(root)), kind="file", bytes=path.stat().st_size)
        for path in files[:MAX_LISTED]
    ]
    return DocumentList(documents=listed, truncated=len(files) > MAX_LISTED)


def _files_under(root: Path) -> Iterator[Path]:
    """The files under ``root`` that stay inside it (a symlink out is not listed), folder by folder in name
    order, lazily: a host may point the server at a large tree."""
    for folder, subfolders, names in os.walk(root):
        subfolders.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.resolve().is_relative_to(root):
                yield path


def _add_document_resource(server: FastMCP, name: str, path: Path) -> None:
    def metadata() -> str:
        return json.dumps({"name": name, "path": str(path), "bytes": path.stat().st_size})

    server.resource(
        DOCUMENT_URI.format(name=name),
        name=name,
        description=f"Metadata of the registered document {name!r}",
        mime_type="application/json",
    )(metadata)


_INSTRUCTIONS = (
    "Reads documents of any length (books, contracts, logs) in chunks with a bounded memory and answers questions "
    "about them. Call list_documents to see what can be read, then read_document with one question."
)
_READ_DESCRIPTION = (
    "Read a long document from start to end and answer one question about it: returns the answer, the notes it "
    "was given from, and where in the document each note was read (file, character span, line). Progress is "
    "reported after every chunk."
)
_MANY_DESCRIPTION = (
    "Answer several questions about one document in one read (each chunk is read once for all questions)."
)
_DOCUMENT_FIELD = (
    "A registered document name, or a file path relative to the server's allowed folder (absolute paths and '..' "
    "are refused). list_documents names them."
)
