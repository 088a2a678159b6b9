"""In-process generation with a Hugging Face causal LM, shared by the embedded engine and the transformers
rollout backend: prompts as token ids, one left-padded ``generate`` per batch, each response cut after its
first EOS, and (when asked) each sampled token's log-probability under the sampling distribution.

Only `generate` imports torch, so `Sampling` and `Generation` also load where torch or LangChain are absent
(vLLM's own environment).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sampling:
    """How one call samples: a token limit, a temperature (0 = greedy) and top-p (top-k is always off)."""

    max_tokens: int
    temperature: float
    top_p: float = 1.0


@dataclass(frozen=True)
class Generation:
    """One response: its token ids (the EOS included when it stopped), their log-probabilities, why it ended."""

    response_ids: list[int]
    logprobs: list[float] | None
    """None unless asked for, and for a teacher's response (it was written, not sampled from the policy)."""
    finish_reason: str


def generate(
    model: Any,
    prompts: Sequence[Sequence[int]],
    sampling: Sampling,
    *,
    pad_id: int,
    eos_ids: Collection[int],
    logits_processors: Sequence[Any] = (),
    logprobs: bool = False,
) -> list[Generation]:
    """One response per prompt from one left-padded ``model.generate`` (the caller seeds torch and holds the
    model's lock). ``logprobs`` adds ``log_softmax(logits / temperature)`` of each token (temperature 1 when
    greedy)."""
    import torch

    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.tensor([[pad_id] * (width - len(p)) + list(p) for p in prompts], device=model.device)
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=model.device)
    greedy = sampling.temperature <= 0
    options: dict[str, Any] = (
        {"do_sample": False}
        # top_k=0 turns off transformers' default top-k 50, as in OpenAI-style servers
        if greedy
        else {"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0}
    )
    if logits_processors:
        options["logits_processor"] = list(logits_processors)
    with torch.inference_mode():
        out = model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            max_new_tokens=sampling.max_tokens,
            pad_token_id=pad_id,
            eos_token_id=sorted(eos_ids),
            output_logits=logprobs,
            return_dict_in_generate=True,
            **options,
        )
    new = out.sequences[:, width:]
    chosen: list[list[float]] | list[None] = [None] * len(prompts)
    if logprobs:
        steps = torch.stack(out.logits, dim=1).float()  # raw logits: (batch, new tokens, vocab)
        scaled = torch.log_softmax(steps / (1.0 if greedy else sampling.temperature), dim=-1)
        chosen = scaled.gather(-1, new[..., None]).squeeze(-1).tolist()
    results = []
    for row, row_logprobs in zip(new.tolist(), chosen, strict=True):
        end = next((i for i, token in enumerate(row) if token in eos_ids), None)
        size = len(row) if end is None else end + 1  # what follows the first EOS is padding
        results.append(
            Generation(
                row[:size],
                None if row_logprobs is None else row_logprobs[:size],
                "length" if end is None else "stop",
            )
        )
    return results
