"""Resuming a checkpointed read: whether a thread's saved read is unfinished, what identifies a read (document
by content fingerprint, question, settings), the refusal when the read asked for is another one, and the input
that continues it."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.types import StateSnapshot

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.chunking import ChunkedDocument
from memagent_graph.errors import FingerprintMismatchError
from memagent_graph.nodes.segments import chunks_read
from memagent_graph.state import RunSettings, UnfinishedRead


def settings_key(config: MemAgentConfig, settings: RunSettings | None, models: Iterable[BaseChatModel]) -> str:
    """A digest of everything besides the document and question that shapes a read's result: budgets,
    sampling, prompts, the models (a resumed read must continue with the same ones)."""
    described = {
        "config": config.model_dump(mode="json", exclude={"retries", "chunk_tokens"}),
        "settings": dataclasses.asdict(settings or RunSettings()),
        "models": [_describe_model(model) for model in models],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()[:16]


def is_unfinished(snapshot: StateSnapshot) -> bool:
    """True when the saved state holds a read that has not answered yet."""
    values = snapshot.values
    return bool(snapshot.next) or ("cursor" in values and not values.get("finished"))


def unfinished_read(thread_id: str, snapshot: StateSnapshot) -> UnfinishedRead | None:
    """The unfinished read of one question saved on ``thread_id`` (its state ``snapshot``), or None."""
    if not is_unfinished(snapshot):
        return None
    values = snapshot.values
    return UnfinishedRead(
        thread_id=thread_id,
        question=values["question"],
        fingerprint=values.get("fingerprint", ""),
        settings_key=values.get("settings_key", ""),
        chunks_done=chunks_read(values["cursor"], values.get("segments", [])),
        num_chunks=values["num_chunks"],
    )


def resume_input(
    graph_input: dict[str, Any], snapshot: StateSnapshot | None, thread_id: str, chunked: ChunkedDocument
) -> dict[str, Any] | None:
    """``None`` (continue) when the thread has an unfinished run of the same read, else ``graph_input``.

    Resuming onto another document (by content fingerprint), question or settings is refused.
    """
    if snapshot is None or not is_unfinished(snapshot):
        return graph_input
    refuse_another_read(thread_id, graph_input, snapshot.values, chunked)
    # pending tasks (a crash mid-step, or a stop: the finished chunk's writes are saved with its task)
    # continue from the checkpoint; with none, the input continues at the saved cursor (read_chunk only
    # resets a finished read)
    return None if snapshot.tasks else graph_input


def refuse_another_read(
    thread_id: str, graph_input: dict[str, Any], saved: dict[str, Any], chunked: ChunkedDocument
) -> None:
    """Raise `FingerprintMismatchError` naming what differs between a thread's saved state and the read asked
    for (the document by content fingerprint, the question, the settings)."""
    question_key = "question" if "question" in graph_input else "questions"
    differs = [
        what
        for what, now, before in (
            ("document", chunked.fingerprint, saved.get("fingerprint") or chunked.fingerprint),
            ("question", graph_input[question_key], saved.get(question_key)),
            ("settings", graph_input["settings_key"], saved.get("settings_key")),
        )
        if now != before
    ]
    if differs:
        raise FingerprintMismatchError(
            f"thread {thread_id!r} holds an unfinished read of a different {' and '.join(differs)} "
            f"(chunk {saved.get('cursor', 0)}/{saved.get('num_chunks', '?')}); resume it with the same document, "
            "question and settings, or start over under another `thread_id`"
        )


def _describe_model(model: BaseChatModel) -> dict[str, Any]:
    """What identifies a chat model for resuming: its type and, when it has one, its model name."""
    return {"type": model._llm_type, "name": getattr(model, "model_name", None) or getattr(model, "model", None)}
