"""Token-exact chunking: a `DocumentSource` becomes a `ChunkedDocument` of at most ``chunk_tokens`` each.

Text is encoded in batches of bounded pieces (the tokenizer's parallel batch path; one giant string is
~4x slower), token ids are kept compactly (4 bytes each) and decoded only when a chunk is read. A chunk
boundary never splits a character: decoded chunks concatenate exactly to the decoded document.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from memagent_graph.documents.sources import ContentHasher, DocumentSource, fingerprint_of
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import EmptyDocumentError, TokenizerError

BATCH_PIECES = 32
"""Pieces encoded per `encode_batch` call (32 x 64 KiB: enough work to use every core)."""

_LOOKAROUND = 4  # tokens decoded on each side of a boundary to detect a split character


class ChunkOrigin(NamedTuple):
    """Where a chunk starts in its part (its original document): character and UTF-8 byte offsets, and the
    1-based line number. Exact when the tokenizer decodes to the original text (byte-level BPE does)."""

    part: int
    char: int
    byte: int
    line: int


@dataclass(frozen=True)
class ChunkedDocument:
    """A document cut into token chunks; random access by index, decoded on demand."""

    doc_id: str
    fingerprint: str
    chunk_tokens: int
    tokenizer: Tokenizer
    chunks: Sequence[array]
    parts: Sequence[int]
    part_metadata: Sequence[Mapping[str, Any]]
    _origins: list[ChunkOrigin] = field(default_factory=list, init=False, repr=False, compare=False)
    _origins_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def num_chunks(self) -> int:
        return len(self.chunks)

    @property
    def num_tokens(self) -> int:
        return sum(len(chunk) for chunk in self.chunks)

    def chunk_ids(self, index: int) -> list[int]:
        """Token ids of chunk ``index``."""
        return self.chunks[index].tolist()

    def chunk_text(self, index: int) -> str:
        """Text of chunk ``index`` (its ids decoded)."""
        return self.tokenizer.decode(self.chunks[index].tolist())

    def chunk_metadata(self, index: int) -> Mapping[str, Any]:
        """Metadata of the original document chunk ``index`` comes from."""
        return self.part_metadata[self.parts[index]]

    def chunk_origin(self, index: int) -> ChunkOrigin:
        """Where chunk ``index`` starts in its part: the lengths of the chunks before it, each decoded once for
        this and remembered (4 numbers per chunk)."""
        with self._origins_lock:
            while len(self._origins) <= index:
                done = len(self._origins)
                if done == 0 or self.parts[done] != self.parts[done - 1]:
                    self._origins.append(ChunkOrigin(self.parts[done], 0, 0, 1))
                    continue
                previous, text = self._origins[-1], self.chunk_text(done - 1)
                self._origins.append(
                    ChunkOrigin(
                        previous.part,
                        previous.char + len(text),
                        previous.byte + len(text.encode("utf-8")),
                        previous.line + text.count("\n"),
                    )
                )
            return self._origins[index]


def chunk_document(
    source: DocumentSource, tokenizer: Tokenizer, chunk_tokens: int, *, doc_id: str | None = None
) -> ChunkedDocument:
    """Chunk ``source`` with ``tokenizer`` in one streaming pass; raises `EmptyDocumentError` if it has no text.

    ``doc_id`` names the result (default: the source's own id).
    """
    doc_id = doc_id or source.doc_id
    if chunk_tokens <= 0:
        raise ValueError("chunk_tokens must be positive")
    hasher = ContentHasher()
    chunks: list[array] = []
    parts: list[int] = []
    metadata: list[Mapping[str, Any]] = []
    has_text = False
    for part_index, part in enumerate(source.iter_parts()):
        hasher.start_part(part.metadata)
        metadata.append(dict(part.metadata))
        buffer = array("I")
        for ids, text in _encoded_batches(part.pieces, tokenizer):
            hasher.add(text)
            has_text = has_text or not text.isspace()
            buffer.extend(ids)
            while len(buffer) > chunk_tokens + _LOOKAROUND:
                cut = _safe_cut(tokenizer, buffer, chunk_tokens)
                chunks.append(buffer[:cut])
                parts.append(part_index)
                buffer = buffer[cut:]
        while buffer:
            cut = _safe_cut(tokenizer, buffer, chunk_tokens) if len(buffer) > chunk_tokens else len(buffer)
            chunks.append(buffer[:cut])
            parts.append(part_index)
            buffer = buffer[cut:]
    if not has_text:
        raise EmptyDocumentError(f"document {doc_id!r} is empty (no text to read)")
    if not chunks:
        raise TokenizerError(f"tokenizer {tokenizer.name!r} produced no tokens for document {doc_id!r}")
    return ChunkedDocument(
        doc_id=doc_id,
        fingerprint=fingerprint_of(hasher.hexdigest(), tokenizer.name, chunk_tokens),
        chunk_tokens=chunk_tokens,
        tokenizer=tokenizer,
        chunks=chunks,
        parts=parts,
        part_metadata=metadata,
    )


def _encoded_batches(pieces: Iterator[str] | Sequence[str], tokenizer: Tokenizer) -> Iterator[tuple[list[int], str]]:
    """(ids, text) per piece, encoding ``BATCH_PIECES`` pieces per tokenizer call."""
    batch: list[str] = []
    for piece in pieces:
        if piece:
            batch.append(piece)
        if len(batch) == BATCH_PIECES:
            yield from _encode(batch, tokenizer)
            batch = []
    if batch:
        yield from _encode(batch, tokenizer)


def _encode(batch: list[str], tokenizer: Tokenizer) -> Iterator[tuple[list[int], str]]:
    try:
        encoded = tokenizer.encode_batch(batch)
    except TokenizerError:
        raise
    except Exception as exc:
        raise TokenizerError(f"tokenizer {tokenizer.name!r} failed to encode the document: {exc}") from exc
    yield from zip(encoded, batch, strict=True)


def _safe_cut(tokenizer: Tokenizer, ids: array, cut: int) -> int:
    """The largest cut <= ``cut`` that does not split a multi-byte character between two tokens."""
    for candidate in range(cut, max(cut - _LOOKAROUND, 0), -1):
        left = ids[max(candidate - _LOOKAROUND, 0) : candidate].tolist()
        right = ids[candidate : candidate + _LOOKAROUND].tolist()
        if tokenizer.decode(left) + tokenizer.decode(right) == tokenizer.decode(left + right):
            return candidate
    return cut
