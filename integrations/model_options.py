"""`ModelOptions`: the model a user named, as given (an endpoint, or the embedded engine's adapter and folder).

One record for every front end that takes ``--base-url/--model/--api-key/--tokenizer/--adapter/--model-dir``
(``memagent ask|demo|eval|batch``, and the Ray batch workers through `BatchSettings`): built once from the
parsed options, turned into a model by `memagent_graph.integrations.model_choice.choose_model` in one place.
Light on purpose (no LangChain until `ModelOptions.choose`): the CLI builds it before it checks its inputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from memagent_graph.integrations.model_choice import ModelChoice


@dataclass(frozen=True)
class ModelOptions:
    """Which model reads; None means not given (`choose_model`'s rule then looks at the environment)."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    tokenizer: str | None = None
    adapter: str | None = None
    """A LoRA adapter folder for the embedded engine."""
    model_dir: str | None = None
    """A local Hugging Face model folder for the embedded engine."""

    @classmethod
    def from_cli_args(cls, args: object) -> Self:
        """The model options an ``argparse`` namespace holds (attributes named like the fields; missing: unset)."""
        return cls(**{option.name: getattr(args, option.name, None) for option in fields(ModelOptions)})

    def with_env(self) -> Self:
        """These options completed from ``MEMAGENT_*`` / ``OPENAI_*`` here, for a process whose environment
        lacks them (a Ray cluster's workers); without an endpoint, the endpoint fields are dropped."""
        from memagent_graph.integrations.models.openai_endpoint import endpoint_from_env

        tokenizer = self.tokenizer or os.environ.get("MEMAGENT_TOKENIZER")
        endpoint = endpoint_from_env(base_url=self.base_url, model=self.model, api_key=self.api_key)
        if endpoint is None:
            return replace(self, base_url=None, model=None, api_key=None, tokenizer=tokenizer)
        return replace(
            self, base_url=endpoint.base_url, model=endpoint.model, api_key=endpoint.api_key, tokenizer=tokenizer
        )

    def choose(self, *, timeout: float | None = None) -> ModelChoice:
        """The chat model and tokenizer these options name (`choose_model`); ``timeout``: seconds per reply."""
        from memagent_graph.integrations.model_choice import choose_model

        return choose_model(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            tokenizer=self.tokenizer,
            adapter_path=self.adapter,
            model_path=self.model_dir,
            timeout=timeout,
        )
