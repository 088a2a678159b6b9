"""Which model reads, and which tokenizer counts its budgets: the one rule shared by the CLI, the server and
the examples. An OpenAI-compatible endpoint if one is configured, else the embedded engine."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import (
    ApproximateTokenizer,
    HuggingFaceTokenizer,
    Tokenizer,
    VLLMServerTokenizer,
)
from memagent_graph.integrations.models.openai_endpoint import endpoint_from_env, openai_compatible
from memagent_graph.reading_options import ReadingOptions

EMBEDDED_READING: dict[str, object] = {
    "memory_policy": "quote",
    "quote_answer": "extract",
    "chunk_tokens": 2048,
    "memory_tokens": 256,
    "answer_tokens": 64,
    "temperature": 0.0,
}
"""The reading settings the embedded engine is measured at (README's study): quote memory, the model choosing
the answer's phrase (chosen on the validation book: docs/reading.md), greedy answers."""


def reading_config(
    options: ReadingOptions | None = None, *, base_url: str | None = None, defaults: Mapping[str, Any] | None = None
) -> MemAgentConfig:
    """The `MemAgentConfig` every entry point reads with: the ``options`` given, over the entry point's own
    ``defaults``, over the engine's: `EMBEDDED_READING` when the embedded engine will read (no endpoint
    configured), else MemAgent's reference settings."""
    engine = dict(EMBEDDED_READING) if endpoint_from_env(base_url=base_url) is None else {}
    return (options or ReadingOptions()).config({**engine, **(defaults or {})})


@dataclass(frozen=True)
class ModelChoice:
    """The chat model, its tokenizer, and one line saying what they are (for logs)."""

    model: BaseChatModel
    tokenizer: Tokenizer
    description: str


def choose_model(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    tokenizer: str | None = None,
    adapter_path: str | None = None,
    model_path: str | None = None,
    timeout: float | None = None,
) -> ModelChoice:
    """Arguments first, then ``MEMAGENT_*`` / ``OPENAI_*`` variables (``MEMAGENT_TOKENIZER`` for the tokenizer).

    Tokenizer: the given folder, else the endpoint's ``/tokenize`` (vLLM), else the embedded engine's own,
    else an approximation (it warns once).
    """
    folder = tokenizer or os.environ.get("MEMAGENT_TOKENIZER")
    counted: Tokenizer | None = HuggingFaceTokenizer(folder) if folder else None
    endpoint = endpoint_from_env(base_url=base_url, model=model, api_key=api_key)
    if endpoint is None:
        from memagent_graph.integrations.models.embedded_chat import embedded_chat_model

        local = embedded_chat_model(adapter_path=adapter_path, model_path=model_path)
        name = f"the model in {model_path}" if model_path else "embedded SmolLM2-135M-Instruct"
        adapter = f" + adapter {adapter_path}" if adapter_path else ""
        return ModelChoice(local, counted or local.tokenizer(), f"{name} on CPU{adapter}")
    options = {"timeout": timeout} if timeout is not None else {}
    chat = openai_compatible(endpoint.base_url, endpoint.model, endpoint.api_key, tokenizer=counted, **options)
    description = f"{chat.model_name} at {endpoint.base_url} (OpenAI-compatible)"
    if counted is None:
        served = VLLMServerTokenizer(endpoint.base_url, chat.model_name, api_key=endpoint.api_key)
        if served.supported():
            counted, description = served, description + "; tokenizer: the server's /tokenize"
        else:
            counted = ApproximateTokenizer()
    return ModelChoice(chat, counted, description)
