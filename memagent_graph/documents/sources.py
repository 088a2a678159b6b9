"""Document sources: text in memory, a file streamed from disk, or LangChain `Document`s.

A source only yields its text as *parts* (a part = one original document, with its metadata) made of
bounded *pieces*; chunking (see `chunking.py`) turns those into token-exact chunks. Nothing here holds a
whole large file in memory.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memagent_graph.errors import (
    BinaryDocumentError,
    DocumentEncodingError,
    DocumentIsDirectoryError,
    DocumentNotFoundError,
    DocumentPermissionError,
)

PIECE_CHARS = 64 * 1024
"""Target size of one text piece handed to the tokenizer (pieces end at a line break where possible)."""

_READ_BYTES = 1 << 20


@dataclass(frozen=True)
class DocumentPart:
    """One original document inside a source: its metadata and its text as an iterator of pieces."""

    metadata: Mapping[str, Any]
    pieces: Iterable[str]


@runtime_checkable
class DocumentSource(Protocol):
    """Anything the reader can chunk. ``iter_parts`` may be called more than once and must repeat itself."""

    @property
    def doc_id(self) -> str:
        """The id the registry, checkpoints and results name the document by."""
        ...

    def iter_parts(self) -> Iterator[DocumentPart]:
        """The document's parts (text pieces with metadata), the same ones on every call."""
        ...


@runtime_checkable
class SeekableSource(DocumentSource, Protocol):
    """A source that can restart a part at one of its pieces: chunking then keeps where each chunk starts
    instead of its token ids, and a chunk is encoded again when it is read (memory stays flat at any length)."""

    def pieces_from(self, part: int, *, char: int, byte: int) -> Iterator[str]:
        """The pieces of part ``part`` from the piece that starts ``char`` characters (``byte`` UTF-8 bytes) into
        its text: the same pieces `iter_parts` yields from there on."""
        ...


def split_pieces(text: str, size: int = PIECE_CHARS, *, start: int = 0) -> Iterator[str]:
    """Cut ``text`` (from character ``start``) into pieces of about ``size`` characters, ending at a line break
    (or a space) when possible. Each cut depends only on the text after the previous one, so cutting again from
    any piece's start gives the same pieces from there."""
    end = len(text)
    while start < end:
        stop = min(start + size, end)
        if stop < end:
            cut = text.rfind("\n", start + size // 2, stop)
            if cut < 0:
                cut = text.rfind(" ", start + size // 2, stop)
            if cut >= 0:
                stop = cut + 1
        yield text[start:stop]
        start = stop


class ContentHasher:
    """The content digest behind fingerprints: parts, their metadata and their text, in order."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()

    def start_part(self, metadata: Mapping[str, Any]) -> None:
        self._sha.update(b"\x00part\x00" + json.dumps(dict(metadata), sort_keys=True, default=str).encode())

    def add(self, piece: str) -> None:
        self._sha.update(piece.encode("utf-8", "surrogatepass"))

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def content_digest(source: DocumentSource) -> str:
    """sha256 of a source's content (streams it once)."""
    hasher = ContentHasher()
    for part in source.iter_parts():
        hasher.start_part(part.metadata)
        for piece in part.pieces:
            hasher.add(piece)
    return hasher.hexdigest()


def fingerprint_of(digest: str, tokenizer_name: str, chunk_tokens: int) -> str:
    """A stable id of (content, tokenizer, chunk size): resuming a run checks it."""
    return hashlib.sha256(f"{digest}|{tokenizer_name}|{chunk_tokens}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class TextDocument:
    """A document already in memory as a string."""

    text: str
    doc_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.doc_id:
            object.__setattr__(self, "doc_id", "text-" + hashlib.sha256(self.text.encode()).hexdigest()[:12])

    def iter_parts(self) -> Iterator[DocumentPart]:
        """One part: the text, with ``metadata``."""
        yield DocumentPart(self.metadata, split_pieces(self.text))

    def pieces_from(self, part: int, *, char: int, byte: int) -> Iterator[str]:
        """The text's pieces from ``char`` characters in."""
        return split_pieces(self.text, start=char)


class FileDocument:
    """A UTF-8 text file, streamed from disk in 1 MiB blocks each time it is read.

    Opening checks the path at once (missing, directory, unreadable); binary content and invalid UTF-8
    are reported with the byte offset when the reader reaches them.
    """

    def __init__(self, path: str | os.PathLike[str], *, doc_id: str | None = None) -> None:
        self.path = Path(path).expanduser()
        _check_readable(self.path)
        self.doc_id = doc_id or str(self.path)

    def iter_parts(self) -> Iterator[DocumentPart]:
        """One part: the file's text, streamed, with its path as ``source``."""
        yield DocumentPart({"source": str(self.path)}, self._pieces())

    def pieces_from(self, part: int, *, char: int, byte: int) -> Iterator[str]:
        """The file's pieces from ``byte`` UTF-8 bytes into its text, read from there on."""
        return self._pieces(byte)

    def _pieces(self, start: int = 0) -> Iterator[str]:
        """The file's pieces from ``start`` bytes into its text (a piece boundary; the BOM is not counted)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        offset, pending = 0, ""
        with _open(self.path) as handle:
            if start:
                handle.seek(start + _bom_length(handle))
                offset = handle.tell()
            while raw := handle.read(_READ_BYTES):
                block = _strip_bom(self.path, raw) if offset == 0 else raw
                skipped = len(raw) - len(block)  # a stripped BOM still counts in byte offsets
                if b"\x00" in block:
                    at = offset + skipped + block.index(0)
                    raise BinaryDocumentError(
                        f"{self.path} looks like a binary file (NUL byte near offset {at}); "
                        "pass a plain-text file (convert PDFs or Word files to text first)"
                    )
                try:
                    pending += decoder.decode(block)
                except UnicodeDecodeError as exc:
                    raise DocumentEncodingError(
                        f"{self.path} is not valid UTF-8 (byte offset {offset + skipped + exc.start}); "
                        "convert it first, e.g. iconv -f latin1 -t utf-8"
                    ) from None
                offset += len(raw)
                pieces = list(split_pieces(pending))
                pending = pieces.pop() if pieces else ""
                yield from pieces
            try:
                pending += decoder.decode(b"", final=True)
            except UnicodeDecodeError:
                raise DocumentEncodingError(
                    f"{self.path} is not valid UTF-8 (it ends inside a multi-byte character)"
                ) from None
            if pending:
                yield from split_pieces(pending)

    def __repr__(self) -> str:
        return f"FileDocument({str(self.path)!r})"


def _bom_length(handle: Any) -> int:
    """Bytes of a UTF-8 byte-order mark at the start of the open file ``handle`` (its position is kept)."""
    position = handle.tell()
    handle.seek(0)
    head = handle.read(len(codecs.BOM_UTF8))
    handle.seek(position)
    return len(codecs.BOM_UTF8) if head == codecs.BOM_UTF8 else 0


def _strip_bom(path: Path, block: bytes) -> bytes:
    if block.startswith(codecs.BOM_UTF8):
        return block[len(codecs.BOM_UTF8) :]
    if block.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise DocumentEncodingError(
            f"{path} is UTF-16 text; convert it to UTF-8 first, e.g. iconv -f utf-16 -t utf-8 {path}"
        )
    return block


def _check_readable(path: Path) -> None:
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as exc:  # e.g. a symlink loop
        raise DocumentNotFoundError(f"cannot open {path}: {exc.strerror or exc}") from None
    if is_dir:
        raise DocumentIsDirectoryError(f"{path} is a directory; pass a text file")
    if not exists:
        if path.is_symlink():
            raise DocumentNotFoundError(f"cannot open {path}: a broken symlink or a symlink loop")
        raise DocumentNotFoundError(f"document not found: {path}")
    with _open(path):
        pass


def _open(path: Path):
    try:
        return path.open("rb")
    except PermissionError:
        raise DocumentPermissionError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise DocumentNotFoundError(f"cannot open {path}: {exc.strerror or exc}") from None


class LangChainDocuments:
    """LangChain `Document`s read as one source: chunks never cross a document and carry its metadata."""

    def __init__(self, documents: Iterable[Any], *, doc_id: str | None = None) -> None:
        self.documents = list(documents)
        self.doc_id = (
            doc_id
            or "lc-" + hashlib.sha256("\x00".join(d.page_content for d in self.documents).encode()).hexdigest()[:12]
        )

    def iter_parts(self) -> Iterator[DocumentPart]:
        """One part per LangChain document, with a copy of its metadata."""
        for document in self.documents:
            yield DocumentPart(dict(document.metadata), split_pieces(document.page_content))

    def pieces_from(self, part: int, *, char: int, byte: int) -> Iterator[str]:
        """The pieces of document ``part`` from ``char`` characters in."""
        return split_pieces(self.documents[part].page_content, start=char)
