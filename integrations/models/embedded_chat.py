"""`LocalChatModel`: the embedded engine as a LangChain chat model (SmolLM2 by default, or any local Hugging
Face causal LM folder), with `embedded_chat_model` and `embedded_tokenizer` for the embedded SmolLM2."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, ClassVar, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatResult
from pydantic import Field, PrivateAttr, model_validator

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError, ModelRequestError
from memagent_graph.integrations.models.embedded_engine import Engine, Request
from memagent_graph.integrations.models.embedded_files import MODEL_NAME, ensure_local_model
from memagent_graph.integrations.models.generation import Sampling

_CALL_OPTIONS = frozenset({"max_tokens", "temperature", "top_p", "quote_from"})
_ENGINE_FIELDS = tuple("model_path adapter_path dtype max_batch_size batch_wait_s seed num_threads device".split())
"""The fields of `LocalChatModel` that build its `Engine` (same names); the others are per-call defaults."""


def embedded_chat_model(*, adapter_path: str | None = None, **options: Any) -> LocalChatModel:
    """Return a `LocalChatModel` on the embedded SmolLM2, optionally with a LoRA adapter folder."""
    return LocalChatModel(adapter_path=adapter_path, **options)


def embedded_tokenizer() -> HuggingFaceTokenizer:
    """Return the tokenizer of the embedded SmolLM2 (converting the model first if needed)."""
    return HuggingFaceTokenizer(ensure_local_model(), name=MODEL_NAME)


def _role_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, str]]:
    converted = []
    for message in messages:
        if isinstance(message, SystemMessage):
            role = "system"
        elif isinstance(message, HumanMessage):
            role = "user"
        elif isinstance(message, AIMessage):
            role = "assistant"
        elif isinstance(message, ChatMessage):
            role = message.role
        else:
            raise ModelRequestError(
                f"the local model cannot take a {type(message).__name__}; send system, human or AI messages"
            )
        converted.append({"role": role, "content": str(message.text)})
    return converted


class LocalChatModel(BaseChatModel):
    """SmolLM2 (or any local Hugging Face causal LM folder) served in-process, batching concurrent calls.

    Per-call ``max_tokens``, ``temperature``, ``top_p`` and ``stop`` (e.g. through ``bind``) override the fields.
    """

    model_path: str | None = None
    """A local Hugging Face model folder; None converts and uses the embedded SmolLM2."""
    adapter_path: str | None = None
    """A LoRA adapter folder (``PeftModel.save_pretrained``), merged into the weights at load."""
    dtype: Literal["auto", "bfloat16", "float32", "float16"] = "auto"
    """Weight dtype. ``auto``: bf16 where the CPU computes it natively (AVX512-BF16 or AMX), else fp32
    (measured on an AVX2-only CPU: bf16 prefill ran at 50 tok/s, fp32 at 240 tok/s)."""
    max_batch_size: int = Field(default=8, ge=1)
    """The most concurrent requests one ``generate`` call serves."""
    batch_wait_s: float = Field(default=0.01, ge=0)
    """How long the worker waits for more requests before it starts a batch."""
    max_tokens: int = Field(default=512, ge=1)
    temperature: float = Field(default=0.0, ge=0)
    """0 decodes greedily."""
    top_p: float = Field(default=1.0, gt=0, le=1)
    seed: int | None = 0
    """Seeds every ``generate``'s sampling so sampled runs repeat, leaving torch's own generator as it was
    (`seeded_sampling`); None samples from torch's generator."""
    num_threads: int | None = Field(default=None, ge=1)
    """torch intra-op threads (process-wide); None keeps torch's default."""
    device: Literal["auto", "cpu", "cuda"] = "cpu"
    """Where the model computes: cpu, cuda, or auto (cuda where torch sees a GPU); ``dtype: auto`` follows it."""

    _engine: Engine = PrivateAttr()

    @model_validator(mode="after")
    def _create_memagent_engine(self) -> LocalChatModel:
        self._engine = Engine(**{name: getattr(self, name) for name in _ENGINE_FIELDS})
        return self

    @property
    def _llm_type(self) -> str:
        return "memagent-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_name": self._engine.name,
            "dtype": self.dtype,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
        }

    @property
    def generate_calls(self) -> int:
        """How many batched ``generate`` calls this model has run (concurrent requests share one)."""
        return self._engine.generate_calls

    def load(self) -> None:
        """Load the weights now (converting the embedded model first if needed); otherwise the first call does."""
        self._engine.load()

    def tokenizer(self) -> HuggingFaceTokenizer:
        """Return this model's tokenizer, to count chunk and memory budgets in its tokens."""
        return self._engine.tokenizer()

    accepts_quote_from: ClassVar[bool] = True
    """Calls take ``quote_from``: the reply copies one whole line of it (the quote policy's answers)."""

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """How well each passage predicts ``question``: log p(question | passage), summed over its tokens.

        The quote memory policy (`memagent_graph.nodes.quote.memory`) keeps the sentences that score best.
        """
        return self._engine.score_passages(question, passages)

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """How likely each continuation is after ``prompt``: log p(continuation | prompt), summed over its tokens.

        The quote policy's ``extract`` answer scores the candidate spans of its answering note so.
        """
        return self._engine.score_continuations(prompt, continuations)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._submit(messages, stop, kwargs).result()

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        return await asyncio.wrap_future(self._submit(messages, stop, kwargs))

    def _submit(
        self, messages: list[BaseMessage], stop: list[str] | None, options: dict[str, Any]
    ) -> Future[ChatResult]:
        unknown = sorted(set(options) - _CALL_OPTIONS)
        if unknown:
            raise ConfigError(
                f"the local model does not support {', '.join(unknown)}; per-call options are "
                f"{', '.join(sorted(_CALL_OPTIONS))} and stop"
            )
        sampling = Sampling(
            max_tokens=options.get("max_tokens", self.max_tokens),
            temperature=float(options.get("temperature", self.temperature)),
            top_p=float(options.get("top_p", self.top_p)),
        )
        quote_from = options.get("quote_from") or None
        if not (isinstance(sampling.max_tokens, int) and sampling.max_tokens >= 1):
            raise ConfigError(f"max_tokens must be a positive integer, got {sampling.max_tokens!r}")
        if quote_from is not None and not quote_from.strip():
            raise ConfigError("quote_from has no line to copy; pass the text the reply must quote, or leave it out")
        if sampling.temperature < 0 or not 0 < sampling.top_p <= 1:
            raise ConfigError(
                f"temperature must be >= 0 and top_p in (0, 1], got {sampling.temperature} and {sampling.top_p}"
            )
        return self._engine.submit(Request(_role_dicts(messages), sampling, tuple(stop or ()), quote_from))
