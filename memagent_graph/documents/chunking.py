"""Token-exact chunking: a `DocumentSource` becomes a `ChunkedDocument` of at most ``chunk_tokens`` each.

Text is encoded in batches of bounded pieces (the tokenizer's parallel batch path; one giant string is
~4x slower), in one streaming pass. A chunk boundary never splits a character: decoded chunks concatenate
exactly to the decoded document.

What is kept is an index, not the tokens: per piece where it starts (characters, bytes, tokens), per chunk its
first token and length. Reading chunk *i* restarts the source at its piece (`SeekableSource.pieces_from`),
encodes that piece again (and the next, when the chunk runs into it) and slices the ids: the same ids, since
pieces are always encoded whole. The last two encoded pieces are remembered, so a read in order encodes each
piece once more. A source that cannot restart keeps its token ids (4 bytes each) instead.
"""

from __future__ import annotations

import contextlib
import threading
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from memagent_graph.documents.sources import ContentHasher, DocumentSource, SeekableSource, fingerprint_of
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import DocumentChangedError, EmptyDocumentError, TokenizerError

BATCH_PIECES = 32
"""Pieces encoded per `encode_batch` call (32 x 64 KiB: enough work to use every core)."""

_LOOKAROUND = 4  # tokens decoded on each side of a boundary to detect a split character
_REMEMBERED_PIECES = 2  # per reader: a read in order needs its current piece and the next
_MAX_READERS = 16  # reads in order at once (parallel segments) whose place in the source is kept
_REMEMBERED_TEXTS = 2


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
    tokens: ChunkTokens
    parts: Sequence[int]
    part_metadata: Sequence[Mapping[str, Any]]
    _origins: list[ChunkOrigin] = field(default_factory=list, init=False, repr=False, compare=False)
    _origins_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)
    _texts: OrderedDict[int, str] = field(default_factory=OrderedDict, init=False, repr=False, compare=False)
    _texts_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    @property
    def num_chunks(self) -> int:
        return len(self.parts)

    @property
    def num_tokens(self) -> int:
        return sum(self.tokens.length(i) for i in range(self.num_chunks))

    def chunk_length(self, index: int) -> int:
        """Tokens in chunk ``index`` (without encoding it)."""
        return self.tokens.length(index)

    def chunk_ids(self, index: int) -> list[int]:
        """Token ids of chunk ``index``."""
        return self.tokens.ids(index)

    def chunk_text(self, index: int) -> str:
        """Text of chunk ``index`` (its ids decoded; the last two decoded are remembered, so a read in order
        that also asks where each chunk starts decodes every chunk once)."""
        with self._texts_lock:
            if (text := self._texts.get(index)) is not None:
                return text
        text = self.tokenizer.decode(self.tokens.ids(index))
        with self._texts_lock:
            self._texts[index] = text
            while len(self._texts) > _REMEMBERED_TEXTS:
                self._texts.popitem(last=False)
        return text

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
                        previous.byte + len(text.encode("utf-8", "surrogatepass")),
                        previous.line + text.count("\n"),
                    )
                )
            return self._origins[index]


class ChunkTokens(Protocol):
    """Where a `ChunkedDocument` gets each chunk's token ids from."""

    def ids(self, index: int) -> list[int]: ...

    def length(self, index: int) -> int: ...


@dataclass
class HeldTokens:
    """The ids of every chunk, kept (for sources that cannot restart at a piece)."""

    chunks: list[array] = field(default_factory=list)

    def add(self, ids: array, part: int, start: int) -> None:
        self.chunks.append(ids)

    def ids(self, index: int) -> list[int]:
        return self.chunks[index].tolist()

    def length(self, index: int) -> int:
        return len(self.chunks[index])


@dataclass
class PieceIndex:
    """Where every piece and chunk starts; a chunk's ids are encoded again from its piece when asked for."""

    source: SeekableSource
    tokenizer: Tokenizer
    piece_chars: list[array] = field(default_factory=list)  # per part: each piece's first character,
    piece_bytes: list[array] = field(default_factory=list)  # its first UTF-8 byte,
    piece_tokens: list[array] = field(default_factory=list)  # and its first token, in the part
    chunk_parts: array = field(default_factory=lambda: array("I"))
    chunk_starts: array = field(default_factory=lambda: array("Q"))  # first token in the part
    chunk_lengths: array = field(default_factory=lambda: array("I"))
    _pieces: OrderedDict[tuple[int, int], list[int]] = field(default_factory=OrderedDict)
    _open_readers: OrderedDict[tuple[int, int], Iterator[str]] = field(default_factory=OrderedDict)
    """The source's pieces where each read in order stopped, by (part, next piece), oldest first."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_piece(self, part: int, char: int, byte: int, token: int) -> None:
        while len(self.piece_chars) <= part:
            self.piece_chars.append(array("Q"))
            self.piece_bytes.append(array("Q"))
            self.piece_tokens.append(array("Q"))
        self.piece_chars[part].append(char)
        self.piece_bytes[part].append(byte)
        self.piece_tokens[part].append(token)

    def add(self, ids: array, part: int, start: int) -> None:
        self.chunk_parts.append(part)
        self.chunk_starts.append(start)
        self.chunk_lengths.append(len(ids))

    def length(self, index: int) -> int:
        return self.chunk_lengths[index]

    def ids(self, index: int) -> list[int]:
        part, start, length = self.chunk_parts[index], self.chunk_starts[index], self.chunk_lengths[index]
        piece = bisect_right(self.piece_tokens[part], start) - 1
        first = self.piece_tokens[part][piece]
        ids: list[int] = []
        with contextlib.closing(self._encoded(part, piece)) as encoded:
            for ids_of_piece in encoded:
                ids.extend(ids_of_piece)
                if len(ids) >= start - first + length:
                    break
        return ids[start - first : start - first + length]

    def _encoded(self, part: int, piece: int) -> Iterator[list[int]]:
        """The ids of the part's pieces from ``piece`` on, remembered ones first, the rest encoded again.

        The source read is kept where it stopped when this generator is closed, so a read in order goes on
        from there instead of restarting the source (a file: reading a 1 MiB block again) for every piece.
        """
        pieces: Iterator[str] | None = None
        position = piece  # the piece ``pieces`` yields next
        try:
            for index in range(piece, len(self.piece_tokens[part])):
                with self._lock:
                    remembered = self._pieces.get((part, index))
                if remembered is None:
                    if pieces is None:
                        pieces = self._reader(part, index)
                    text, position = next(pieces, ""), index + 1
                    remembered = self._encode_piece(part, index, text)
                elif pieces is not None:
                    next(pieces, "")  # keep the source's read in step
                    position = index + 1
                yield remembered
        except GeneratorExit:  # the caller has what it needed: keep the read for the next chunk
            if pieces is not None:
                with self._lock:
                    self._open_readers[(part, position)] = pieces
                    while len(self._open_readers) > _MAX_READERS:
                        _close(self._open_readers.popitem(last=False)[1])
            raise

    def _reader(self, part: int, index: int) -> Iterator[str]:
        """The source's pieces of ``part`` from piece ``index``: the kept reader if it stands there, else the
        source restarted at that piece."""
        with self._lock:
            kept = self._open_readers.pop((part, index), None)
        if kept is not None:
            return kept
        return self.source.pieces_from(part, char=self.piece_chars[part][index], byte=self.piece_bytes[part][index])

    def _encode_piece(self, part: int, index: int, text: str) -> list[int]:
        """Encode the part's piece ``index`` (as chunking encoded it: alone), check it is as long as it was when
        chunked, and remember it."""
        remembered = self.tokenizer.encode_batch([text])[0]
        if len(remembered) != self._piece_length(part, index):
            raise DocumentChangedError(
                f"{getattr(self.source, 'doc_id', 'the document')} changed after it was chunked (piece "
                f"{index} now has {len(remembered)} tokens, not {self._piece_length(part, index)}); "
                "start a new read of the document as it is now"
            )
        with self._lock:
            self._pieces[(part, index)] = remembered
            while len(self._pieces) > _REMEMBERED_PIECES * (len(self._open_readers) + 1):
                self._pieces.popitem(last=False)
        return remembered

    def _piece_length(self, part: int, index: int) -> int:
        """Tokens of the part's piece ``index`` when it was chunked."""
        starts = self.piece_tokens[part]
        end = starts[index + 1] if index + 1 < len(starts) else self._part_end(part)
        return end - starts[index]

    def _part_end(self, part: int) -> int:
        """The token count of part ``part`` (where its last chunk ends; chunks are in part order)."""
        last = bisect_right(self.chunk_parts, part) - 1
        return self.chunk_starts[last] + self.chunk_lengths[last]


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
    tokens: HeldTokens | PieceIndex = (
        PieceIndex(source, tokenizer) if isinstance(source, SeekableSource) else HeldTokens()
    )
    parts: list[int] = []
    metadata: list[Mapping[str, Any]] = []
    has_text = False
    for part_index, part in enumerate(source.iter_parts()):
        hasher.start_part(part.metadata)
        metadata.append(dict(part.metadata))
        buffer, buffer_start, position = array("I"), 0, 0  # buffer[0] is token buffer_start of the part
        char = byte = 0
        for ids, text in _encoded_batches(part.pieces, tokenizer):
            hasher.add(text)
            has_text = has_text or not text.isspace()
            if isinstance(tokens, PieceIndex):
                tokens.add_piece(part_index, char, byte, buffer_start + len(buffer))
            char, byte = char + len(text), byte + len(text.encode("utf-8", "surrogatepass"))
            if position:  # drop the tokens of chunks already cut (once per piece, not once per chunk)
                del buffer[:position]
                buffer_start, position = buffer_start + position, 0
            buffer.extend(ids)
            while len(buffer) - position > chunk_tokens + _LOOKAROUND:
                cut = _safe_cut(tokenizer, buffer, position, chunk_tokens)
                tokens.add(buffer[position : position + cut], part_index, buffer_start + position)
                parts.append(part_index)
                position += cut
        while position < len(buffer):
            left = len(buffer) - position
            cut = _safe_cut(tokenizer, buffer, position, chunk_tokens) if left > chunk_tokens else left
            tokens.add(buffer[position : position + cut], part_index, buffer_start + position)
            parts.append(part_index)
            position += cut
    if not has_text:
        raise EmptyDocumentError(f"document {doc_id!r} is empty (no text to read)")
    if not parts:
        raise TokenizerError(f"tokenizer {tokenizer.name!r} produced no tokens for document {doc_id!r}")
    return ChunkedDocument(
        doc_id=doc_id,
        fingerprint=fingerprint_of(hasher.hexdigest(), tokenizer.name, chunk_tokens),
        chunk_tokens=chunk_tokens,
        tokenizer=tokenizer,
        tokens=tokens,
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


def _safe_cut(tokenizer: Tokenizer, ids: array, start: int, cut: int) -> int:
    """The largest cut <= ``cut`` tokens after ``start`` that does not split a multi-byte character between two
    tokens."""
    for candidate in range(cut, max(cut - _LOOKAROUND, 0), -1):
        at = start + candidate
        left = ids[max(at - _LOOKAROUND, start) : at].tolist()
        right = ids[at : at + _LOOKAROUND].tolist()
        if tokenizer.decode(left) + tokenizer.decode(right) == tokenizer.decode(left + right):
            return candidate
    return cut


def _close(reader: Iterator[str]) -> None:
    """Let a source's read go (a file's generator closes its file now rather than when collected)."""
    close = getattr(reader, "close", None)
    if close is not None:
        close()
