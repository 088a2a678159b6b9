"""Rollout backends: what generates for the recording policy, from prompt token ids to sampled token ids.

A backend renders the chat template once (`prompt_ids`), samples responses from token ids (`generate`) with the
log-probability of each sampled token under the sampling distribution (``log_softmax(logits / temperature)``,
top-p and top-k off; temperature 1 for greedy calls), and takes the learner's weights (`load_weights`).
`TransformersRollout` is the CPU backend (Ray actors in tests and small runs), which also scores passages for
the quote policy (`score_passages`); `vllm_backend.VLLMRollout` is the GPU one. Both are interchangeable under
`RolloutBackend`: the algorithms never see which one sampled.

This module imports neither torch nor LangChain, so it also loads in vLLM's own environment.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.generation import Generation, Sampling, generate

__all__ = ["ChatTokens", "Generation", "RolloutBackend", "Sampling", "TransformersRollout"]


class RolloutBackend(Protocol):
    """What generates for the recording policy (transformers on CPU; a vLLM engine on GPUs)."""

    policy_version: int
    sampled_calls: int
    """Generate calls so far: sampling is seeded from it, so a checkpoint saves it to continue exactly."""

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """The chat-template token ids of ``messages``, ending with the assistant turn's opening."""
        ...

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling) -> list[Generation]:
        """Sample one response per prompt."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` without special tokens."""
        ...

    def response_ids(self, text: str, max_tokens: int) -> Generation:
        """A teacher's ``text`` as this policy's response tokens (EOS appended; cut at ``max_tokens``)."""
        ...

    def load_weights(self, weights: dict[str, Any]) -> None:
        """Take the learner's trainable weights (Hugging Face parameter names)."""
        ...


class ChatTokens:
    """The tokenizer side shared by every backend: chat template, decoding, a teacher's text as tokens."""

    policy_version = 0
    """A tokens-only backend (a teacher's, which writes its replies) never holds the policy's weights."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # a BatchEncoding or a plain list

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        """``text`` as token ids, without special tokens."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def response_ids(self, text: str, max_tokens: int) -> Generation:
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        if len(ids) > max_tokens:
            return Generation(ids[:max_tokens], None, "length")
        return Generation(ids, None, "stop")


class TransformersRollout(ChatTokens):
    """A Hugging Face causal LM generating in one left-padded batch per call, on CPU by default."""

    def __init__(self, model: Any, tokenizer: Any = None, *, seed: int = 0, device: str = "cpu") -> None:
        from transformers import AutoTokenizer

        from memagent_graph.training.rollout.weights import load_policy

        if isinstance(model, str | Path):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(model), local_files_only=True)
            model = load_policy(model, device=device)
        if tokenizer is None:
            raise ConfigError("TransformersRollout needs the model's tokenizer when given a model object")
        self.model, self.tokenizer = model.to(device).eval(), tokenizer
        self.policy_version = 0
        self._generator_seed = seed
        self.sampled_calls = 0
        self._lock = threading.Lock()  # one generate at a time: torch models are not re-entrant

    def load_weights(self, weights: dict[str, Any]) -> None:
        from memagent_graph.training.rollout.weights import load_trainable_weights

        load_trainable_weights(self.model, weights)

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """log p(question | passage) for each passage (`query_likelihood`): the quote policy's scores."""
        import torch

        from memagent_graph.integrations.models import query_likelihood

        query = query_likelihood.question_ids(self.encode, question)
        prompts = query_likelihood.passage_prompt_ids(self.encode, passages)
        with self._lock, torch.inference_mode():
            scores = query_likelihood.query_log_likelihoods(
                self.model, query, prompts, pad_id=self.tokenizer.pad_token_id
            )
        return [float(score) for score in scores]

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """log p(continuation | prompt) for each continuation (the ``extract`` answer's candidate spans)."""
        from memagent_graph.integrations.models import query_likelihood

        with self._lock:
            return query_likelihood.continuation_log_likelihoods(
                self.model, self.encode(prompt), [self.encode(c) for c in continuations]
            )

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling) -> list[Generation]:
        from memagent_graph.integrations.models.embedded_engine import seeded_sampling

        with self._lock, seeded_sampling(self._generator_seed + self.sampled_calls, self.model.device):
            self.sampled_calls += 1
            return generate(
                self.model,
                prompts,
                sampling,
                pad_id=self.tokenizer.pad_token_id,
                eos_ids={self.tokenizer.eos_token_id},
                logprobs=True,
            )
