"""One exception hierarchy for the whole project; every message says what to do next.

Errors a caller causes are also `ValueError`s and model failures `RuntimeError`s, so servers that pass
only those on (the LangGraph API server does) show our message instead of "internal error".
"""

from __future__ import annotations

import re

_SETTING = re.compile(r"`(\w+)`")


class MemAgentError(Exception):
    """Base class of every error this library raises on purpose.

    A message names the settings it is about by their Python names in backticks (`chunk_tokens`); they are
    ``settings``, so a front end that spells them otherwise (the CLI's ``--chunk-tokens``) can rename them.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.settings: tuple[str, ...] = tuple(dict.fromkeys(_SETTING.findall(message)))


class ConfigError(MemAgentError, ValueError):
    """A setting is invalid (e.g. the memory budget does not fit in a chunk)."""


class PromptTemplateError(ConfigError):
    """A prompt template is missing a placeholder or uses an unknown one."""


class TokenizerError(MemAgentError, ValueError):
    """A tokenizer could not be loaded or failed to encode/decode."""


class DocumentError(MemAgentError, ValueError):
    """A document cannot be read as text."""


class DocumentNotFoundError(DocumentError, FileNotFoundError):
    """The document path or registry id does not exist."""


class DocumentIsDirectoryError(DocumentError, IsADirectoryError):
    """A directory was given where a text file is expected."""


class DocumentAccessError(DocumentError, PermissionError):
    """A caller named a path outside the folder it may read."""


class DocumentPermissionError(DocumentError, PermissionError):
    """The document exists but cannot be read."""


class BinaryDocumentError(DocumentError):
    """The document looks like a binary file, not text."""


class DocumentEncodingError(DocumentError):
    """The document is not valid UTF-8 text."""


class EmptyDocumentError(DocumentError):
    """The document holds no text (empty or whitespace only)."""


class DocumentChangedError(DocumentError):
    """The document changed on disk (or in memory) after it was chunked."""


class FingerprintMismatchError(DocumentError):
    """A checkpointed run is being resumed with a different document or settings."""


class QuestionTooLongError(ConfigError):
    """The question alone is longer than a chunk: no room would be left to read the document."""


class ReadStopped(MemAgentError):
    """A read stopped on request (``stop`` event, SIGTERM or Ctrl-C in the CLI) after a completed chunk."""

    def __init__(self, thread_id: str, *, chunks_done: int, num_chunks: int) -> None:
        super().__init__(f"stopped after chunk {chunks_done}/{num_chunks} of thread {thread_id!r}")
        self.thread_id, self.chunks_done, self.num_chunks = thread_id, chunks_done, num_chunks


class EmptyQuestionError(MemAgentError, ValueError):
    """The question is empty."""


class ModelError(MemAgentError, RuntimeError):
    """The chat model or its endpoint failed."""


class EndpointUnreachableError(ModelError):
    """The model endpoint could not be reached (connection refused, DNS, timeout)."""


class ModelAuthenticationError(ModelError):
    """The endpoint rejected the API key (HTTP 401/403)."""


class ModelNotFoundError(ModelError):
    """The endpoint does not serve the requested model (HTTP 404)."""


class ModelRequestError(ModelError):
    """The endpoint refused the request itself (HTTP 400, e.g. context too long)."""


class EngineNotInstalledError(MemAgentError, ImportError):
    """An optional engine or its model package is not installed."""


def translate_model_error(exc: BaseException, *, endpoint: str | None = None) -> MemAgentError | None:
    """Map an exception raised by a chat model client to a `ModelError` with an actionable message.

    Returns None when the exception is not a recognised client error (the caller re-raises it unchanged).
    """
    if isinstance(exc, MemAgentError):
        return exc
    import httpx
    import openai

    where = f" at {endpoint}" if endpoint else ""
    status = getattr(exc, "status_code", None)
    detail = _short(exc)
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        return EndpointUnreachableError(
            f"cannot reach the model endpoint{where} ({detail}); check `base_url` and that the server is running"
        )
    if status in (401, 403):
        return ModelAuthenticationError(
            f"the model endpoint{where} rejected the API key (HTTP {status}); set `api_key` or MEMAGENT_API_KEY"
        )
    if status == 404:
        return ModelNotFoundError(
            f"the model endpoint{where} does not serve this model (HTTP 404: {detail}); "
            "check `model` against the server's /v1/models"
        )
    if status is not None and 400 <= status < 500:
        return ModelRequestError(f"the model endpoint{where} refused the request (HTTP {status}: {detail})")
    if status is not None:
        return ModelError(f"the model endpoint{where} failed (HTTP {status}: {detail}); try again later")
    return None


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
