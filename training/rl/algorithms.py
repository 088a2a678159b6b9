"""RL objectives for the memory policy, as pure torch functions (no Ray, no model, no backend).

MemAgent's recipe ("multi-conversation" GRPO/DAPO): an *episode* is every model call of one read (the memory
updates and the answer). Its reward comes from the final answer; its group advantage (episodes of the same
question) is copied to every call of the episode and every response token of those calls. Losses are
aggregated over tokens of the whole global batch, so how a batch is cut into micro-batches never changes it.
Advantage estimators live in a registry (`ADVANTAGE_ESTIMATORS`), as in verl's ``core_algos.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from memagent_graph.errors import ConfigError
from memagent_graph.registries import registrar

AdvantageFn = Callable[..., torch.Tensor]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {}
KL_CLAMP = 10.0  # verl's clamp of the log-ratio in the k3 estimator


def register_advantage(name: str, *, replace: bool = False) -> Callable[[AdvantageFn], AdvantageFn]:
    """Decorator: add an advantage estimator ``(rewards, group_ids) -> advantages`` (per episode) under ``name``.

    A name taken by another estimator is refused (`ConfigError`) unless ``replace=True`` overrides it on purpose.
    """
    return registrar(
        ADVANTAGE_ESTIMATORS, name, replace=replace, what="an advantage estimator", decorator="register_advantage"
    )


def _group_stats(rewards: torch.Tensor, group_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per episode: its group's mean reward, unbiased std (0 for a group of one) and size."""
    _, inverse, counts = torch.unique(group_ids, return_inverse=True, return_counts=True)
    rewards = rewards.to(torch.float64)
    sums = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, inverse, rewards)
    means = sums / counts
    squares = torch.zeros(len(counts), dtype=torch.float64).index_add_(0, inverse, (rewards - means[inverse]) ** 2)
    stds = torch.where(counts > 1, (squares / (counts - 1).clamp(min=1)).sqrt(), torch.zeros_like(squares))
    return means[inverse], stds[inverse], counts[inverse]


@register_advantage("grpo")
def grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor, *, eps: float = 1e-6) -> torch.Tensor:
    """GRPO: (reward - group mean) / (group std + eps). A group of one has no baseline: advantage 0."""
    mean, std, count = _group_stats(rewards, group_ids)
    advantages = (rewards.to(torch.float64) - mean) / (std + eps)
    return torch.where(count > 1, advantages, torch.zeros_like(advantages)).to(torch.float32)


@register_advantage("dr_grpo")
def dr_grpo_advantages(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """Dr.GRPO / MemAgent: reward - group mean, no division by the std."""
    mean, _, count = _group_stats(rewards, group_ids)
    advantages = rewards.to(torch.float64) - mean
    return torch.where(count > 1, advantages, torch.zeros_like(advantages)).to(torch.float32)


def get_advantage_estimator(name: str) -> AdvantageFn:
    """The estimator registered as ``name``; `ConfigError` lists the known ones."""
    try:
        return ADVANTAGE_ESTIMATORS[name]
    except KeyError:
        raise ConfigError(f"unknown advantage estimator {name!r}; known: {', '.join(ADVANTAGE_ESTIMATORS)}") from None


def informative_groups(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
    """DAPO dynamic sampling: True for episodes whose group's rewards are not all equal (others teach nothing)."""
    _, std, _ = _group_stats(rewards, group_ids)
    return std > 0


def broadcast_to_calls(episode_values: torch.Tensor, call_episode: torch.Tensor) -> torch.Tensor:
    """Give every model call the value of its episode (``call_episode[i]`` = index of call i's episode)."""
    return episode_values[call_episode]


def overlong_penalty(
    response_lengths: torch.Tensor, *, max_tokens: int | torch.Tensor, buffer_tokens: int, factor: float = 1.0
) -> torch.Tensor:
    """DAPO's soft overlong punishment: 0 up to ``max_tokens - buffer_tokens``, then falling linearly to
    ``-factor`` at ``max_tokens`` (added to the reward; ``max_tokens`` may be one limit per response)."""
    expected = max_tokens - buffer_tokens
    over = (response_lengths.to(torch.float32) - expected) / buffer_tokens
    return torch.clamp(-over * factor, max=0.0)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): exp(d) - d - 1 with d = ref - policy (clamped)."""
    delta = torch.clamp(ref_logprobs - logprobs, -KL_CLAMP, KL_CLAMP)
    return torch.exp(delta) - delta - 1


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy of the categorical distribution given by ``logits`` (last dimension)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def truncated_importance_weights(
    learner_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, *, cap: float = 2.0
) -> torch.Tensor:
    """Token-level truncated importance sampling between the rollout engine and the learner (no gradient):
    min(exp(learner - rollout), cap): `policy_loss`'s ``importance_weights`` under
    ``learner.rollout_correction: tis``."""
    return torch.exp(learner_logprobs - rollout_logprobs).clamp(max=cap).detach()


def plackett_luce_logprob(
    gains: torch.Tensor,
    order: Sequence[int],
    *,
    stopped: bool,
    stop_gain: float | None,
    temperature: float,
) -> torch.Tensor:
    """log-probability of drawing ``order`` from ``gains`` (then the stop option when ``stopped``) under the
    quote policy's Plackett-Luce draw at ``temperature`` (`memagent_graph.nodes.quote.choice`): each pick is a
    softmax over the candidates left and the stop option (worth ``stop_gain``; None: no stop option)."""
    values = gains / temperature
    stop = values.new_tensor([] if stop_gain is None else [stop_gain / temperature])
    left = torch.ones(len(gains), dtype=torch.bool, device=gains.device)
    total = values.new_zeros(())
    for index in order:
        total = total + values[index] - torch.logsumexp(torch.cat([values[left], stop]), 0)
        left = left.clone()  # autograd keeps each pick's mask
        left[index] = False
    if stopped:
        total = total + stop[0] - torch.logsumexp(torch.cat([values[left], stop]), 0)
    return total


Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]


def aggregate(
    values: torch.Tensor, mask: torch.Tensor, *, mode: Aggregation = "token-mean", denominator: float | None = None
) -> torch.Tensor:
    """Reduce per-token ``values`` (rows = sequences) to a scalar over ``mask``.

    ``token-mean`` divides the masked sum by ``denominator``: the number of response tokens in the *global*
    batch, so summing micro-batch losses gives the full-batch loss exactly (default: this batch's count).
    The sequence modes divide by ``denominator`` sequences (default: this batch's row count).
    """
    mask = mask.to(values.dtype)
    if mode == "token-mean":
        return (values * mask).sum() / (denominator if denominator is not None else mask.sum().clamp(min=1))
    per_sequence = (values * mask).sum(-1)
    if mode == "seq-mean-token-mean":
        per_sequence = per_sequence / mask.sum(-1).clamp(min=1)
    elif mode != "seq-mean-token-sum":
        raise ConfigError(
            f"unknown loss aggregation {mode!r}; use token-mean, seq-mean-token-mean or seq-mean-token-sum"
        )
    return per_sequence.sum() / (denominator if denominator is not None else values.shape[0])


@dataclass(frozen=True)
class PolicyLoss:
    """The clipped policy-gradient loss of a (micro-)batch and what to log about it: the share of clipped
    tokens, ``approx_kl`` (the token mean of old - new log-probability: k1 KL from the sampling policy to the
    learner's), the k3 ``kl`` to the reference and the token count."""

    loss: torch.Tensor
    clip_fraction: float
    approx_kl: float
    kl: float
    tokens: int


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    importance_weights: torch.Tensor | None = None,
    mode: Aggregation = "token-mean",
    denominator: float | None = None,
) -> PolicyLoss:
    """PPO-clip with separate low/high ranges (DAPO's clip-higher), optional k3 KL to a reference and optional
    rollout importance weights. ``advantages`` is per sequence (broadcast over its tokens) or per token.
    Tensors are (sequences, response tokens); ``mask`` is 1 on response tokens (EOS included), 0 on padding.
    """
    if advantages.dim() == 1:
        advantages = advantages[:, None].expand_as(logprobs)
    log_ratio = torch.clamp(logprobs - old_logprobs, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    per_token = torch.maximum(unclipped, clipped)
    if importance_weights is not None:
        per_token = per_token * importance_weights
    kl_value = 0.0
    if ref_logprobs is not None:
        kl = kl_k3(logprobs, ref_logprobs)
        kl_value = float(aggregate(kl.detach(), mask, mode=mode, denominator=denominator))
        per_token = per_token + kl_coef * kl
    masked = mask.bool()
    tokens = int(masked.sum())
    return PolicyLoss(
        loss=aggregate(per_token, mask, mode=mode, denominator=denominator),
        clip_fraction=float(((clipped > unclipped) & masked).sum()) / max(tokens, 1),
        approx_kl=float((-log_ratio.detach() * mask).sum()) / max(tokens, 1),
        kl=kl_value,
        tokens=tokens,
    )
