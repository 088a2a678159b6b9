"""`read_chunk`: open a read, once per run: chunk the document (on first use) and check its fingerprint; a fresh
read first passes the read checks (`read_checks`) and starts at chunk 0, a stopped one goes on at its cursor."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Overwrite

from memagent_graph.documents.chunking import ChunkedDocument
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import FingerprintMismatchError
from memagent_graph.nodes.graph_node import GraphNode
from memagent_graph.nodes.questions import ONE_QUESTION, Questions
from memagent_graph.nodes.read_checks import ReadChecks, check_recursion_limit
from memagent_graph.nodes.segments import split_segments
from memagent_graph.state import EMPTY_USAGE


def read_chunk(
    documents: DocumentRegistry,
    tokenizer: Tokenizer,
    *,
    chunk_tokens: int,
    checks: ReadChecks,
    questions: Questions = ONE_QUESTION,
    segments: int = 1,
) -> GraphNode:
    """Build the node that starts a read, or continues a stopped one after checking it is the same document;
    with ``segments`` > 1 a fresh read is split into that many parallel segments (`nodes.segments`)."""

    def sync(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        if _fresh(state):
            checks.check_questions(questions.questions(state))
        doc = documents.chunked(state["doc_id"], tokenizer, chunk_tokens)
        return _open(state, doc, questions, config, segments)

    async def async_(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        if _fresh(state):  # tokenizer work may be blocking I/O (a server's /tokenize)
            await asyncio.to_thread(checks.check_questions, questions.questions(state))
        doc = documents.cached(state["doc_id"], tokenizer, chunk_tokens) or await asyncio.to_thread(
            documents.chunked, state["doc_id"], tokenizer, chunk_tokens
        )
        return _open(state, doc, questions, config, segments)

    return GraphNode(sync, async_, name="read_chunk")


def _fresh(state: Mapping[str, Any]) -> bool:
    """No read yet on this thread, or its last one finished: the input starts a new read."""
    return "cursor" not in state or bool(state.get("finished"))


def _open(
    state: Mapping[str, Any],
    doc: ChunkedDocument,
    questions: Questions,
    config: RunnableConfig,
    segments: int,
) -> dict[str, Any]:
    """A fresh start resets the read (once the run's recursion limit is known to reach the answer); else
    check the document and go on."""
    if _fresh(state):
        check_recursion_limit(doc.num_chunks, config["recursion_limit"], segments=segments)
        split = _split(state, doc.num_chunks, questions, segments) if segments > 1 else {}
        return {
            **split,
            **questions.fresh(state),
            "fingerprint": doc.fingerprint,
            "num_chunks": doc.num_chunks,
            "cursor": 0,
            "finished": False,
            "usage": dict(EMPTY_USAGE),
            "started_at": time.time(),
        }
    check_same_document(state, doc)
    return {}


def _split(state: Mapping[str, Any], num_chunks: int, questions: Questions, segments: int) -> dict[str, Any]:
    """A fresh read's parallel segments, each with empty memories, and its merge not begun."""
    count = len(questions.questions(state))
    empty = questions.memory_state([""] * count, [[] for _ in range(count)])
    return {"segments": Overwrite(split_segments(num_chunks, segments, empty=empty)), "merge_round": 0}


def check_same_document(state: Mapping[str, Any], doc: ChunkedDocument) -> None:
    """Refuse to go on with a read whose document (content, tokenizer or chunk size) is not the one it began."""
    if state.get("fingerprint") != doc.fingerprint:
        raise FingerprintMismatchError(
            "this thread was reading a different document or used other settings "
            f"(fingerprint {state.get('fingerprint')} != {doc.fingerprint}); start a new thread"
        )
