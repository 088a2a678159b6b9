"""`read_chunk`: select chunk ``cursor`` of the document (chunking it on first use) and check its fingerprint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from memagent_graph.errors import EmptyQuestionError, FingerprintMismatchError
from memagent_graph.registry import DocumentRegistry
from memagent_graph.state import EMPTY_USAGE, MemAgentState
from memagent_graph.tokenization import Tokenizer


def read_chunk(
    documents: DocumentRegistry, tokenizer: Tokenizer, *, chunk_tokens: int
) -> Callable[[MemAgentState], Awaitable[dict[str, Any]]]:
    """Build the node that starts or continues a read and describes the current chunk (never its text)."""

    async def read_chunk(state: MemAgentState) -> dict[str, Any]:
        doc_id = state["doc_id"]
        doc = documents.cached(doc_id, tokenizer, chunk_tokens) or await asyncio.to_thread(
            documents.chunked, doc_id, tokenizer, chunk_tokens
        )
        fresh = "cursor" not in state or bool(state.get("answer"))
        update: dict[str, Any] = {}
        if fresh:
            if not state["question"].strip():
                raise EmptyQuestionError("the question is empty; ask something about the document")
            update = {
                "fingerprint": doc.fingerprint,
                "num_chunks": doc.num_chunks,
                "cursor": 0,
                "memory": "",
                "answer": "",
                "usage": dict(EMPTY_USAGE),
                "started_at": time.time(),
            }
        elif state.get("fingerprint") != doc.fingerprint:
            raise FingerprintMismatchError(
                f"this thread was reading a different document or used other settings "
                f"(fingerprint {state.get('fingerprint')} != {doc.fingerprint}); start a new thread (or --fresh)"
            )
        cursor = update.get("cursor", state.get("cursor", 0))
        update["chunk"] = {"index": cursor, "tokens": len(doc.chunks[cursor]), "part": doc.parts[cursor]}
        return update

    return read_chunk
