"""Provenance of the memory: after each update, every sentence of the new memory is aligned to the text it can
have come from, the chunk just read and the previous memory (whose spans already carry their sources), with
rapidfuzz's partial-ratio alignment (the best-matching window of the longer text, with its offsets). A
sentence that matches neither as a whole is split into clauses (a merge of facts from several chunks), each
traced alone. A span with no source scoring at least ``min_score`` (0-100) is *unsupported*. Only the current
memory's spans are kept, so the state stays bounded however long the document.

`cite` then picks the sources of the spans that contain the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz

from memagent_graph.documents.chunking import ChunkOrigin
from memagent_graph.state import MemorySpan, Source

MIN_SPAN_CHARS = 8  # shorter fragments ("Yes.", list bullets) are not claims worth tracing
MAX_SOURCES = 3  # per memory span: the best ones (a fact repeated in many chunks keeps its best three)
MAX_CITATIONS = 5
WIDEN_CHARS = 200  # how far a cited window may grow to reach its sentence's ends
SHORT_ANSWER_CHARS = 24  # answers this short must appear word for word in a span to cite it

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_SENTENCE_START = re.compile(r"\n|\s[.!?]")  # searched in the reversed text before a window
_SENTENCE_STOP = re.compile(r"[.!?](?=\s|$)|\n")
_CLAUSE_BREAK = re.compile(r"\s*[;,:]\s+|\s+and\s+")


@dataclass(frozen=True)
class ReadChunk:
    """The chunk a memory update read: its text as in the document (before sanitising) and where it starts."""

    doc_id: str
    index: int
    text: str
    origin: ChunkOrigin
    source: str | None


def memory_sentences(memory: str) -> list[str]:
    """The memory's sentences (split at sentence ends and line breaks), without fragments too short to trace."""
    return [s.strip() for s in _SENTENCE_END.split(memory) if len(s.strip()) >= MIN_SPAN_CHARS]


def trace_memory(
    memory: str, *, chunk: ReadChunk, previous: Sequence[MemorySpan], min_score: float
) -> list[MemorySpan]:
    """The spans of ``memory`` with their sources in ``chunk`` or inherited from ``previous`` spans."""
    lowered = chunk.text.lower()
    haystack = lowered if len(lowered) == len(chunk.text) else chunk.text  # offsets must stay the chunk's
    spans: list[MemorySpan] = []
    for sentence in memory_sentences(memory):
        sources = _sources(sentence, chunk, haystack, previous, min_score)
        clauses = [c for c in _CLAUSE_BREAK.split(sentence) if len(c) >= MIN_SPAN_CHARS]
        if sources or len(clauses) < 2:
            spans.append({"text": sentence, "sources": sources})
        else:
            spans.extend({"text": c, "sources": _sources(c, chunk, haystack, previous, min_score)} for c in clauses)
    return spans


def _sources(
    text: str, chunk: ReadChunk, haystack: str, previous: Sequence[MemorySpan], min_score: float
) -> list[Source]:
    found: list[Source] = []
    needle = text.lower() if haystack is not chunk.text else text
    if len(needle) <= len(haystack):
        hit = fuzz.partial_ratio_alignment(needle, haystack, score_cutoff=min_score)
        if hit is not None:
            found.append(_chunk_source(chunk, hit.dest_start, hit.dest_end, hit.score))
    for span in previous:
        if span["sources"] and (score := _similarity(text.lower(), span["text"].lower())) >= min_score:
            found.extend({**source, "score": min(score, source["score"])} for source in span["sources"])
    return _best(found, MAX_SOURCES)


def _similarity(needle: str, text: str) -> float:
    """How well ``text`` holds all of ``needle``: the best window's score when the needle is the shorter, else
    the whole-string score (a sentence merging two earlier ones is held by neither alone)."""
    return fuzz.partial_ratio(needle, text) if len(needle) <= len(text) else fuzz.ratio(needle, text)


def _chunk_source(chunk: ReadChunk, start: int, end: int, score: float) -> Source:
    """A source at characters ``start:end`` of the chunk, widened to the sentence or line it lies in, as offsets
    in its part (the original document)."""
    origin, text = chunk.origin, chunk.text
    start, end = _widened(text, start, end)
    byte_start = origin.byte + len(text[:start].encode("utf-8", "surrogatepass"))
    return {
        "doc_id": chunk.doc_id,
        "source": chunk.source,
        "part": origin.part,
        "chunk": chunk.index,
        "start": origin.char + start,
        "end": origin.char + end,
        "byte_start": byte_start,
        "byte_end": byte_start + len(text[start:end].encode("utf-8", "surrogatepass")),
        "line": origin.line + text.count("\n", 0, start),
        "score": round(score, 1),
    }


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    """``start:end`` grown to whole sentences (or lines), at most `WIDEN_CHARS` on each side: the aligned window
    is as long as the memory's wording, which may be shorter than the document's ("... is 7741" against "One of
    the numbers ... is: 7741"), and would cut the source's end off."""
    before = _SENTENCE_START.search(text[max(start - WIDEN_CHARS, 0) : start][::-1])
    after = _SENTENCE_STOP.search(text, end, min(end + WIDEN_CHARS, len(text)))
    start = start - before.start() if before else max(start - WIDEN_CHARS, 0) if start else 0
    end = after.end() if after else min(end + WIDEN_CHARS, len(text))
    while end > start and text[end - 1].isspace():
        end -= 1
    while start < end and text[start].isspace():
        start += 1
    return start, end


def _best(sources: Iterable[Source], limit: int) -> list[Source]:
    """The highest-scoring sources, one per place in the document."""
    best: dict[tuple[str, int, int, int], Source] = {}
    for source in sources:
        key = (source["doc_id"], source["part"], source["start"], source["end"])
        if key not in best or source["score"] > best[key]["score"]:
            best[key] = source
    return sorted(best.values(), key=lambda s: -s["score"])[:limit]


def cite(answer: str, spans: Sequence[MemorySpan], *, min_score: float) -> tuple[list[Source], list[str]]:
    """The sources of the memory spans that contain ``answer``, best first, and the unsupported spans' texts."""
    key = answer.strip().lower()
    supporting = [
        source
        for span in spans
        if key and span["sources"] and _holds(span["text"].lower(), key, min_score)
        for source in span["sources"]
    ]
    return _best(supporting, MAX_CITATIONS), [span["text"] for span in spans if not span["sources"]]


def _holds(span: str, answer: str, min_score: float) -> bool:
    """Whether a memory span holds the answer: a short answer (a number, a name) as whole words, where one
    differing character matters ("1990" is not "1999"); a longer one by the alignment score."""
    if len(answer) <= SHORT_ANSWER_CHARS:
        return re.search(rf"(?<!\w){re.escape(answer)}(?!\w)", span) is not None
    return fuzz.partial_ratio(answer, span) >= min_score
