"""`MemAgent`: the facade most users call. It registers the document, computes the recursion limit,
streams progress, resumes an unfinished checkpointed thread, and returns a `MemAgentResult`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Overwrite, StateSnapshot

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.chunking import ChunkedDocument, ChunkOrigin
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.sources import DocumentSource
from memagent_graph.documents.tokenization import ApproximateTokenizer, Tokenizer
from memagent_graph.errors import (
    ConfigError,
    FingerprintMismatchError,
    ReadStopped,
)
from memagent_graph.graph import create_memagent, recursion_limit_for
from memagent_graph.nodes.policy_registry import build_memory_policy
from memagent_graph.nodes.read_checks import ReadChecks
from memagent_graph.nodes.segments import chunks_read
from memagent_graph.state import (
    EMPTY_USAGE,
    MemAgentResult,
    RunSettings,
    Segment,
    Source,
    StepRecord,
    UnfinishedRead,
    Usage,
)

Document = DocumentSource | str
"""A `DocumentSource`, or the id of a document already in the agent's registry."""

ProgressEvent = dict[str, Any]


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
        self._cited: weakref.WeakValueDictionary[tuple[str, int], _CitedChunk] = weakref.WeakValueDictionary()
        self._cited_lock = threading.Lock()
        self.graph = create_memagent(
            model,
            documents=self.documents,
            tokenizer=self.tokenizer,
            config=self.config,
            answer_model=answer_model,
            policy=policy,
            checkpointer=checkpointer,
            name=name,
        )

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
        with self._cited_lock:
            cited = self._cited.get((source["doc_id"], source["chunk"]))
        if cited is not None:
            text, origin = cited.text, cited.origin
        else:
            chunked = self.documents.chunked(source["doc_id"], self.tokenizer, self.config.chunk_tokens)
            text, origin = chunked.chunk_text(source["chunk"]), chunked.chunk_origin(source["chunk"])
        start = max(source["start"] - origin.char - context_chars, 0)
        end = min(source["end"] - origin.char + context_chars, len(text))
        return text[start:end], origin.char + start

    def _keep_cited(self, result: MemAgentResult, chunked: ChunkedDocument) -> MemAgentResult:
        """``result``, keeping the chunks it cites (shared with other live results citing them) until it is
        collected: `passage` reads them after the document is released."""
        kept = []
        for key in sorted({(chunked.doc_id, source["chunk"]) for source in result.citations}):
            with self._cited_lock:
                cited = self._cited.get(key)
            if cited is None or cited.fingerprint != chunked.fingerprint:
                cited = _CitedChunk(chunked.fingerprint, chunked.chunk_text(key[1]), chunked.chunk_origin(key[1]))
                with self._cited_lock:
                    self._cited[key] = cited
            kept.append(cited)
        if kept:
            weakref.finalize(result, kept.clear)  # holds ``kept`` until the result goes
        return result

    def _prepare(
        self, chunked: ChunkedDocument, thread_id: str | None, config: RunnableConfig | None, *, progress: bool = True
    ) -> tuple[RunnableConfig, dict[str, Any]]:
        """The run config (thread id, recursion limit; with segments, as many at once as there are unless
        ``max_concurrency`` says otherwise) and the graph keyword arguments of one read."""
        config = config or {}
        run_config: RunnableConfig = {
            **({"max_concurrency": self.config.segments} if self.config.segments > 1 else {}),
            **config,
            "configurable": {**config.get("configurable", {}), "thread_id": thread_id or uuid.uuid4().hex},
            "recursion_limit": recursion_limit_for(chunked.num_chunks),
        }
        options: dict[str, Any] = {"stream_mode": ["updates", "custom"] if progress else ["updates"]}
        if self.checkpointer is not None:
            options["durability"] = "sync"  # survives a hard kill after any completed chunk
        return run_config, options

    def settings_key(self, settings: RunSettings | None = None) -> str:
        """A digest of everything besides the document and question that shapes a read's result: budgets,
        sampling, prompts, the model (a resumed read must continue with the same ones)."""
        described = {
            "config": self.config.model_dump(mode="json", exclude={"retries", "chunk_tokens"}),
            "settings": dataclasses.asdict(settings or RunSettings()),
            "models": [_describe_model(m) for m in (self._model, self._answer_model) if m is not None],
        }
        return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]

    def unfinished(self, thread_id: str) -> UnfinishedRead | None:
        """The thread's saved, unfinished read (needs a checkpointer), or None."""
        if self.checkpointer is None:
            return None
        snapshot = self.graph.get_state({"configurable": {"thread_id": thread_id}})
        values = snapshot.values
        if not _is_unfinished(snapshot):
            return None
        return UnfinishedRead(
            thread_id=thread_id,
            question=values["question"],
            fingerprint=values.get("fingerprint", ""),
            settings_key=values.get("settings_key", ""),
            chunks_done=chunks_read(values["cursor"], values.get("segments", [])),
            num_chunks=values["num_chunks"],
        )

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
            _refuse_another_read(thread_id, self._read_input(question, chunked, settings), saved, chunked)
        return pending

    @staticmethod
    def _input(
        graph_input: dict[str, Any], snapshot: StateSnapshot | None, config: RunnableConfig, chunked: ChunkedDocument
    ) -> Any:
        """``None`` (continue) when the thread has an unfinished run of the same read, else ``graph_input``.

        Resuming onto another document (by content fingerprint), question or settings is refused.
        """
        if snapshot is None or not _is_unfinished(snapshot):
            return graph_input
        _refuse_another_read(config["configurable"]["thread_id"], graph_input, snapshot.values, chunked)
        # pending tasks (a crash mid-step, or a stop: the finished chunk's writes are saved with its task)
        # continue from the checkpoint; with none, the input continues at the saved cursor (read_chunk only
        # resets a finished read)
        return None if snapshot.tasks else graph_input

    def stream(
        self,
        question: str,
        document: Document,
        *,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
        stop: threading.Event | None = None,
        progress: bool = True,
    ) -> Iterator[ProgressEvent | MemAgentResult]:
        """Yield progress events (dicts with ``type == "memagent.progress"``), then the `MemAgentResult`.

        When ``stop`` is set, the read stops once the current chunk is done (and saved, with a checkpointer)
        and raises `ReadStopped`; the same call on the same thread resumes it. ``progress=False`` yields the
        result alone, and runs faster: without a custom stream to serve, LangGraph runs each node in the
        calling thread instead of handing it to a worker thread.
        """
        self._checks.check_questions([question])
        started = time.perf_counter()
        chunked = self.chunk(document)
        run_config, options = self._prepare(chunked, thread_id, config, progress=progress)
        snapshot = self.graph.get_state(run_config) if self.checkpointer is not None else None
        graph_input = self._input(self._read_input(question, chunked, settings), snapshot, run_config, chunked)
        run = _RunRecord()
        stream = self.graph.stream(graph_input, run_config, context=settings or RunSettings(), **options)
        with contextlib.closing(stream):
            for mode, data in stream:
                if (event := run.feed(mode, data)) is not None:
                    yield event
                run.stop_if_asked(stop, mode, data, run_config)
        yield self._keep_cited(run.result(chunked.num_chunks, run_config, started), chunked)

    async def astream(
        self,
        question: str,
        document: Document,
        *,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
        stop: threading.Event | None = None,
        progress: bool = True,
    ) -> AsyncIterator[ProgressEvent | MemAgentResult]:
        """Async `stream` (needs an async checkpointer, e.g. ``AsyncSqliteSaver``, if any)."""
        await asyncio.to_thread(self._checks.check_questions, [question])  # tokenizer work may be blocking I/O
        started = time.perf_counter()
        chunked = await asyncio.to_thread(self.chunk, document)
        run_config, options = self._prepare(chunked, thread_id, config, progress=progress)
        snapshot = await self.graph.aget_state(run_config) if self.checkpointer is not None else None
        graph_input = self._input(self._read_input(question, chunked, settings), snapshot, run_config, chunked)
        run = _RunRecord()
        stream = self.graph.astream(graph_input, run_config, context=settings or RunSettings(), **options)
        async with contextlib.aclosing(stream):
            async for mode, data in stream:
                if (event := run.feed(mode, data)) is not None:
                    yield event
                run.stop_if_asked(stop, mode, data, run_config)
        yield self._keep_cited(run.result(chunked.num_chunks, run_config, started), chunked)

    def _read_input(self, question: str, chunked: ChunkedDocument, settings: RunSettings | None) -> dict[str, Any]:
        return {"question": question, "doc_id": chunked.doc_id, "settings_key": self.settings_key(settings)}

    def invoke(self, question: str, document: Document, **options: Any) -> MemAgentResult:
        """Read ``document`` and answer ``question`` (options as in `stream`)."""
        *_, result = self.stream(question, document, **{**options, "progress": False})
        return result

    async def ainvoke(self, question: str, document: Document, **options: Any) -> MemAgentResult:
        """Async `invoke`."""
        result = None
        async for item in self.astream(question, document, **{**options, "progress": False}):
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

        pool = ThreadPoolExecutor(max_workers=max_concurrency)
        try:
            return list(pool.map(one, pairs))
        finally:
            pool.shutdown(cancel_futures=True)  # on a failure, queued reads do not start

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

    @functools.cached_property
    def lockstep_graph(self) -> CompiledStateGraph:
        """The compiled lockstep graph (Q questions, one batched call per chunk), sharing this agent's setup."""
        return create_memagent(
            self._model,
            documents=self.documents,
            tokenizer=self.tokenizer,
            config=self.config,
            answer_model=self._answer_model,
            many_questions=True,
            checkpointer=self.checkpointer,
            name=f"{self.graph.name}-lockstep",
        )

    def ask_many(
        self,
        questions: Sequence[str],
        document: Document,
        *,
        thread_id: str | None = None,
        settings: RunSettings | None = None,
        config: RunnableConfig | None = None,
    ) -> list[MemAgentResult]:
        """Answer all ``questions`` in lockstep: each chunk is read once and all memories are updated by one
        batched model call per chunk. One result per question, in order."""
        self._checks.check_questions(questions)
        started = time.perf_counter()
        chunked = self.chunk(document)
        run_config, options = self._prepare(chunked, thread_id, config)
        graph = self.lockstep_graph
        snapshot = graph.get_state(run_config) if self.checkpointer is not None else None
        graph_input = self._input(
            {"questions": list(questions), "doc_id": chunked.doc_id, "settings_key": self.settings_key(settings)},
            snapshot,
            run_config,
            chunked,
        )
        run = _RunRecord()
        for mode, data in graph.stream(graph_input, run_config, context=settings or RunSettings(), **options):
            run.feed(mode, data)
        results = run.results(len(questions), chunked.num_chunks, run_config, started)
        return [self._keep_cited(result, chunked) for result in results]


@dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)
class _CitedChunk:
    """A chunk of a document (by content ``fingerprint``) that a live result cites: its text and origin."""

    fingerprint: str
    text: str
    origin: ChunkOrigin


def _refuse_another_read(
    thread_id: str, graph_input: dict[str, Any], saved: dict[str, Any], chunked: ChunkedDocument
) -> None:
    """Raise `FingerprintMismatchError` naming what differs between a thread's saved state and the read asked
    for (the document by content fingerprint, the question, the settings)."""
    question_key = "question" if "question" in graph_input else "questions"
    differs = [
        what
        for what, now, before in (
            ("document", chunked.fingerprint, saved.get("fingerprint") or chunked.fingerprint),
            ("question", graph_input[question_key], saved.get(question_key)),
            ("settings", graph_input["settings_key"], saved.get("settings_key")),
        )
        if now != before
    ]
    if differs:
        raise FingerprintMismatchError(
            f"thread {thread_id!r} holds an unfinished read of a different {' and '.join(differs)} "
            f"(chunk {saved.get('cursor', 0)}/{saved.get('num_chunks', '?')}); resume it with the same document, "
            "question and settings, or start over under another `thread_id`"
        )


def _is_unfinished(snapshot: StateSnapshot) -> bool:
    values = snapshot.values
    return bool(snapshot.next) or ("cursor" in values and not values.get("finished"))


def _describe_model(model: BaseChatModel) -> dict[str, Any]:
    """What identifies a chat model for resuming: its type and, when it has one, its model name."""
    return {"type": model._llm_type, "name": getattr(model, "model_name", None) or getattr(model, "model", None)}


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
        self.segments: dict[int, Segment] = {}
        self.steps: list[StepRecord] = []
        self.step_lists: list[list[StepRecord | None]] = []

    def stop_if_asked(self, stop: threading.Event | None, mode: str, data: Any, config: RunnableConfig) -> None:
        """Raise `ReadStopped` at the first safe point after ``stop`` is set: once a chunk's memory update is
        out (with segments: once a round is), while chunks are left (with a checkpointer, its writes are saved
        before the run closes)."""
        if stop is not None and stop.is_set() and mode == "updates" and {"update_memory", "join_segments"} & set(data):
            done, total = chunks_read(self.values["cursor"], self.segments.values()), self.values["num_chunks"]
            if done < total:
                raise ReadStopped(config["configurable"]["thread_id"], chunks_done=done, num_chunks=total)

    def feed(self, mode: str, data: Any) -> ProgressEvent | None:
        if mode == "custom":
            return data
        for update in data.values():
            if update and "segments" in update:
                self._segments(update["segments"])
                update = {key: value for key, value in update.items() if key != "segments"}
            if update:
                self.values.update(update)
                if "last_step" in update:
                    self.steps.append(update["last_step"])
                if "last_steps" in update:
                    self.step_lists.append(update["last_steps"])
        return None

    def _segments(self, segments: list[Segment] | Overwrite) -> None:
        """Keep each segment's latest read and step (a fresh read's split arrives as an `Overwrite`)."""
        if isinstance(segments, Overwrite):
            self.segments.clear()
            segments = segments.value
        for segment in segments:
            self.segments[segment["index"]] = segment
            if "last_step" in segment:
                self.steps.append(segment["last_step"])
            if "last_steps" in segment:
                self.step_lists.append(segment["last_steps"])

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
            citations=self.values.get("citations", []),
            unsupported=self.values.get("unsupported", []),
        )

    def results(self, count: int, num_chunks: int, config: RunnableConfig, started: float) -> list[MemAgentResult]:
        """One result per question of a lockstep run (usage counted from each question's own steps; a merge round
        of parallel segments has none for a question it made no call for)."""
        elapsed = round(time.perf_counter() - started, 4)
        results = []
        for index in range(count):
            steps = [step for record in self.step_lists if (step := record[index]) is not None]
            usage: Usage = {
                "calls": len(steps),
                "prompt_tokens": sum(s["prompt_tokens"] for s in steps),
                "completion_tokens": sum(s["completion_tokens"] for s in steps),
            }
            results.append(
                MemAgentResult(
                    answer=self.values["answers"][index],
                    answer_source=self.values["answer_sources"][index],
                    memory=self.values["memories"][index],
                    num_chunks=num_chunks,
                    steps=steps,
                    usage=usage,
                    elapsed_s=elapsed,
                    thread_id=config["configurable"]["thread_id"],
                    citations=self.values["citations"][index],
                    unsupported=self.values["unsupported"][index],
                )
            )
        return results
