"""`DocumentRegistry`: documents by id, each chunked once per (tokenizer, chunk size) and cached.

The graph state carries only a ``doc_id``; nodes look the document up here, so no text is checkpointed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from memagent_graph.chunking import ChunkedDocument, chunk_document
from memagent_graph.documents import DocumentSource
from memagent_graph.errors import DocumentNotFoundError
from memagent_graph.tokenization import Tokenizer


class DocumentRegistry:
    """A thread-safe map of ``doc_id`` to `DocumentSource` with an LRU cache of chunked documents."""

    def __init__(
        self,
        documents: Mapping[str, DocumentSource] | Iterable[DocumentSource] | None = None,
        *,
        max_cached: int = 8,
    ) -> None:
        self._sources: dict[str, DocumentSource] = {}
        self._chunked: OrderedDict[tuple[str, str, int], ChunkedDocument] = OrderedDict()
        self._lock = threading.RLock()
        self._max_cached = max_cached
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

    def get(self, doc_id: str) -> DocumentSource:
        """The source registered as ``doc_id``; raises `DocumentNotFoundError` naming the known ids."""
        with self._lock:
            try:
                return self._sources[doc_id]
            except KeyError:
                known = ", ".join(sorted(self._sources)[:10]) or "none"
                raise DocumentNotFoundError(
                    f"no document registered as {doc_id!r} (known: {known}); register it with DocumentRegistry.add"
                ) from None

    def cached(self, doc_id: str, tokenizer: Tokenizer, chunk_tokens: int) -> ChunkedDocument | None:
        """The chunked document if it is already cached (never chunks)."""
        with self._lock:
            return self._chunked.get((doc_id, tokenizer.name, chunk_tokens))

    def chunked(self, doc_id: str, tokenizer: Tokenizer, chunk_tokens: int) -> ChunkedDocument:
        """The document cut into ``chunk_tokens``-token chunks by ``tokenizer`` (chunked once, then cached)."""
        key = (doc_id, tokenizer.name, chunk_tokens)
        with self._lock:
            if (hit := self._chunked.get(key)) is not None:
                self._chunked.move_to_end(key)
                return hit
            chunked = chunk_document(self.get(doc_id), tokenizer, chunk_tokens, doc_id=doc_id)
            self._chunked[key] = chunked
            while len(self._chunked) > self._max_cached:
                self._chunked.popitem(last=False)
            return chunked

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._sources

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._sources))

    def __len__(self) -> int:
        return len(self._sources)
