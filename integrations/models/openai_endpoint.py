"""Chat models for any OpenAI-compatible endpoint (vLLM, OpenAI, llama.cpp server, ...), built on langchain-openai.

Retries live in one layer only, the graph's (`memagent_graph.nodes.retry`, set by ``MemAgentConfig.retries``):
the client's own retries are off by default, so a failing call reaches the server at most ``max_attempts`` times.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import httpx
import openai
from langchain_core.outputs import ChatResult
from langchain_core.rate_limiters import InMemoryRateLimiter
from langchain_openai import ChatOpenAI

from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.errors import ConfigError, translate_model_error
from memagent_graph.integrations.models.served_scoring import ScoringChatOpenAI

ENV_PREFIXES = ("MEMAGENT", "OPENAI")
NO_KEY = "EMPTY"  # vLLM's convention when the server needs no key


@dataclass(frozen=True)
class Endpoint:
    """Where the model is served and under which name."""

    base_url: str
    model: str | None
    api_key: str | None

    def __repr__(self) -> str:  # never show the key
        return f"Endpoint(base_url={self.base_url!r}, model={self.model!r}, api_key={'***' if self.api_key else None})"


def endpoint_from_env(
    *, base_url: str | None = None, model: str | None = None, api_key: str | None = None
) -> Endpoint | None:
    """Arguments first, then ``MEMAGENT_BASE_URL/_MODEL/_API_KEY``, then ``OPENAI_*``; None if no base URL."""

    def pick(explicit: str | None, suffix: str) -> str | None:
        if explicit:
            return explicit
        return next((v for p in ENV_PREFIXES if (v := os.environ.get(f"{p}_{suffix}"))), None)

    url = pick(base_url, "BASE_URL")
    if not url:
        return None
    return Endpoint(base_url=url, model=pick(model, "MODEL"), api_key=pick(api_key, "API_KEY"))


def served_model(base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> str:
    """The only model a server lists at ``/v1/models`` (for when ``--model`` is not given)."""
    client = openai.OpenAI(base_url=base_url, api_key=api_key or NO_KEY, timeout=timeout, max_retries=0)
    try:
        names = [m.id for m in client.models.list()]
    except Exception as exc:
        raise (translate_model_error(exc, endpoint=base_url) or exc) from exc
    if len(names) != 1:
        raise ConfigError(
            f"{base_url} serves {len(names)} models ({', '.join(names[:5]) or 'none'}); choose one with `model`"
        )
    return names[0]


class TokenIdsChatOpenAI(ChatOpenAI):
    """`ChatOpenAI` that keeps the token ids vLLM returns (``extra_body={"return_token_ids": True}``).

    langchain-openai drops response fields it does not know, so this copies the choice's ``token_ids`` and the
    response's ``prompt_token_ids`` into each message's ``response_metadata`` (absent when the server sends none).
    """

    def _create_chat_result(self, response: Any, generation_info: dict[str, Any] | None = None) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        data = response if isinstance(response, dict) else response.model_dump()
        for generation, choice in zip(result.generations, data.get("choices") or [], strict=False):
            ids = {"token_ids": choice.get("token_ids"), "prompt_token_ids": data.get("prompt_token_ids")}
            generation.generation_info = {**(generation.generation_info or {}), **ids}
        return result


def openai_compatible(
    base_url: str,
    model: str | None = None,
    api_key: str | None = None,
    *,
    tokenizer: Tokenizer | None = None,
    max_retries: int = 0,
    timeout: float = 300.0,
    max_concurrency: int | None = None,
    requests_per_second: float | None = None,
    token_ids: bool = False,
    scores_passages: bool = False,
    **options: object,
) -> ChatOpenAI:
    """A `ChatOpenAI` for an OpenAI-compatible server; ``model`` defaults to the server's only model.

    The client does not retry (``max_retries=0``): the graph does, in one place. Raise ``max_retries`` only
    for calls made outside a MemAgent graph. The graph's token limits are sent per call
    (``max_completion_tokens``); pass the served model's ``tokenizer`` so LangChain's token counting needs
    no tiktoken download. ``max_concurrency`` caps the requests in flight (per client, sync and async);
    ``requests_per_second`` paces them (LangChain's `InMemoryRateLimiter`). ``token_ids=True`` asks a vLLM
    server for token ids and logprobs and keeps them in each reply's ``response_metadata`` (``token_ids``,
    ``prompt_token_ids``, ``logprobs``). ``scores_passages=True`` makes it a passage scorer for quote memory
    (`ScoringChatOpenAI`: prompt log-probabilities from a vLLM server, with ``tokenizer``), checked with one
    scoring request now.
    """
    if scores_passages and (tokenizer is None or token_ids):
        raise ConfigError(
            "scores_passages=True needs the served model's tokenizer (tokenizer=) and cannot be combined "
            "with token_ids=True"
        )
    model = model or served_model(base_url, api_key=api_key)
    extra: dict[str, object] = {"custom_get_token_ids": tokenizer.encode} if tokenizer is not None else {}
    if max_concurrency is not None:
        limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency)
        extra["http_client"] = httpx.Client(limits=limits, timeout=timeout)
        extra["http_async_client"] = httpx.AsyncClient(limits=limits, timeout=timeout)
    if requests_per_second is not None:
        extra["rate_limiter"] = InMemoryRateLimiter(requests_per_second=requests_per_second, check_every_n_seconds=0.01)
    if token_ids:
        extra_body = {**dict(options.get("extra_body") or {}), "return_token_ids": True}  # type: ignore[call-overload]
        options = {**options, "logprobs": True, "extra_body": extra_body}
    if scores_passages:
        extra["scoring_tokenizer"] = tokenizer
    chat_class = ScoringChatOpenAI if scores_passages else TokenIdsChatOpenAI if token_ids else ChatOpenAI
    chat = chat_class(
        base_url=base_url,
        model=model,
        api_key=api_key or NO_KEY,
        max_retries=max_retries,
        timeout=timeout,
        **extra,
        **options,
    )
    if isinstance(chat, ScoringChatOpenAI):
        chat.check_scoring()
    return chat


def chat_model_from_env(*, tokenizer: Tokenizer | None = None, **options: object) -> ChatOpenAI:
    """`openai_compatible` configured from ``MEMAGENT_BASE_URL``/``_MODEL``/``_API_KEY`` (or ``OPENAI_*``)."""
    endpoint = endpoint_from_env()
    if endpoint is None:
        raise ConfigError(
            "no endpoint configured: set MEMAGENT_BASE_URL (or OPENAI_BASE_URL), e.g. http://localhost:8000/v1"
        )
    return openai_compatible(endpoint.base_url, endpoint.model, endpoint.api_key, tokenizer=tokenizer, **options)
