"""`MemAgent`: the facade most users call. It registers the document, computes the recursion limit,
streams progress, resumes an unfinished checkpointed thread, and returns a `MemAgentResult`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

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

    def _prepare(
        self, question: str, chunked: ChunkedDocument, thread_id: str | None, config: RunnableConfig | None
    ) -> tuple[RunnableConfig, dict[str, Any]]:
        """The run config (thread id, recursion limit) and the graph keyword arguments of one read."""
        if not question or not question.strip():
            raise EmptyQuestionError("the question is empty; ask something about the document")
        config = config or {}
        run_config: RunnableConfig = {
            **config,
            "configurable": {**config.get("configurable", {}), "thread_id": thread_id or uuid.uuid4().hex},
            "recursion_limit": recursion_limit_for(chunked.num_chunks),
        }
        options: dict[str, Any] = {"stream_mode": ["updates", "custom"]}
        if self.checkpointer is not None:
            options["durability"] = "sync"  # survives a hard kill after any completed chunk
        return run_config, options

    def _input(self, question: str, doc_id: str, snapshot: StateSnapshot | None, config: RunnableConfig) -> Any:
        """``None`` (continue) when the thread has an unfinished run of the same read, else a fresh input."""
        if snapshot is not None and snapshot.next:
            if (snapshot.values.get("question"), snapshot.values.get("doc_id")) != (question, doc_id):
                raise ConfigError(
                    f"thread {config['configurable']['thread_id']!r} has an unfinished run for another question "
                    "or document; use a new thread id (or --fresh)"
                )
            return None
        return {"question": question, "doc_id": doc_id}

    def stream(
        self,
        question: str,
        document: Document,
        *,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
    ) -> Iterator[ProgressEvent | MemAgentResult]:
        """Yield progress events (dicts with ``type == "memagent.progress"``), then the `MemAgentResult`."""
        started = time.perf_counter()
        chunked = self.chunk(document)
        run_config, options = self._prepare(question, chunked, thread_id, config)
        snapshot = self.graph.get_state(run_config) if self.checkpointer is not None else None
        graph_input = self._input(question, chunked.doc_id, snapshot, run_config)
        run = _RunRecord()
        for mode, data in self.graph.stream(graph_input, run_config, context=settings or RunSettings(), **options):
            if (event := run.feed(mode, data)) is not None:
                yield event
        yield run.result(chunked.num_chunks, run_config, started)

    async def astream(
        self,
        question: str,
        document: Document,
        *,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
    ) -> AsyncIterator[ProgressEvent | MemAgentResult]:
        """Async `stream` (needs an async checkpointer, e.g. ``AsyncSqliteSaver``, if any)."""
        started = time.perf_counter()
        chunked = await asyncio.to_thread(self.chunk, document)
        run_config, options = self._prepare(question, chunked, thread_id, config)
        snapshot = await self.graph.aget_state(run_config) if self.checkpointer is not None else None
        graph_input = self._input(question, chunked.doc_id, snapshot, run_config)
        run = _RunRecord()
        async for mode, data in self.graph.astream(
            graph_input, run_config, context=settings or RunSettings(), **options
        ):
            if (event := run.feed(mode, data)) is not None:
                yield event
        yield run.result(chunked.num_chunks, run_config, started)

    def invoke(self, question: str, document: Document, **options: Any) -> MemAgentResult:
        """Read ``document`` and answer ``question`` (options as in `stream`)."""
        *_, result = self.stream(question, document, **options)
        return result

    async def ainvoke(self, question: str, document: Document, **options: Any) -> MemAgentResult:
        """Async `invoke`."""
        result = None
        async for item in self.astream(question, document, **options):
            result = item
        return result

    def batch(
        self,
        questions: Sequence[str],
        documents: Document | Sequence[Document],
        *,
        max_concurrency: int = 4,
        return_exceptions: bool = False,
        settings: RunSettings | None = None,
    ) -> list[MemAgentResult | BaseException]:
        """Answer each question (one thread each, at most ``max_concurrency`` at once), in order.

        ``documents`` is one document for all questions or one per question.
        """
        pairs = _pairs(questions, documents)

        def one(pair: tuple[str, Document]) -> MemAgentResult | BaseException:
            try:
                return self.invoke(*pair, settings=settings)
            except Exception as exc:
                if not return_exceptions:
                    raise
                return exc

        with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
            return list(pool.map(one, pairs))

    async def abatch(
        self,
        questions: Sequence[str],
        documents: Document | Sequence[Document],
        *,
        max_concurrency: int = 4,
        return_exceptions: bool = False,
        settings: RunSettings | None = None,
    ) -> list[MemAgentResult | BaseException]:
        """Async `batch`."""
        gate = asyncio.Semaphore(max_concurrency)

        async def one(question: str, document: Document) -> MemAgentResult:
            async with gate:
                return await self.ainvoke(question, document, settings=settings)

        return await asyncio.gather(
            *(one(q, d) for q, d in _pairs(questions, documents)), return_exceptions=return_exceptions
        )


def _pairs(questions: Sequence[str], documents: Document | Sequence[Document]) -> list[tuple[str, Document]]:
    if isinstance(documents, (str, DocumentSource)):
        documents = [documents] * len(questions)
    if len(documents) != len(questions):
        raise ConfigError(f"got {len(questions)} questions but {len(documents)} documents")
    return list(zip(questions, documents, strict=True))


class _RunRecord:
    """Collects one run's stream: passes progress events on, keeps the latest values and every step record."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.steps: list[StepRecord] = []

    def feed(self, mode: str, data: Any) -> ProgressEvent | None:
        if mode == "custom":
            return data
        for update in data.values():
            if update:
                self.values.update(update)
                if "last_step" in update:
                    self.steps.append(update["last_step"])
        return None

    def result(self, num_chunks: int, config: RunnableConfig, started: float) -> MemAgentResult:
        return MemAgentResult(
            answer=self.values.get("answer", ""),
            answer_source=self.values.get("answer_source", "reply"),
            memory=self.values.get("memory", ""),
            num_chunks=num_chunks,
            steps=self.steps,
            usage=self.values.get("usage", EMPTY_USAGE),
            elapsed_s=round(time.perf_counter() - started, 4),
            thread_id=config["configurable"]["thread_id"],
        )
