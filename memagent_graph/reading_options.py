"""`ReadingOptions`: the reading settings a user gave, from any front end, and the one rule that turns them
into a `MemAgentConfig`.

Every entry point (``memagent ask|demo|eval|batch``, the LangGraph server, Ray batch workers, the trainer)
collects what its user set into a `ReadingOptions` (None: not set) and calls `ReadingOptions.config` with
its defaults; what was set wins over the defaults, and the defaults over MemAgent's reference settings. The
engine's own defaults (the embedded engine reads with quote memory) are chosen by
`memagent_graph.integrations.model_choice.reading_config`, which knows the engines.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memagent_graph.config import MemAgentConfig, QuoteAnswer, RetrySettings
from memagent_graph.errors import ConfigError
from memagent_graph.prompts import PromptSet

ENV_PREFIX = "MEMAGENT_"
"""A server reads option ``chunk_tokens`` from ``MEMAGENT_CHUNK_TOKENS``, and so on for every field."""


class ReadingOptions(BaseModel):
    """How to read, as given: budgets, sampling, prompts, memory policy and retries; None means not given."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chunk_tokens: int | None = Field(None, description="Tokens of document per memory update.")
    memory_tokens: int | None = Field(None, description="Most tokens the memory may hold.")
    answer_tokens: int | None = Field(None, description="Most tokens of the final answer.")
    temperature: float | None = None
    top_p: float | None = None
    prompts: str | PromptSet | None = Field(
        None, description='A bundled prompt set by name ("default", "section-first", "verbatim") or a PromptSet.'
    )
    memory_policy: str | None = Field(None, description="A registered memory policy: generate, quote, ...")
    quote_min_gain: float | None = None
    quote_hop_min_share: float | None = None
    quote_prefilter: int | None = Field(None, description="Sentences per chunk the quote policy's BM25 stage passes.")
    quote_temperature: float | None = Field(None, description="Temperature of the quote policy's choices (0: greedy).")
    quote_answer: QuoteAnswer | None = None
    segments: int | None = Field(None, description="Parallel segments, merged before the answer (1: none).")
    max_attempts: int | None = Field(None, description="Tries per model call, the first included.")

    @classmethod
    def from_cli_args(cls, args: object) -> ReadingOptions:
        """The options an ``argparse`` namespace holds (attributes named like the fields; missing ones unset)."""
        return cls(**{name: getattr(args, name, None) for name in cls.model_fields})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReadingOptions:
        """The options set in ``MEMAGENT_<FIELD>`` variables (``MEMAGENT_CHUNK_TOKENS``, ``MEMAGENT_PROMPTS``,
        ``MEMAGENT_MEMORY_POLICY``, ...); a value of the wrong type is a `ConfigError` naming the variable."""
        environ = os.environ if environ is None else environ
        values = {name: environ.get(ENV_PREFIX + name.upper(), "").strip() for name in cls.model_fields}
        try:
            return cls(**{name: value for name, value in values.items() if value})
        except ValidationError as error:
            problems = "; ".join(
                f"{ENV_PREFIX}{str(e['loc'][0]).upper()}={values[str(e['loc'][0])]!r} is not valid ({e['msg'].lower()})"
                for e in error.errors()
            )
            raise ConfigError(problems) from None

    def given(self) -> dict[str, Any]:
        """The options that were set, by name."""
        return {name: value for name, value in self if value is not None}

    def config(self, defaults: Mapping[str, Any] | None = None) -> MemAgentConfig:
        """The `MemAgentConfig` of these options over ``defaults`` (over MemAgent's reference settings);
        raises `ConfigError` naming each wrong setting."""
        settings = {**(defaults or {}), **self.given()}
        if isinstance(settings.get("prompts"), str):
            settings["prompts"] = PromptSet.named(settings["prompts"])
        if (attempts := settings.pop("max_attempts", None)) is not None:
            if attempts < 1:
                raise ConfigError(f"`max_attempts` must be at least 1, not {attempts}")
            settings["retries"] = RetrySettings(max_attempts=attempts)
        return MemAgentConfig.build(**settings)
