"""Chunk index files: a chunked file's index (where its pieces and chunks start) saved to disk, so that a resumed
read of a long file does not tokenize it again.

Loading one hashes the file again (a pass without the tokenizer: `content_digest`) and uses the index only if the
fingerprint (content, tokenizer, chunk size) is the one it was saved with; anything else (no file, another
version, a changed or truncated file) means chunking as usual. The file holds offsets only, never text.

Layout: one JSON header line, then the arrays it lists, raw, in its order (the `array` module's own format:
numbers, no code to run on load).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memagent_graph.documents.chunking import ChunkedDocument, PieceIndex
from memagent_graph.documents.sources import DocumentSource, SeekableSource, content_digest, fingerprint_of
from memagent_graph.documents.tokenization import Tokenizer

log = logging.getLogger(__name__)

FORMAT = "memagent-chunk-index/1"


def chunk_index_path(folder: str | os.PathLike[str], doc_id: str, tokenizer: Tokenizer, chunk_tokens: int) -> Path:
    """Where the index of ``doc_id`` chunked by ``tokenizer`` into ``chunk_tokens``-token chunks is kept."""
    key = hashlib.sha256(f"{doc_id}|{tokenizer.name}|{chunk_tokens}".encode()).hexdigest()[:24]
    return Path(folder) / f"{key}.chunks"


def save_chunk_index(chunked: ChunkedDocument, path: str | os.PathLike[str]) -> bool:
    """Write ``chunked``'s index to ``path`` (atomically, readable by its owner only); False, writing nothing,
    for a document whose source cannot restart at a piece (its token ids are held instead) or whose metadata is
    not JSON."""
    index = chunked.tokens
    if not isinstance(index, PieceIndex):
        return False
    arrays = _arrays(index)
    header = {
        "format": FORMAT,
        "fingerprint": chunked.fingerprint,
        "tokenizer": chunked.tokenizer.name,
        "chunk_tokens": chunked.chunk_tokens,
        "part_metadata": [dict(metadata) for metadata in chunked.part_metadata],
        "arrays": [[name, values.typecode, len(values)] for name, values in arrays],
    }
    try:
        line = json.dumps(header).encode() + b"\n"
    except TypeError:
        return False
    target = Path(path)
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner-only, like checkpoint files
    partial = target.with_name(target.name + ".partial")
    with open(partial, "wb", opener=lambda name, flags: os.open(name, flags, 0o600)) as out:
        out.write(line)
        for _, values in arrays:
            values.tofile(out)
    os.replace(partial, target)
    return True


def load_chunk_index(
    source: DocumentSource,
    tokenizer: Tokenizer,
    chunk_tokens: int,
    path: str | os.PathLike[str],
    *,
    doc_id: str | None = None,
) -> ChunkedDocument | None:
    """The `ChunkedDocument` saved at ``path`` if it is the index of ``source`` as it is now (same content,
    tokenizer and chunk size), else None."""
    if not isinstance(source, SeekableSource) or not Path(path).is_file():
        return None
    try:
        header, arrays = _read(Path(path))
    except (OSError, ValueError, EOFError, KeyError, TypeError) as exc:
        log.info("ignoring chunk index %s (%s); chunking the document again", path, exc)
        return None
    saved_for = (header.get("format"), header.get("tokenizer"), header.get("chunk_tokens"))
    if saved_for != (FORMAT, tokenizer.name, chunk_tokens):
        return None
    if fingerprint_of(content_digest(source), tokenizer.name, chunk_tokens) != header["fingerprint"]:
        log.info("chunk index %s is of another version of the document; chunking it again", path)
        return None
    index = PieceIndex(source, tokenizer)
    pieced = sum(name.startswith("piece_chars.") for name in arrays)  # parts up to the last with text
    index.piece_chars = [arrays[f"piece_chars.{part}"] for part in range(pieced)]
    index.piece_bytes = [arrays[f"piece_bytes.{part}"] for part in range(pieced)]
    index.piece_tokens = [arrays[f"piece_tokens.{part}"] for part in range(pieced)]
    index.chunk_parts, index.chunk_starts = arrays["chunk_parts"], arrays["chunk_starts"]
    index.chunk_lengths = arrays["chunk_lengths"]
    return ChunkedDocument(
        doc_id=doc_id or source.doc_id,
        fingerprint=header["fingerprint"],
        chunk_tokens=chunk_tokens,
        tokenizer=tokenizer,
        tokens=index,
        parts=index.chunk_parts,
        part_metadata=header["part_metadata"],
    )


def _arrays(index: PieceIndex) -> list[tuple[str, array]]:
    named = [("chunk_parts", index.chunk_parts), ("chunk_starts", index.chunk_starts)]
    named.append(("chunk_lengths", index.chunk_lengths))
    for part in range(len(index.piece_chars)):
        named.append((f"piece_chars.{part}", index.piece_chars[part]))
        named.append((f"piece_bytes.{part}", index.piece_bytes[part]))
        named.append((f"piece_tokens.{part}", index.piece_tokens[part]))
    return named


def _read(path: Path) -> tuple[Mapping[str, Any], dict[str, array]]:
    with path.open("rb") as file:
        header = json.loads(file.readline())
        arrays: dict[str, array] = {}
        for name, typecode, count in header["arrays"]:
            values = array(typecode)
            values.fromfile(file, count)  # EOFError when the file is cut short
            arrays[name] = values
        if file.read(1):
            raise ValueError("trailing bytes after the last array")
    return header, arrays
