"""`MemAgent`: the facade most users call. It registers the document, computes the recursion limit,
streams progress, resumes an unfinished checkpointed thread, and returns a `MemAgentResult`.

Each read runs on the sync or the async graph API from one setup (`MemAgent._open`, blocking work that async
reads run in a worker thread) and one record of its stream (`run_record.RunRecord`); only the loop over the
stream differs (`_Read.events` / `_Read.aevents`). Resuming and its checks live in `resume`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import StateSnapshot
from typing_extensions import TypedDict, Unpack

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.chunking import ChunkedDocument
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sources import DocumentSource
from memagent_graph.documents.tokenization import ApproximateTokenizer, Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.graph import create_memagent, recursion_limit_for
from memagent_graph.nodes.memory_policy import MemoryPolicy
from memagent_graph.nodes.policy_registry import build_memory_policy
from memagent_graph.nodes.read_checks import ReadChecks
from memagent_graph.resume import refuse_another_read, resume_input, settings_key, unfinished_read
from memagent_graph.run_record import CitedChunks, ProgressEvent, RunRecord
from memagent_graph.state import MemAgentResult, RunSettings, Source, UnfinishedRead

Document = DocumentSource | str
"""A `DocumentSource`, or the id of a document already in the agent's registry."""


class ReadOptions(TypedDict, total=False):
    """The keyword options of a read: `MemAgent.stream`, `invoke`, `ask_many` and their async forms."""

    thread_id: str | None
    """The thread the read runs on (and, with a checkpointer, is saved on; an unfinished read there of the same
    document, question and settings resumes). Default: a new one."""
    settings: RunSettings | None
    """This run's budgets and sampling over the agent's config."""
    config: RunnableConfig | None
    """LangChain's run config (callbacks, metadata, ``max_concurrency``)."""
    stop: threading.Event | None
    """Once set, the read stops after the current chunk (saved, with a checkpointer) and raises `ReadStopped`;
    the same call on the same thread resumes it."""


class BatchOptions(TypedDict, total=False):
    """The keyword options of `MemAgent.batch` and `abatch`."""

    max_concurrency: int
    """At most this many reads at once (default 4)."""
    return_exceptions: bool
    """A failed read's exception takes its place in the results instead of being raised (default False)."""
    settings: RunSettings | None
    """Every read's budgets and sampling over the agent's config."""


class MemAgent:
    """Answer questions about documents of any length with one compiled MemAgent graph.

    >>> agent = MemAgent(model, tokenizer=HuggingFaceTokenizer("path/to/tokenizer"))
    >>> agent.invoke("Who signed the contract?", FileDocument("contract.txt")).answer

    A `DocumentSource` handed to a read is a one-off: the registry keeps the most recent ones (its
    ``max_one_off``) and releases older ones, while ids registered with ``agent.documents.add`` stay until
    `forget`. A result keeps the chunks it cites, so `passage` reads its citations after the release.
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
        self._model, self._answer_model = model, answer_model
        policy = build_memory_policy(model, self.tokenizer, self.config)
        # the graph checks too; here before chunking
        self._checks = ReadChecks(self.config, self.tokenizer, uses_update_prompt=policy.uses_update_prompt)
        self._cited = CitedChunks()
        self.graph = self._compile(name=name, policy=policy)

    def _compile(
        self, *, name: str, policy: MemoryPolicy | None = None, many_questions: bool = False
    ) -> CompiledStateGraph:
        """This agent's graph (``many_questions``: its lockstep graph) over its documents, model and config."""
        return create_memagent(
            self._model,
            documents=self.documents,
            tokenizer=self.tokenizer,
            config=self.config,
            answer_model=self._answer_model,
            many_questions=many_questions,
            policy=policy,
            checkpointer=self.checkpointer,
            name=name,
        )

    @functools.cached_property
    def lockstep_graph(self) -> CompiledStateGraph:
        """The compiled lockstep graph (Q questions, one batched call per chunk), sharing this agent's setup."""
        return self._compile(name=f"{self.graph.name}-lockstep", many_questions=True)

    def chunk(self, document: Document) -> ChunkedDocument:
        """``document`` chunked with this agent's tokenizer and chunk size (a `DocumentSource` is registered as
        a one-off, see the class doc)."""
        if isinstance(document, str):
            return self.documents.chunked(document, self.tokenizer, self.config.chunk_tokens)
        return self.documents.chunked_one_off(document, self.tokenizer, self.config.chunk_tokens)

    def forget(self, doc_id: str) -> None:
        """Release document ``doc_id`` and its chunk index: a later read by that id raises
        `DocumentNotFoundError`, while results that cite it still read their passages."""
        self.documents.discard(doc_id)

    def passage(self, source: Source, *, context_chars: int = 0) -> tuple[str, int]:
        """The document text of a citation ``source`` with up to ``context_chars`` on each side (within its
        chunk), and where that text starts in its part: ``(text, start_index)``. A result's citations read from
        the chunks the result keeps; other sources (e.g. a progress event's) need their document registered."""
        cited = self._cited.find(source["doc_id"], source["chunk"])
        if cited is not None:
            text, origin = cited
        else:
            chunked = self.documents.chunked(source["doc_id"], self.tokenizer, self.config.chunk_tokens)
            text, origin = chunked.chunk_text(source["chunk"]), chunked.chunk_origin(source["chunk"])
        start = max(source["start"] - origin.char - context_chars, 0)
        end = min(source["end"] - origin.char + context_chars, len(text))
        return text[start:end], origin.char + start

    def settings_key(self, settings: RunSettings | None = None) -> str:
        """A digest of everything besides the document and question that shapes a read's result: budgets,
        sampling, prompts, the model (a resumed read must continue with the same ones)."""
        return settings_key(self.config, settings, [m for m in (self._model, self._answer_model) if m is not None])

    def unfinished(self, thread_id: str) -> UnfinishedRead | None:
        """The thread's saved, unfinished read (needs a checkpointer), or None."""
        if self.checkpointer is None:
            return None
        return unfinished_read(thread_id, self.graph.get_state({"configurable": {"thread_id": thread_id}}))

    def resume_point(
        self, thread_id: str, question: str, document: Document, *, settings: RunSettings | None = None
    ) -> UnfinishedRead | None:
        """The saved read that ``stream(question, document, thread_id=thread_id)`` would continue, or None.

        Raises `FingerprintMismatchError` when the thread holds an unfinished read of another document,
        question or settings (the same check a run makes before it starts).
        """
        pending = self.unfinished(thread_id)
        if pending is not None:
            chunked = self.chunk(document)
            saved = self.graph.get_state({"configurable": {"thread_id": thread_id}}).values
            refuse_another_read(thread_id, self._graph_input({"question": question}, chunked, settings), saved, chunked)
        return pending

    def stream(
        self, question: str, document: Document, *, progress: bool = True, **options: Unpack[ReadOptions]
    ) -> Iterator[ProgressEvent | MemAgentResult]:
        """Yield progress events (dicts with ``type == "memagent.progress"``), then the `MemAgentResult`.

        ``options``: `ReadOptions` (thread, settings, run config, ``stop``). ``progress=False`` yields the result
        alone, and runs faster: without a custom stream to serve, LangGraph runs each node in the calling thread
        instead of handing it to a worker thread.
        """
        read = self._open([question], document, many=False, progress=progress, **options)
        yield from read.events()
        [result] = self._results(read)
        yield result

    async def astream(
        self, question: str, document: Document, *, progress: bool = True, **options: Unpack[ReadOptions]
    ) -> AsyncIterator[ProgressEvent | MemAgentResult]:
        """Async `stream` (needs an async checkpointer, e.g. ``AsyncSqliteSaver``, if any)."""
        read = await asyncio.to_thread(self._open, [question], document, many=False, progress=progress, **options)
        async for event in read.aevents():
            yield event
        [result] = await asyncio.to_thread(self._results, read)
        yield result

    def invoke(self, question: str, document: Document, **options: Unpack[ReadOptions]) -> MemAgentResult:
        """Read ``document`` and answer ``question`` (``options``: `ReadOptions`)."""
        *_, result = self.stream(question, document, progress=False, **options)
        return result

    async def ainvoke(self, question: str, document: Document, **options: Unpack[ReadOptions]) -> MemAgentResult:
        """Async `invoke`."""
        result = None
        async for item in self.astream(question, document, progress=False, **options):
            result = item
        return result

    def ask_many(
        self, questions: Sequence[str], document: Document, **options: Unpack[ReadOptions]
    ) -> list[MemAgentResult]:
        """Answer all ``questions`` in lockstep: each chunk is read once and all memories are updated by one
        batched model call per chunk. One result per question, in order (``options``: `ReadOptions`; a stopped
        read resumes on the same thread with the same questions)."""
        read = self._open(questions, document, many=True, progress=False, **options)
        for _ in read.events():
            pass
        return self._results(read)

    async def aask_many(
        self, questions: Sequence[str], document: Document, **options: Unpack[ReadOptions]
    ) -> list[MemAgentResult]:
        """Async `ask_many` (needs an async checkpointer, e.g. ``AsyncSqliteSaver``, if any)."""
        read = await asyncio.to_thread(self._open, questions, document, many=True, progress=False, **options)
        async for _ in read.aevents():
            pass
        return await asyncio.to_thread(self._results, read)

    def batch(
        self, questions: Sequence[str], documents: Document | Sequence[Document], **options: Unpack[BatchOptions]
    ) -> list[MemAgentResult | BaseException]:
        """Answer each question (one thread each), in order (``options``: `BatchOptions`).

        ``documents`` is one document for all questions or one per question.
        """
        batch = _Batch(_pairs(questions, documents), **options)

        def one(pair: tuple[str, Document]) -> MemAgentResult | BaseException:
            try:
                return self.invoke(*pair, settings=batch.settings)
            except Exception as exc:
                if not batch.return_exceptions:
                    raise
                return exc

        pool = ThreadPoolExecutor(max_workers=batch.max_concurrency)
        try:
            return list(pool.map(one, batch.pairs))
        finally:
            pool.shutdown(cancel_futures=True)  # on a failure, queued reads do not start

    async def abatch(
        self, questions: Sequence[str], documents: Document | Sequence[Document], **options: Unpack[BatchOptions]
    ) -> list[MemAgentResult | BaseException]:
        """Async `batch`."""
        batch = _Batch(_pairs(questions, documents), **options)
        gate = asyncio.Semaphore(batch.max_concurrency)

        async def one(question: str, document: Document) -> MemAgentResult:
            async with gate:
                return await self.ainvoke(question, document, settings=batch.settings)

        return await asyncio.gather(*(one(q, d) for q, d in batch.pairs), return_exceptions=batch.return_exceptions)

    def _open(
        self,
        questions: Sequence[str],
        document: Document,
        *,
        many: bool,
        progress: bool,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
        stop: threading.Event | None = None,
    ) -> _Read:
        """Set a read up (``many``: in lockstep): check the questions and chunk the document (blocking work: the
        tokenizer may call a server), and make its graph input, run config and stream options."""
        self._checks.check_questions(questions)
        started = time.perf_counter()
        chunked = self.chunk(document)
        thread_id = thread_id or uuid.uuid4().hex
        options: dict[str, Any] = {
            "stream_mode": ["updates", "custom"] if progress else ["updates"],
            "context": settings or RunSettings(),
        }
        if self.checkpointer is not None:
            options["durability"] = "sync"  # survives a hard kill after any completed chunk
        asked = {"questions": list(questions)} if many else {"question": questions[0]}
        record = RunRecord(thread_id=thread_id, started=started, stop=stop, questions=len(questions) if many else None)
        return _Read(
            graph=self.lockstep_graph if many else self.graph,
            chunked=chunked,
            graph_input=self._graph_input(asked, chunked, settings),
            config=self._run_config(chunked, thread_id, config or {}),
            options=options,
            record=record,
            checkpointed=self.checkpointer is not None,
        )

    def _run_config(self, chunked: ChunkedDocument, thread_id: str, config: RunnableConfig) -> RunnableConfig:
        """``config`` with the thread id and recursion limit of a read; with segments, as many at once as there
        are unless ``max_concurrency`` says otherwise."""
        return {
            **({"max_concurrency": self.config.segments} if self.config.segments > 1 else {}),
            **config,
            "configurable": {**config.get("configurable", {}), "thread_id": thread_id},
            "recursion_limit": recursion_limit_for(chunked.num_chunks),
        }

    def _graph_input(
        self, asked: dict[str, Any], chunked: ChunkedDocument, settings: RunSettings | None
    ) -> dict[str, Any]:
        return {**asked, "doc_id": chunked.doc_id, "settings_key": self.settings_key(settings)}

    def _results(self, read: _Read) -> list[MemAgentResult]:
        """The read's results, each keeping the chunks it cites (reading them may be blocking I/O)."""
        return [self._cited.keep(result, read.chunked) for result in read.record.results(read.chunked.num_chunks)]


@dataclasses.dataclass(frozen=True)
class _Read:
    """A read set up (`MemAgent._open`) and ready to run on the graph's sync or async API: its graph, document,
    input (before the resume check), run config, stream options, and the record its stream feeds."""

    graph: CompiledStateGraph
    chunked: ChunkedDocument
    graph_input: dict[str, Any]
    config: RunnableConfig
    options: dict[str, Any]
    record: RunRecord
    checkpointed: bool

    def events(self) -> Iterator[ProgressEvent]:
        """Run the read on the sync API (resuming an unfinished one on its thread); yield its progress events."""
        snapshot = self.graph.get_state(self.config) if self.checkpointed else None
        stream = self.graph.stream(self._input(snapshot), self.config, **self.options)
        with contextlib.closing(stream):
            for mode, data in stream:
                if (event := self.record.take(mode, data)) is not None:
                    yield event

    async def aevents(self) -> AsyncIterator[ProgressEvent]:
        """Async `events` (the saved state from an async checkpointer)."""
        snapshot = await self.graph.aget_state(self.config) if self.checkpointed else None
        stream = self.graph.astream(self._input(snapshot), self.config, **self.options)
        async with contextlib.aclosing(stream):
            async for mode, data in stream:
                if (event := self.record.take(mode, data)) is not None:
                    yield event

    def _input(self, snapshot: StateSnapshot | None) -> dict[str, Any] | None:
        return resume_input(self.graph_input, snapshot, self.config["configurable"]["thread_id"], self.chunked)


@dataclasses.dataclass(frozen=True)
class _Batch:
    """A batch's reads, (question, document) pairs, and its `BatchOptions` with their defaults."""

    pairs: list[tuple[str, Document]]
    max_concurrency: int = 4
    return_exceptions: bool = False
    settings: RunSettings | None = None


def _pairs(questions: Sequence[str], documents: Document | Sequence[Document]) -> list[tuple[str, Document]]:
    if isinstance(documents, (str, DocumentSource)):
        documents = [documents] * len(questions)
    if len(documents) != len(questions):
        raise ConfigError(f"got {len(questions)} questions but {len(documents)} documents")
    return list(zip(questions, documents, strict=True))
