"""`MemAgent`: the facade most users call. It registers the document, computes the recursion limit,
streams progress, resumes an unfinished checkpointed thread, and returns a `MemAgentResult`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver

from memagent_graph._sync import iterate_sync, run_sync
from memagent_graph.chunking import ChunkedDocument
from memagent_graph.config import MemAgentConfig
from memagent_graph.documents import DocumentSource
from memagent_graph.errors import ConfigError, EmptyQuestionError
from memagent_graph.graph import create_memagent, recursion_limit_for
from memagent_graph.registry import DocumentRegistry
from memagent_graph.state import EMPTY_USAGE, MemAgentResult, RunSettings, StepRecord
from memagent_graph.tokenization import ApproximateTokenizer, Tokenizer

Document = DocumentSource | str
"""A `DocumentSource`, or the id of a document already in the agent's registry."""

ProgressEvent = dict[str, Any]


class MemAgent:
    """Answer questions about documents of any length with one compiled MemAgent graph.

    >>> agent = MemAgent(model, tokenizer=HuggingFaceTokenizer("path/to/tokenizer"))
    >>> agent.invoke("Who signed the contract?", FileDocument("contract.txt")).answer
    """

    def __init__(
        self,
        model: BaseChatModel,
        *,
        config: MemAgentConfig | None = None,
        tokenizer: Tokenizer | None = None,
        checkpointer: BaseCheckpointSaver | None = None,
        documents: DocumentRegistry | None = None,
        answer_model: BaseChatModel | None = None,
        name: str = "memagent",
    ) -> None:
        self.config = config or MemAgentConfig()
        self.tokenizer = tokenizer or ApproximateTokenizer()
        self.documents = documents if documents is not None else DocumentRegistry()
        self.checkpointer = checkpointer
        self.graph = create_memagent(
            model,
            documents=self.documents,
            tokenizer=self.tokenizer,
            config=self.config,
            answer_model=answer_model,
            checkpointer=checkpointer,
            name=name,
        )

    def chunk(self, document: Document) -> ChunkedDocument:
        """Register ``document`` and return it chunked with this agent's tokenizer and chunk size."""
        doc_id = document if isinstance(document, str) else self.documents.add(document)
        return self.documents.chunked(doc_id, self.tokenizer, self.config.chunk_tokens)

    async def astream(
        self,
        question: str,
        document: Document,
        *,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
    ) -> AsyncIterator[ProgressEvent | MemAgentResult]:
        """Yield progress events (dicts with ``type == "memagent.progress"``), then the `MemAgentResult`."""
        if not question or not question.strip():
            raise EmptyQuestionError("the question is empty; ask something about the document")
        started = time.perf_counter()
        chunked = await asyncio.to_thread(self.chunk, document)
        thread_id = thread_id or uuid.uuid4().hex
        run_config: RunnableConfig = {
            **(config or {}),
            "configurable": {**(config or {}).get("configurable", {}), "thread_id": thread_id},
            "recursion_limit": recursion_limit_for(chunked.num_chunks),
        }
        graph_input = await self._input_or_resume(question, chunked.doc_id, run_config)
        values: dict[str, Any] = {}
        steps: list[StepRecord] = []
        durability = {"durability": "sync"} if self.checkpointer is not None else {}
        async for mode, data in self.graph.astream(
            graph_input, run_config, context=settings or RunSettings(), stream_mode=["updates", "custom"], **durability
        ):
            if mode == "custom":
                yield data
                continue
            for update in data.values():
                if update:
                    values.update(update)
                    if "last_step" in update:
                        steps.append(update["last_step"])
        yield MemAgentResult(
            answer=values.get("answer", ""),
            answer_source=values.get("answer_source", "reply"),
            memory=values.get("memory", ""),
            num_chunks=chunked.num_chunks,
            steps=steps,
            usage=values.get("usage", EMPTY_USAGE),
            elapsed_s=round(time.perf_counter() - started, 4),
            thread_id=thread_id,
        )

    async def _input_or_resume(self, question: str, doc_id: str, config: RunnableConfig) -> dict[str, str] | None:
        """``None`` (continue) when the thread has an unfinished run of the same read, else a fresh input."""
        if self.checkpointer is None:
            return {"question": question, "doc_id": doc_id}
        snapshot = await self.graph.aget_state(config)
        if snapshot.next:
            previous = (snapshot.values.get("question"), snapshot.values.get("doc_id"))
            if previous != (question, doc_id):
                raise ConfigError(
                    f"thread {config['configurable']['thread_id']!r} has an unfinished run for another question "
                    "or document; use a new thread id (or --fresh)"
                )
            return None
        return {"question": question, "doc_id": doc_id}

    async def ainvoke(self, question: str, document: Document, **options: Any) -> MemAgentResult:
        """Read ``document`` and answer ``question`` (options as in `astream`)."""
        result = None
        async for item in self.astream(question, document, **options):
            if isinstance(item, MemAgentResult):
                result = item
        assert result is not None  # astream always ends with a result or raises
        return result

    async def abatch(
        self,
        questions: Sequence[str],
        documents: Document | Sequence[Document],
        *,
        max_concurrency: int = 4,
        return_exceptions: bool = False,
        settings: RunSettings | None = None,
    ) -> list[MemAgentResult | BaseException]:
        """Answer each question (one thread each, at most ``max_concurrency`` at once).

        ``documents`` is one document for all questions or one per question.
        """
        if isinstance(documents, (str, DocumentSource)):
            documents = [documents] * len(questions)
        if len(documents) != len(questions):
            raise ConfigError(f"got {len(questions)} questions but {len(documents)} documents")
        gate = asyncio.Semaphore(max_concurrency)

        async def one(question: str, document: Document) -> MemAgentResult:
            async with gate:
                return await self.ainvoke(question, document, settings=settings)

        return await asyncio.gather(
            *(one(q, d) for q, d in zip(questions, documents, strict=True)), return_exceptions=return_exceptions
        )

    def stream(self, question: str, document: Document, **options: Any) -> Iterator[ProgressEvent | MemAgentResult]:
        """Sync `astream`."""
        return iterate_sync(lambda: self.astream(question, document, **options))

    def invoke(self, question: str, document: Document, **options: Any) -> MemAgentResult:
        """Sync `ainvoke`."""
        return run_sync(lambda: self.ainvoke(question, document, **options))

    def batch(
        self, questions: Sequence[str], documents: Document | Sequence[Document], **options: Any
    ) -> list[MemAgentResult | BaseException]:
        """Sync `abatch`."""
        return run_sync(lambda: self.abatch(questions, documents, **options))
