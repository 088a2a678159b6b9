"""Query likelihood in token ids: log p(question | passage prompt), summed over the question's tokens (UPR,
Sachan et al. 2022), for any Hugging Face causal LM.

One implementation serves the embedded engine's `score_passages` (under ``torch.inference_mode``), the rollout
backends (the same scores while training) and the learner (the same scores with gradients), so the quote
policy's choices are scored identically wherever they are made or learned. torch loads on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from memagent_graph.errors import ConfigError

PROMPT = "Passage: {passage}\nA question that this passage answers: "
"""What the question is scored after (UPR's query likelihood, in plain text)."""
SCORE_BATCH_TOKENS = 4096
"""Tokens per scoring forward pass (padded): bounds activation memory."""

Encode = Callable[[str], list[int]]
"""Text to token ids, no special tokens."""


def question_ids(encode: Encode, question: str) -> list[int]:
    """The tokens scored: ``question``'s; a `ConfigError` when it has none."""
    ids = encode(question)
    if not ids:
        raise ConfigError("cannot score passages against an empty question")
    return ids


def passage_prompt_ids(encode: Encode, passages: Sequence[str]) -> list[list[int]]:
    """Each passage's scoring prompt (`PROMPT`) as token ids: what the question's tokens follow."""
    return [encode(PROMPT.format(passage=passage)) for passage in passages]


def query_log_likelihoods(
    model: Any,
    query: Sequence[int],
    prompts: Sequence[Sequence[int]],
    *,
    pad_id: int,
    batch_tokens: int = SCORE_BATCH_TOKENS,
) -> Any:
    """A float32 tensor of log p(``query`` | prompt), one per prompt, batched by length (left padding, so the
    query ends every row); differentiable unless called under ``torch.no_grad``/``inference_mode``."""
    import torch

    device = next(model.parameters()).device
    sequences = [list(prompt) + list(query) for prompt in prompts]
    target = torch.tensor(list(query), device=device)
    scores: list[Any] = [None] * len(sequences)
    for batch in length_batches(sequences, batch_tokens):
        width = max(len(sequences[i]) for i in batch)
        ids = torch.full((len(batch), width), pad_id)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, i in enumerate(batch):
            ids[row, width - len(sequences[i]) :] = torch.tensor(sequences[i])
            mask[row, width - len(sequences[i]) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        # only the positions that predict the query: the output layer is a fifth of a small model
        logits = model(input_ids=ids, attention_mask=mask, logits_to_keep=len(query) + 1).logits
        predicted = logits[:, :-1].float().log_softmax(dim=-1)
        picked = predicted.gather(-1, target.expand(len(batch), -1).unsqueeze(-1)).squeeze(-1).sum(-1)
        for row, i in enumerate(batch):
            scores[i] = picked[row]
    return torch.stack(scores) if scores else torch.zeros(0, device=device)


def length_batches(sequences: Sequence[Sequence[int]], max_tokens: int) -> Iterator[list[int]]:
    """Indices of ``sequences`` grouped by similar length, each group's padded size at most ``max_tokens``
    (a longer sequence goes alone)."""
    batch: list[int] = []
    for index in sorted(range(len(sequences)), key=lambda i: len(sequences[i])):
        if batch and len(sequences[index]) * (len(batch) + 1) > max_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch
