"""MemAgent in RAG pipelines: a retriever whose one result is the memory after reading a whole document, and a
document compressor that reads the documents another retriever found into one question-specific memory.

The memory is the evidence: it holds what the model kept while reading, and it is bounded by ``memory_tokens``
however long the input was. Both return one `Document` whose metadata says how it was made
(``doc_id``, ``num_chunks``, ``answer``, ``answer_source``, ``thread_id``, ``retriever="memagent"``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
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
    """Read ``document`` for each query and return the final memory as one `Document`.

    >>> retriever = MemAgentRetriever(agent=agent, document=FileDocument("contract.txt"))
    >>> chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm
    >>> chain.invoke("Who may terminate the agreement?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: MemAgent
    document: DocumentSource | str
    """A document source, or the id of a document in the agent's registry."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        result = self.agent.invoke(query, self.document, config={"callbacks": run_manager.get_child()})
        return [_memory_document(result, _doc_id(self.document))]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        result = await self.agent.ainvoke(query, self.document, config={"callbacks": run_manager.get_child()})
        return [_memory_document(result, _doc_id(self.document))]


class MemAgentCompressor(BaseDocumentCompressor):
    """Read the given documents in order (chunks never cross one) and return the memory as one `Document`.

    >>> compressor = MemAgentCompressor(agent=agent)
    >>> [evidence] = compressor.compress_documents(retriever.invoke(question), question)
    >>> evidence.page_content, evidence.metadata["num_documents"]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    agent: MemAgent

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The memory after reading ``documents`` for ``query``; no documents give an empty list."""
        if not documents:
            return []
        source = LangChainDocuments(documents, doc_id=f"lc-{uuid.uuid4().hex}")  # one id per call: no races
        try:
            result = self.agent.invoke(query, source, config={"callbacks": callbacks})
        finally:
            self.agent.documents.discard(source.doc_id)  # one-off input: keep the registry from growing
        return [_memory_document(result, source.doc_id, num_documents=len(documents))]

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async `compress_documents`."""
        if not documents:
            return []
        source = LangChainDocuments(documents, doc_id=f"lc-{uuid.uuid4().hex}")  # one id per call: no races
        try:
            result = await self.agent.ainvoke(query, source, config={"callbacks": callbacks})
        finally:
            self.agent.documents.discard(source.doc_id)
        return [_memory_document(result, source.doc_id, num_documents=len(documents))]


def _doc_id(document: DocumentSource | str) -> str:
    return document if isinstance(document, str) else document.doc_id


def _memory_document(result: MemAgentResult, doc_id: str, **extra: Any) -> Document:
    metadata = {
        "doc_id": doc_id,
        "num_chunks": result.num_chunks,
        "answer": result.answer,
        "answer_source": result.answer_source,
        "thread_id": result.thread_id,
        "retriever": "memagent",
        **extra,
    }
    return Document(page_content=result.memory, metadata=metadata)
