"""`MemAgentConfig`: the reading budget and sampling settings, with MemAgent's reference defaults."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from memagent_graph.errors import ConfigError
from memagent_graph.prompts import PromptSet


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

    @model_validator(mode="after")
    def _memory_fits_in_chunk(self) -> MemAgentConfig:
        if self.memory_tokens >= self.chunk_tokens:
            raise ValueError(
                f"memory_tokens ({self.memory_tokens}) must be smaller than chunk_tokens ({self.chunk_tokens}); "
                "raise --chunk-tokens or lower --memory-tokens"
            )
        return self

    @classmethod
    def build(cls, **settings: object) -> MemAgentConfig:
        """Like the constructor, but raises `ConfigError` with one readable line per problem."""
        try:
            return cls(**{k: v for k, v in settings.items() if v is not None})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg'].removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            raise ConfigError(f"invalid settings: {problems}") from None
