"""Quote memory over a served model: query likelihood from the prompt log-probabilities of an
OpenAI-compatible ``/v1/completions`` endpoint that returns them (vLLM's ``prompt_logprobs``).

Each passage's scoring prompt (`query_likelihood.PROMPT`) and the question travel as token ids, concatenated
here, so no token can merge across the border and the scores are those the embedded engine computes on the
same weights; many passages go in one request (``max_tokens`` 1, ``prompt_logprobs`` 0: the prompt tokens'
own log-probabilities), and a passage's score is the sum over the question's tokens. vLLM does not serve
prompt log-probabilities from its prefix cache, so each request recomputes its prompts in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import httpx
from langchain_openai import ChatOpenAI
from pydantic import ConfigDict

from memagent_graph.errors import ConfigError, ModelError
from memagent_graph.integrations.models.query_likelihood import passage_prompt_ids, question_ids

PASSAGES_PER_REQUEST = 32
"""Scoring prompts sent in one request (the server batches them)."""


class ScoringChatOpenAI(ChatOpenAI):
    """A `ChatOpenAI` that also scores passages (`PassageScorer`) through the server's ``/v1/completions``
    prompt log-probabilities, with ``scoring_tokenizer`` (the served model's: its ``/tokenize`` or a local
    copy) turning text into ids. Build it with ``openai_compatible(..., scores_passages=True)``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    scoring_tokenizer: Any
    passages_per_request: int = PASSAGES_PER_REQUEST
    accepts_quote_from: ClassVar[bool] = True
    """Calls take ``quote_from`` (``quote_answer="copy"``): the reply is constrained to one of its lines by the
    server's structured outputs (vLLM's ``structured_outputs: {"choice": [...]}``; the old ``guided_choice``
    field is ignored by current vLLM, which then answers unconstrained)."""

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """log p(question | passage prompt) for each passage, summed over the question's tokens."""
        encode = self.scoring_tokenizer.encode
        query = question_ids(encode, question)
        return self._tail_sums([(prompt, query) for prompt in passage_prompt_ids(encode, passages)])

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """log p(continuation | prompt) for each continuation, summed over its tokens (the ``extract`` answer's
        candidate spans); the prompt and each continuation travel as token ids, like the passages."""
        encode = self.scoring_tokenizer.encode
        head = encode(prompt)
        return self._tail_sums([(head, encode(c)) for c in continuations])

    def _tail_sums(self, pairs: list[tuple[list[int], list[int]]]) -> list[float]:
        """log p(tail | head) for each (head, tail) of token ids, ``passages_per_request`` sequences a request."""
        scores: list[float] = []
        for start in range(0, len(pairs), self.passages_per_request):
            batch = pairs[start : start + self.passages_per_request]
            choices = self._prompt_logprobs([head + tail for head, tail in batch])
            scores += [_query_sum(choice, len(tail)) for choice, (_, tail) in zip(choices, batch, strict=True)]
        return scores

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        return super()._generate(messages, stop, run_manager, **_constrained(kwargs))

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        return await super()._agenerate(messages, stop, run_manager, **_constrained(kwargs))

    def check_scoring(self) -> None:
        """Score one passage now: a `ConfigError` naming the fix when the server returns no prompt
        log-probabilities (so a quote read is refused before its first chunk)."""
        try:
            self.score_passages("Is it?", ["It is."])
        except (ModelError, KeyError, TypeError, ValueError) as error:
            raise ConfigError(
                f"the server at {self.openai_api_base} does not score prompts ({error}); quote memory needs "
                "prompt log-probabilities on /v1/completions (`prompt_logprobs`, served by vLLM: "
                "`memagent vllm serve`), or use `memory_policy` 'generate'"
            ) from None

    def _prompt_logprobs(self, prompts: list[list[int]]) -> list[dict[str, Any]]:
        key = self.openai_api_key.get_secret_value() if self.openai_api_key else ""
        body = {"model": self.model_name, "prompt": prompts, "max_tokens": 1, "prompt_logprobs": 0, "temperature": 0}
        try:
            response = httpx.post(
                f"{str(self.openai_api_base).rstrip('/')}/completions",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
                timeout=self.request_timeout if isinstance(self.request_timeout, int | float) else 300.0,
            )
        except httpx.HTTPError as error:
            raise ModelError(f"scoring request to {self.openai_api_base} failed: {error}") from error
        if response.status_code != 200:
            raise ModelError(f"/completions answered {response.status_code}: {response.text[:200]}")
        choices = sorted(response.json()["choices"], key=lambda choice: choice["index"])
        if len(choices) != len(prompts):
            raise ModelError(f"/completions answered {len(choices)} choices for {len(prompts)} prompts")
        return [{**choice, "prompt": prompt} for choice, prompt in zip(choices, prompts, strict=True)]


def _constrained(options: dict[str, Any]) -> dict[str, Any]:
    """The call's options with ``quote_from`` turned into a structured-outputs choice among its lines."""
    quote_from = options.pop("quote_from", None)
    if not quote_from:
        return options
    lines = list(dict.fromkeys(line.strip() for line in quote_from.splitlines() if line.strip()))
    extra = {**(options.pop("extra_body", None) or {}), "structured_outputs": {"choice": lines}}
    return {**options, "extra_body": extra}


def _query_sum(choice: dict[str, Any], query_tokens: int) -> float:
    """The sum of the log-probabilities of the prompt's last ``query_tokens`` tokens."""
    entries = choice["prompt_logprobs"]
    prompt = choice["prompt"]
    return sum(
        float(entries[position][str(prompt[position])]["logprob"])
        for position in range(len(prompt) - query_tokens, len(prompt))
    )
