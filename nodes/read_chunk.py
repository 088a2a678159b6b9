"""`read_chunk`: select chunk ``cursor`` of the document (chunking it on first use) and check its fingerprint."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.runnables import RunnableLambda

from memagent_graph.documents.chunking import ChunkedDocument
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import EmptyQuestionError, FingerprintMismatchError
from memagent_graph.state import EMPTY_USAGE, MemAgentState


def read_chunk(
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    chunk_tokens: int,
    reset: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
) -> RunnableLambda:
    """Build the node that starts or continues a read and describes the current chunk (never its text).

    ``reset`` checks the input and returns the per-question fields of a fresh read (default: one question).
    """
    reset = reset or reset_one_question

    def sync(state: MemAgentState) -> dict[str, Any]:
        return _select(state, documents.chunked(state["doc_id"], tokenizer, chunk_tokens), reset)

    async def async_(state: MemAgentState) -> dict[str, Any]:
        doc = documents.cached(state["doc_id"], tokenizer, chunk_tokens) or await asyncio.to_thread(
            documents.chunked, state["doc_id"], tokenizer, chunk_tokens
        )
        return _select(state, doc, reset)

    return RunnableLambda(sync, afunc=async_, name="read_chunk")


def reset_one_question(state: Mapping[str, Any]) -> dict[str, Any]:
    """A fresh read of one question: an empty memory and no answer yet."""
    if not state["question"].strip():
        raise EmptyQuestionError("the question is empty; ask something about the document")
    return {"memory": "", "answer": ""}


def _select(
    state: Mapping[str, Any], doc: ChunkedDocument, reset: Callable[[Mapping[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """A fresh start (no cursor yet, or the thread's last run finished) resets the read; else check and go on."""
    update: dict[str, Any] = {}
    if "cursor" not in state or state.get("finished"):
        update = {
            **reset(state),
            "fingerprint": doc.fingerprint,
            "num_chunks": doc.num_chunks,
            "cursor": 0,
            "finished": False,
            "usage": dict(EMPTY_USAGE),
            "started_at": time.time(),
        }
    elif state.get("fingerprint") != doc.fingerprint:
        raise FingerprintMismatchError(
            "this thread was reading a different document or used other settings "
            f"(fingerprint {state.get('fingerprint')} != {doc.fingerprint}); start a new thread"
        )
    cursor = update.get("cursor", state.get("cursor", 0))
    update["chunk"] = {"index": cursor, "tokens": len(doc.chunks[cursor]), "part": doc.parts[cursor]}
    return update
