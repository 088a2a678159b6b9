"""`DocumentRegistry`: documents by id, each chunked once per (tokenizer, chunk size) and cached.

The graph state carries only a ``doc_id``; nodes look the document up here, so no text is checkpointed.
With ``allowed_root``, an id that is not registered may also name a text file under that folder (and only
there: absolute paths, ``..`` and symlinks that lead outside are refused), which is how a tool or a server
lets callers name files without letting them read arbitrary ones. With ``index_dir``, each file's chunk index is
saved there and reused while the file is unchanged (`chunk_index_file`): a resumed read does not re-tokenize.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from memagent_graph.documents.chunk_index_file import chunk_index_path, load_chunk_index, save_chunk_index
from memagent_graph.documents.chunking import ChunkedDocument, chunk_document
from memagent_graph.documents.sources import DocumentSource, FileDocument
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import DocumentAccessError, DocumentNotFoundError

log = logging.getLogger(__name__)


class DocumentRegistry:
    """A thread-safe map of ``doc_id`` to `DocumentSource` with an LRU cache of chunked documents."""

    def __init__(
        self,
        documents: Mapping[str, DocumentSource] | Iterable[DocumentSource] | None = None,
        *,
        allowed_root: str | os.PathLike[str] | None = None,
        max_cached: int = 8,
        index_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._sources: dict[str, DocumentSource] = {}
        self._chunked: OrderedDict[tuple[str, str, int], ChunkedDocument] = OrderedDict()
        self._lock = threading.RLock()
        self._chunking: dict[tuple[str, str, int], threading.Lock] = {}
        self._max_cached = max_cached
        self.allowed_root = Path(allowed_root).expanduser().resolve() if allowed_root is not None else None
        self.index_dir = Path(index_dir).expanduser() if index_dir is not None else None
        items = documents.items() if isinstance(documents, Mapping) else ((None, d) for d in documents or ())
        for doc_id, source in items:
            self.add(source, doc_id=doc_id)

    def add(self, source: DocumentSource, *, doc_id: str | None = None) -> str:
        """Register ``source`` (under its own ``doc_id`` unless one is given) and return the id."""
        key = doc_id or source.doc_id
        with self._lock:
            if self._sources.get(key) is not source:
                self._sources[key] = source
                for cached in [k for k in self._chunked if k[0] == key]:
                    del self._chunked[cached]
        return key

    def discard(self, doc_id: str) -> None:
        """Forget ``doc_id`` and its chunked copies (for one-off documents in long-running services)."""
        with self._lock:
            self._sources.pop(doc_id, None)
            for cached in [k for k in self._chunked if k[0] == doc_id]:
                del self._chunked[cached]

    def get(self, doc_id: str) -> DocumentSource:
        """The source registered as ``doc_id``, else a file under ``allowed_root``; raises `DocumentNotFoundError`."""
        with self._lock:
            if (source := self._sources.get(doc_id)) is not None:
                return source
            if self.allowed_root is not None:
                source = FileDocument(self.file_under_root(doc_id))
                self.add(source, doc_id=doc_id)
                return source
            known = ", ".join(sorted(self._sources)[:10]) or "none"
            raise DocumentNotFoundError(
                f"no document registered as {doc_id!r} (known: {known}); register it with DocumentRegistry.add"
            )

    def file_under_root(self, relative: str) -> Path:
        """The real path of ``relative`` inside ``allowed_root``; raises `DocumentAccessError` if it leads outside."""
        if self.allowed_root is None:
            raise DocumentAccessError("this registry has no allowed_root: only registered documents can be read")
        candidate = Path(relative)
        if candidate.is_absolute() or ".." in candidate.parts:
            raise DocumentAccessError(
                f"{relative!r} is not a relative path inside the allowed folder; name a file under it, without '..'"
            )
        resolved = (self.allowed_root / candidate).resolve()
        if not resolved.is_relative_to(self.allowed_root):
            raise DocumentAccessError(f"{relative!r} leads outside the allowed folder (through a symlink)")
        return resolved

    def cached(self, doc_id: str, tokenizer: Tokenizer, chunk_tokens: int) -> ChunkedDocument | None:
        """The chunked document if it is already cached (never chunks)."""
        with self._lock:
            return self._chunked.get((doc_id, tokenizer.name, chunk_tokens))

    def chunked(self, doc_id: str, tokenizer: Tokenizer, chunk_tokens: int) -> ChunkedDocument:
        """The document cut into ``chunk_tokens``-token chunks by ``tokenizer`` (chunked once, then cached).

        Chunking runs outside the registry lock (one lock per document), so other documents stay available.
        """
        key = (doc_id, tokenizer.name, chunk_tokens)
        with self._lock:
            if (hit := self._chunked.get(key)) is not None:
                self._chunked.move_to_end(key)
                return hit
            source = self.get(doc_id)
            key_lock = self._chunking.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if (hit := self._chunked.get(key)) is not None:  # another thread chunked it meanwhile
                    return hit
            chunked = self._chunk(source, tokenizer, chunk_tokens, doc_id)
            with self._lock:
                self._chunked[key] = chunked
                self._chunking.pop(key, None)
                while len(self._chunked) > self._max_cached:
                    self._chunked.popitem(last=False)
            return chunked

    def _chunk(self, source: DocumentSource, tokenizer: Tokenizer, chunk_tokens: int, doc_id: str) -> ChunkedDocument:
        """Chunk ``source``, or load its saved index from ``index_dir`` (saving it there after chunking)."""
        if self.index_dir is None:
            return chunk_document(source, tokenizer, chunk_tokens, doc_id=doc_id)
        path = chunk_index_path(self.index_dir, doc_id, tokenizer, chunk_tokens)
        if (loaded := load_chunk_index(source, tokenizer, chunk_tokens, path, doc_id=doc_id)) is not None:
            return loaded
        chunked = chunk_document(source, tokenizer, chunk_tokens, doc_id=doc_id)
        try:
            save_chunk_index(chunked, path)
        except OSError as exc:  # the read goes on; a resumed read will chunk again
            log.warning("could not save the chunk index in %s (%s); reading on without it", self.index_dir, exc)
        return chunked

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._sources

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._sources))

    def __len__(self) -> int:
        return len(self._sources)
