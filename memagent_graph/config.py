"""`MemAgentConfig`: the reading budget and sampling settings, with MemAgent's reference defaults."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memagent_graph.errors import ConfigError
from memagent_graph.prompts import PromptSet


class RetrySettings(BaseModel):
    """How model calls are retried: the graph's only retry layer (see `memagent_graph.nodes.retry`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(6, ge=1, description="Tries per model call, the first included.")
    initial_backoff_s: float = Field(0.5, ge=0.0, description="Upper bound of the first jittered wait.")
    max_backoff_s: float = Field(30.0, ge=0.0, description="Cap on any jittered wait.")
    max_retry_after_s: float = Field(120.0, ge=0.0, description="Cap on a wait a server asks for (Retry-After).")
    retry_empty: bool = Field(True, description="Retry an empty completion (after the last try it is kept).")


QuoteAnswer = Literal["extract", "span", "line", "copy"]
"""How a quote read answers (`MemAgentConfig.quote_answer`)."""


class MemAgentConfig(BaseModel):
    """How a document is read: chunk and memory budgets in policy tokens, and sampling.

    Defaults are the MemAgent reference settings (5000-token chunks, 1024-token memory, 1024-token answer,
    temperature 0.7 / top-p 0.95).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_tokens: int = Field(5000, gt=0, description="Tokens of document per memory update.")
    memory_tokens: int = Field(1024, gt=0, description="Most tokens the memory may hold (hard cut).")
    answer_tokens: int = Field(1024, gt=0, description="Most tokens of the final answer call.")
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    top_p: float = Field(0.95, gt=0.0, le=1.0)
    prompts: PromptSet = Field(default_factory=PromptSet)
    memory_policy: str = Field(
        "generate",
        description="A registered memory policy (`memagent_graph.nodes.register_memory_policy`). generate: the model "
        "writes its memory (MemAgent). quote: the memory is the sentences that best predict the question, chosen by "
        "the model's likelihood (needs a scoring model: the embedded engine).",
    )
    quote_min_gain: float = Field(
        12.0,
        description="quote: nats by which a sentence must beat an empty passage at predicting the question (when "
        "none does, the best one is kept alone).",
    )
    quote_hop_min_share: float = Field(
        0.4,
        ge=0.0,
        description="quote: share of the surprise of the best note's new names and values that a sentence must "
        "explain to be kept as its second hop (above 1: no second hops).",
    )
    quote_prefilter: int = Field(
        16, ge=0, description="quote: sentences of each chunk a BM25 first stage passes to the model (0: all)."
    )
    quote_temperature: float = Field(
        0.0,
        ge=0.0,
        description="quote: the temperature its choices (what to keep, which note answers) are drawn at; 0 is "
        "greedy (inference); training rollouts sample.",
    )
    quote_answer: QuoteAnswer = Field(
        "span",
        description="quote: the answer is the phrase of the answering note the model scores likeliest (extract), "
        "the phrase the question asks for by rule (span), that note (line), or the line the model copies (copy).",
    )
    evidence_min_score: float = Field(
        75.0,
        ge=0.0,
        le=100.0,
        description="Alignment score (0-100, rapidfuzz partial ratio) a memory span needs to count as read in the "
        "document; spans below it in every source are reported as unsupported.",
    )
    segments: int = Field(
        1,
        ge=1,
        description="Contiguous segments read at once, each with its own memory, then merged by one more pass "
        "(1: MemAgent as published, one chain of calls; docs: Parallel segments).",
    )
    retries: RetrySettings = Field(default_factory=RetrySettings)

    @model_validator(mode="after")
    def _memory_fits_in_chunk(self) -> MemAgentConfig:
        if self.memory_tokens >= self.chunk_tokens:
            raise ValueError(
                f"`memory_tokens` ({self.memory_tokens}) must be smaller than `chunk_tokens` ({self.chunk_tokens}); "
                "raise `chunk_tokens` or lower `memory_tokens`"
            )
        return self

    @classmethod
    def build(cls, **settings: object) -> MemAgentConfig:
        """Like the constructor, but raises `ConfigError` with one readable line per problem."""
        try:
            return cls(**{k: v for k, v in settings.items() if v is not None})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(f'`{p}`' for p in err['loc']) or 'config'}: {err['msg'].removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            raise ConfigError(f"invalid settings: {problems}") from None
