"""`read_chunk`: select chunk ``cursor`` of the document (chunking it on first use) and check its fingerprint;
a fresh read first passes the read checks (`read_checks`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig, RunnableLambda

from memagent_graph.documents.chunking import ChunkedDocument
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import FingerprintMismatchError
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.nodes.read_checks import ReadChecks, check_recursion_limit
from memagent_graph.state import EMPTY_USAGE


def read_chunk(
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    chunk_tokens: int,
    checks: ReadChecks,
    questions: Questions = ONE_QUESTION,
) -> RunnableLambda:
    """Build the node that starts or continues a read and describes the current chunk (never its text)."""

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        if _fresh(state):
            checks.check_questions(questions.questions(state))
        doc = documents.chunked(state["doc_id"], tokenizer, chunk_tokens)
        return _select(state, doc, questions, config)

    async def async_(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        if _fresh(state):  # tokenizer work may be blocking I/O (a server's /tokenize)
            await asyncio.to_thread(checks.check_questions, questions.questions(state))
        doc = documents.cached(state["doc_id"], tokenizer, chunk_tokens) or await asyncio.to_thread(
            documents.chunked, state["doc_id"], tokenizer, chunk_tokens
        )
        return _select(state, doc, questions, config)

    return RunnableLambda(sync, afunc=async_, name="read_chunk")


def _fresh(state: Mapping[str, Any]) -> bool:
    """No read yet on this thread, or its last one finished: the input starts a new read."""
    return "cursor" not in state or bool(state.get("finished"))


def _select(
    state: Mapping[str, Any],
    doc: ChunkedDocument,
    questions: Questions,
    config: RunnableConfig,
) -> dict[str, Any]:
    """A fresh start resets the read (once the run's recursion limit is known to reach the answer); else
    check the document and go on."""
    update: dict[str, Any] = {}
    if _fresh(state):
        check_recursion_limit(doc.num_chunks, config["recursion_limit"])
        update = {
            **questions.fresh(state),
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
    update["chunk"] = {"index": cursor, "tokens": doc.chunk_length(cursor), "part": doc.parts[cursor]}
    return update
