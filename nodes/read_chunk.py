"""`read_chunk`: select chunk ``cursor`` of the document (chunking it on first use) and check its fingerprint."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langchain_core.runnables import RunnableLambda

from memagent_graph.chunking import ChunkedDocument
from memagent_graph.errors import EmptyQuestionError, FingerprintMismatchError
from memagent_graph.registry import DocumentRegistry
from memagent_graph.state import EMPTY_USAGE, MemAgentState
from memagent_graph.tokenization import Tokenizer


def read_chunk(documents: DocumentRegistry, tokenizer: Tokenizer, *, chunk_tokens: int) -> RunnableLambda:
    """Build the node that starts or continues a read and describes the current chunk (never its text)."""

    def sync(state: MemAgentState) -> dict[str, Any]:
        return _select(state, documents.chunked(state["doc_id"], tokenizer, chunk_tokens))

    async def async_(state: MemAgentState) -> dict[str, Any]:
        doc = documents.cached(state["doc_id"], tokenizer, chunk_tokens) or await asyncio.to_thread(
            documents.chunked, state["doc_id"], tokenizer, chunk_tokens
        )
        return _select(state, doc)

    return RunnableLambda(sync, afunc=async_, name="read_chunk")


def _select(state: MemAgentState, doc: ChunkedDocument) -> dict[str, Any]:
    """A fresh start (no cursor yet, or the thread's last run finished) resets the read; else check and go on."""
    update: dict[str, Any] = {}
    if "cursor" not in state or state.get("answer"):
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
            "this thread was reading a different document or used other settings "
            f"(fingerprint {state.get('fingerprint')} != {doc.fingerprint}); start a new thread (or --fresh)"
        )
    cursor = update.get("cursor", state.get("cursor", 0))
    update["chunk"] = {"index": cursor, "tokens": len(doc.chunks[cursor]), "part": doc.parts[cursor]}
    return update
