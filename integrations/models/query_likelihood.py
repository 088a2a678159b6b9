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


def continuation_log_likelihoods(
    model: Any, prompt: Sequence[int], continuations: Sequence[Sequence[int]], *, batch_rows: int = 64
) -> list[float]:
    """log p(continuation | ``prompt``) for each of ``continuations`` (token ids, none empty), summed over its
    tokens, without gradients.

    The prompt is computed once and its cache shared by every row. Continuations that differ only in their last
    token share a row: a continuation is scored from any row that starts with all but its last token, so the
    spans " A\n", " A B\n" and " A B C\n" cost one row " A B C\n" (the logits after " A" and " A B" give the
    "\n" of the shorter ones). Candidate answer spans are such families.
    """
    import copy

    import torch

    if not prompt:
        raise ConfigError("cannot score continuations of an empty prompt")
    rows, homes = _shared_rows(continuations)
    device = next(model.parameters()).device
    scores = [0.0] * len(continuations)
    with torch.inference_mode():
        head = model(input_ids=torch.tensor([list(prompt)], device=device), use_cache=True)
        first = head.logits[0, -1].float().log_softmax(-1)
        for start in range(0, len(rows), batch_rows):
            batch = rows[start : start + batch_rows]
            ids = torch.zeros((len(batch), max(len(r) for r in batch)), dtype=torch.long)
            for index, row in enumerate(batch):
                ids[index, : len(row)] = torch.tensor(row)  # right padding: causal rows never see it
            cache = copy.deepcopy(head.cache)
            cache.batch_repeat_interleave(len(batch))
            logprobs = model(input_ids=ids.to(device), cache=cache, use_cache=False).logits.float().log_softmax(-1)
            for index, continuation in enumerate(continuations):  # only this batch's rows' log-probs are held
                if start <= homes[index] < start + len(batch):
                    following = [first, *logprobs[homes[index] - start][: len(continuation) - 1]]
                    scores[index] = sum(float(p[token]) for p, token in zip(following, continuation, strict=True))
    return scores


def _shared_rows(continuations: Sequence[Sequence[int]]) -> tuple[list[list[int]], list[int]]:
    """The rows to compute (longest first) and, per continuation, the row whose prefix holds all of it but its
    last token."""
    if any(not c for c in continuations):
        raise ConfigError("cannot score an empty continuation")
    rows: list[list[int]] = []
    prefixes: dict[tuple[int, ...], int] = {}
    homes = [0] * len(continuations)
    for index in sorted(range(len(continuations)), key=lambda i: -len(continuations[i])):
        wanted = tuple(continuations[index][:-1])
        if wanted not in prefixes:
            row = list(continuations[index])
            rows.append(row)
            prefixes.update(
                (tuple(row[:end]), len(rows) - 1) for end in range(len(row)) if tuple(row[:end]) not in prefixes
            )
        homes[index] = prefixes[wanted]
    return rows, homes


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
