"""`DocumentRegistry`: documents by id, each chunked once per (tokenizer, chunk size) and cached.

The graph state carries only a ``doc_id``; nodes look the document up here, so no text is checkpointed.
With ``allowed_root``, an id that is not registered may also name a text file under that folder (and only
there: absolute paths, ``..`` and symlinks that lead outside are refused), which is how a tool or a server
lets callers name files without letting them read arbitrary ones. With ``index_dir``, each file's chunk index is
saved there and reused while the file is unchanged (`chunk_index_file`): a resumed read does not re-tokenize.

Lifetime: a document registered with `add` stays until `discard`. A one-off document (``add(one_off=True)``:
each `DocumentSource` a `MemAgent` is handed, and each file found under ``allowed_root``) is released with its
chunk indexes once ``max_one_off`` other one-offs were used more recently, so a long-lived service stays at
that bound. A read holds its chunked document, which is found by id for as long as it is held: a release never
cuts a read short.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from memagent_graph.documents.chunk_index_file import chunk_index_path, load_chunk_index, save_chunk_index
from memagent_graph.documents.chunking import ChunkedDocument, chunk_document
from memagent_graph.documents.sources import DocumentSource, FileDocument
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import DocumentAccessError, DocumentNotFoundError

log = logging.getLogger(__name__)

_ChunkKey = tuple[str, str, int]  # (doc_id, tokenizer name, chunk tokens)
DEFAULT_MAX_CACHED = 8


class DocumentRegistry:
    """A thread-safe map of ``doc_id`` to `DocumentSource`: an LRU cache of chunked documents, and at most
    ``max_one_off`` one-off documents (see module doc)."""

    def __init__(
        self,
        documents: Mapping[str, DocumentSource] | Iterable[DocumentSource] | None = None,
        *,
        allowed_root: str | os.PathLike[str] | None = None,
        max_cached: int = DEFAULT_MAX_CACHED,
        max_one_off: int = 32,
        index_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self._sources: dict[str, DocumentSource] = {}
        self._one_off: OrderedDict[str, DocumentSource] = OrderedDict()
        self._chunked: OrderedDict[_ChunkKey, ChunkedDocument] = OrderedDict()
        self._held: weakref.WeakValueDictionary[_ChunkKey, ChunkedDocument] = weakref.WeakValueDictionary()
        self._lock = threading.RLock()
        self._chunking: dict[_ChunkKey, threading.Lock] = {}
        self._max_cached, self._max_one_off = max_cached, max_one_off
        self.allowed_root = Path(allowed_root).expanduser().resolve() if allowed_root is not None else None
        self.index_dir = Path(index_dir).expanduser() if index_dir is not None else None
        items = documents.items() if isinstance(documents, Mapping) else ((None, d) for d in documents or ())
        for doc_id, source in items:
            self.add(source, doc_id=doc_id)

    def add(self, source: DocumentSource, *, doc_id: str | None = None, one_off: bool = False) -> str:
        """Register ``source`` (under its own ``doc_id`` unless one is given) and return the id. ``one_off``: keep
        it only while it is among the ``max_one_off`` most recently used one-offs (an id registered without
        ``one_off`` stays so). An equal source (e.g. the same text) keeps the chunk index already made."""
        key = doc_id or source.doc_id
        with self._lock:
            kept, current = key in self._sources, self._source(key)
            if current != source:  # another document under this id: no chunked copy of the old one is served
                self._release(key, held=True)
                current = source
            if one_off and not kept:
                self._one_off[key] = current
                self._one_off.move_to_end(key)
                while len(self._one_off) > self._max_one_off:
                    self._release(next(iter(self._one_off)))
            else:
                self._one_off.pop(key, None)
                self._sources[key] = current
        return key

    def discard(self, doc_id: str) -> None:
        """Release ``doc_id`` and its cached chunk indexes (reads in progress finish with the copy they hold)."""
        with self._lock:
            self._release(doc_id)

    def get(self, doc_id: str) -> DocumentSource:
        """The source registered as ``doc_id``, else a file under ``allowed_root``; raises `DocumentNotFoundError`."""
        with self._lock:
            if doc_id in self._one_off:
                self._one_off.move_to_end(doc_id)
            if (source := self._source(doc_id)) is not None:
                return source
            if self.allowed_root is not None:
                source = FileDocument(self.file_under_root(doc_id))
                self.add(source, doc_id=doc_id, one_off=True)  # found again by its path once released
                return source
            known = ", ".join(sorted(self)[:10]) or "none"
            raise DocumentNotFoundError(
                f"no document registered as {doc_id!r} (known: {known}); register it with DocumentRegistry.add"
            )

    def _source(self, doc_id: str) -> DocumentSource | None:
        return self._sources[doc_id] if doc_id in self._sources else self._one_off.get(doc_id)

    def _release(self, doc_id: str, *, held: bool = False) -> None:
        """With the lock held: forget ``doc_id`` and its cached chunked copies (``held``: those reads hold too)."""
        self._sources.pop(doc_id, None)
        self._one_off.pop(doc_id, None)
        for cache in (self._chunked, self._held) if held else (self._chunked,):
            for key in [k for k in cache if k[0] == doc_id]:
                del cache[key]

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
        """The chunked document if it is already cached or held by a read (never chunks)."""
        with self._lock:
            return self._hit((doc_id, tokenizer.name, chunk_tokens))

    def chunked(self, doc_id: str, tokenizer: Tokenizer, chunk_tokens: int) -> ChunkedDocument:
        """The document cut into ``chunk_tokens``-token chunks by ``tokenizer`` (chunked once, then cached)."""
        return self._chunked_copy(doc_id, tokenizer, chunk_tokens, None)

    def chunked_one_off(self, source: DocumentSource, tokenizer: Tokenizer, chunk_tokens: int) -> ChunkedDocument:
        """Register ``source`` as a one-off (`add`) and return it chunked, even if it is released meanwhile."""
        return self._chunked_copy(self.add(source, one_off=True), tokenizer, chunk_tokens, source)

    def _chunked_copy(
        self, doc_id: str, tokenizer: Tokenizer, chunk_tokens: int, source: DocumentSource | None
    ) -> ChunkedDocument:
        """`chunked`, of ``source`` when given (else the one registered). Chunking runs outside the registry
        lock (one lock per document), so other documents stay available."""
        key = (doc_id, tokenizer.name, chunk_tokens)
        with self._lock:
            if (hit := self._hit(key)) is not None:
                return hit
            source = self.get(doc_id) if source is None else source
            key_lock = self._chunking.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if (hit := self._hit(key)) is not None:  # another thread chunked it meanwhile
                    return hit
            try:
                chunked = self._chunk(source, tokenizer, chunk_tokens, doc_id)
                with self._lock:
                    current = self._source(doc_id)
                    if current is None or current == source:  # not replaced by another document meanwhile
                        self._held[key] = chunked
                    if current == source:
                        self._chunked[key] = chunked
                        while len(self._chunked) > self._max_cached:
                            self._chunked.popitem(last=False)
            finally:
                with self._lock:
                    self._chunking.pop(key, None)
            return chunked

    def _hit(self, key: _ChunkKey) -> ChunkedDocument | None:
        """With the lock held: the cached chunked document (now the most recent), else one a read holds."""
        if (hit := self._chunked.get(key)) is not None:
            self._chunked.move_to_end(key)
            return hit
        return self._held.get(key)

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
        return doc_id in self._sources or doc_id in self._one_off

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter([*self._sources, *self._one_off])

    def __len__(self) -> int:
        return len(self._sources) + len(self._one_off)
