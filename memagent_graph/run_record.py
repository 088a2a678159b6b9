"""What `MemAgent` keeps of a read as it runs, and the results it assembles from it.

`RunRecord` collects one read's graph stream: it passes progress events on, keeps the latest state values and
every step record, and stops the read between chunks when asked; at the end it assembles the `MemAgentResult`s
(one for a read, one per question for a lockstep read). `CitedChunks` keeps, for as long as a result lives, the
chunks it cites, so `MemAgent.passage` reads them after the document is released.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref
from typing import Any

from langgraph.types import Overwrite

from memagent_graph.documents.chunking import ChunkedDocument, ChunkOrigin
from memagent_graph.errors import ReadStopped
from memagent_graph.nodes.segments import chunks_read
from memagent_graph.state import EMPTY_USAGE, MemAgentResult, Segment, StepRecord, Usage

ProgressEvent = dict[str, Any]
"""A ``memagent.progress`` custom stream event (``type == "memagent.progress"``)."""


class RunRecord:
    """Collects one read's stream (modes ``updates`` and ``custom``) on thread ``thread_id``, begun at
    ``started`` (`time.perf_counter`); ``questions``: how many a lockstep read asks (None: a read of one)."""

    def __init__(
        self, *, thread_id: str, started: float, stop: threading.Event | None = None, questions: int | None = None
    ) -> None:
        self.thread_id, self.started, self.stop, self.questions = thread_id, started, stop, questions
        self.values: dict[str, Any] = {}
        self.segments: dict[int, Segment] = {}
        self.steps: list[StepRecord] = []
        self.step_lists: list[list[StepRecord | None]] = []

    def take(self, mode: str, data: Any) -> ProgressEvent | None:
        """Record one stream item; returns it when it is a progress event. Raises `ReadStopped` at the first safe
        point after ``stop`` is set: once a chunk's memory update is out (with segments: once a round is), while
        chunks are left (with a checkpointer, its writes are saved before the run closes)."""
        if mode == "custom":
            return data
        self._updates(data)
        if self.stop is not None and self.stop.is_set() and {"update_memory", "join_segments"} & set(data):
            done, total = chunks_read(self.values["cursor"], self.segments.values()), self.values["num_chunks"]
            if done < total:
                raise ReadStopped(self.thread_id, chunks_done=done, num_chunks=total)
        return None

    def results(self, num_chunks: int) -> list[MemAgentResult]:
        """The read's result, or a lockstep read's, one per question (usage counted from each question's own
        steps; a merge round of parallel segments has none for a question it made no call for)."""
        elapsed = round(time.perf_counter() - self.started, 4)
        if self.questions is None:
            return [self._result(self.values, self.steps, self.values.get("usage", EMPTY_USAGE), num_chunks, elapsed)]
        results = []
        for index in range(self.questions):
            steps = [step for record in self.step_lists if (step := record[index]) is not None]
            usage: Usage = {
                "calls": len(steps),
                "prompt_tokens": sum(s["prompt_tokens"] for s in steps),
                "completion_tokens": sum(s["completion_tokens"] for s in steps),
            }
            values = {key: self.values[many][index] for key, many in _LOCKSTEP_KEYS.items()}
            results.append(self._result(values, steps, usage, num_chunks, elapsed))
        return results

    def _result(
        self, values: dict[str, Any], steps: list[StepRecord], usage: Usage, num_chunks: int, elapsed: float
    ) -> MemAgentResult:
        return MemAgentResult(
            answer=values.get("answer", ""),
            answer_source=values.get("answer_source", "reply"),
            memory=values.get("memory", ""),
            num_chunks=num_chunks,
            steps=steps,
            usage=usage,
            elapsed_s=elapsed,
            thread_id=self.thread_id,
            citations=values.get("citations", []),
            unsupported=values.get("unsupported", []),
        )

    def _updates(self, data: dict[str, Any]) -> None:
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


_LOCKSTEP_KEYS = {
    "answer": "answers",
    "answer_source": "answer_sources",
    "memory": "memories",
    "citations": "citations",
    "unsupported": "unsupported",
}
"""A result's field and the lockstep state key that holds it for every question."""


@dataclasses.dataclass(frozen=True, slots=True, weakref_slot=True)
class _CitedChunk:
    """A chunk of a document (by content ``fingerprint``) that a live result cites: its text and origin."""

    fingerprint: str
    text: str
    origin: ChunkOrigin


class CitedChunks:
    """The chunks that live results cite, each kept (and shared between the results citing it) until the last
    of them is collected."""

    def __init__(self) -> None:
        self._chunks: weakref.WeakValueDictionary[tuple[str, int], _CitedChunk] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def find(self, doc_id: str, chunk: int) -> tuple[str, ChunkOrigin] | None:
        """The text and origin of chunk ``chunk`` of ``doc_id`` when a live result cites it, else None."""
        with self._lock:
            cited = self._chunks.get((doc_id, chunk))
        return None if cited is None else (cited.text, cited.origin)

    def keep(self, result: MemAgentResult, chunked: ChunkedDocument) -> MemAgentResult:
        """``result``, keeping the chunks of ``chunked`` it cites until it is collected."""
        kept = []
        for key in sorted({(chunked.doc_id, source["chunk"]) for source in result.citations}):
            with self._lock:
                cited = self._chunks.get(key)
            if cited is None or cited.fingerprint != chunked.fingerprint:
                cited = _CitedChunk(chunked.fingerprint, chunked.chunk_text(key[1]), chunked.chunk_origin(key[1]))
                with self._lock:
                    self._chunks[key] = cited
            kept.append(cited)
        if kept:
            weakref.finalize(result, kept.clear)  # holds ``kept`` until the result goes
        return result
