"""MemAgent in RAG pipelines: a retriever that reads a whole document for each query, and a document compressor
that reads the documents another retriever found into one question-specific memory.

Both return the source passages the answer was read from, best first: one `Document` per citation, its text
as in the original with ``context_chars`` around it (within the chunk read), and metadata ``source`` (the
file or the original document's ``source``), ``part`` (which input document), ``start_index`` (where
``page_content`` starts in it, as LangChain's text splitters say), ``line``, ``chunk``, ``score``,
``kind="passage"``. Then, unless ``include_memory=False``, the memory itself: bounded by ``memory_tokens``
however long the input was, with ``kind="memory"``, ``doc_id``, ``num_chunks``, ``answer``, ``answer_source``,
``thread_id`` and ``unsupported`` (its spans found nowhere in the input). Every document has ``retriever="memagent"``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import Document
from langchain_core.documents.compressor import BaseDocumentCompressor
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from memagent_graph.agent import MemAgent
from memagent_graph.documents.sources import DocumentSource, LangChainDocuments
from memagent_graph.state import MemAgentResult


class MemAgentRetriever(BaseRetriever):
    """Read ``document`` for each query; return the cited passages, then the memory (see module doc).

    >>> retriever = MemAgentRetriever(agent=agent, document=FileDocument("contract.txt"))
    >>> chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
    >>> chain.invoke("Who may terminate the agreement?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: MemAgent
    document: DocumentSource | str
    """A document source, or the id of a document in the agent's registry."""
    context_chars: int = 200
    """Characters of the original text kept on each side of a cited passage."""
    include_memory: bool = True
    """Return the memory as the last document."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = self.agent.invoke(query, self.document, config={"callbacks": run_manager.get_child()})
        return _documents(self.agent, result, _doc_id(self.document), self.context_chars, self.include_memory)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        result = await self.agent.ainvoke(query, self.document, config={"callbacks": run_manager.get_child()})
        return _documents(self.agent, result, _doc_id(self.document), self.context_chars, self.include_memory)


class MemAgentCompressor(BaseDocumentCompressor):
    """Read the given documents in order (chunks never cross one); return the cited passages, then the memory
    (see module doc; the memory's metadata also has ``num_documents``).

    >>> compressor = MemAgentCompressor(agent=agent)
    >>> *passages, memory = compressor.compress_documents(retriever.invoke(question), question)
    >>> passages[0].metadata["source"], memory.metadata["num_documents"]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: MemAgent
    context_chars: int = 200
    """Characters of the original text kept on each side of a cited passage."""
    include_memory: bool = True
    """Return the memory as the last document."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The passages and memory from reading ``documents`` for ``query``; no documents give an empty list."""
        if not documents:
            return []
        with self._source(documents) as source:
            result = self.agent.invoke(query, source, config={"callbacks": callbacks})
        return self._documents(result, source.doc_id, len(documents))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async `compress_documents`."""
        if not documents:
            return []
        with self._source(documents) as source:
            result = await self.agent.ainvoke(query, source, config={"callbacks": callbacks})
        return self._documents(result, source.doc_id, len(documents))

    @contextlib.contextmanager
    def _source(self, documents: Sequence[Document]) -> Iterator[LangChainDocuments]:
        """``documents`` as one source under a fresh id (one per call: no races), forgotten after the read (no
        one can name this id again; the result keeps its citations)."""
        source = LangChainDocuments(documents, doc_id=f"lc-{uuid.uuid4().hex}")
        try:
            yield source
        finally:
            self.agent.forget(source.doc_id)

    def _documents(self, result: MemAgentResult, doc_id: str, num_documents: int) -> list[Document]:
        return _documents(
            self.agent, result, doc_id, self.context_chars, self.include_memory, num_documents=num_documents
        )


def _doc_id(document: DocumentSource | str) -> str:
    return document if isinstance(document, str) else document.doc_id


def _documents(
    agent: MemAgent, result: MemAgentResult, doc_id: str, context_chars: int, include_memory: bool, **extra: Any
) -> list[Document]:
    """The cited passages, best first, then (``include_memory``) the memory."""
    documents = []
    for citation in result.citations:
        text, start = agent.passage(citation, context_chars=context_chars)
        metadata = {
            "source": citation["source"] or citation["doc_id"],
            "part": citation["part"],
            "start_index": start,
            "line": citation["line"],
            "chunk": citation["chunk"],
            "score": citation["score"],
            "kind": "passage",
            "retriever": "memagent",
        }
        documents.append(Document(page_content=text, metadata=metadata))
    if include_memory:
        metadata = {
            "doc_id": doc_id,
            "num_chunks": result.num_chunks,
            "answer": result.answer,
            "answer_source": result.answer_source,
            "thread_id": result.thread_id,
            "unsupported": result.unsupported,
            "kind": "memory",
            "retriever": "memagent",
            **extra,
        }
        documents.append(Document(page_content=result.memory, metadata=metadata))
    return documents
