"""The RL objectives, pure torch: advantages over episodes, broadcast to calls, clipping, KL, aggregation; and
the trainer's credit per call (`score_calls`: episode advantage plus the call's own overlong penalty)."""

from __future__ import annotations

import math

import pytest
import torch

from memagent_graph.training.rl.algorithms import (
    aggregate,
    broadcast_to_calls,
    dr_grpo_advantages,
    entropy_from_logits,
    get_advantage_estimator,
    grpo_advantages,
    informative_groups,
    kl_k3,
    overlong_penalty,
    policy_loss,
    truncated_importance_weights,
)
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.trainer import score_calls
from memagent_graph.training.rollout.traces import TraceCall

REWARDS = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
GROUPS = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2])


def test_grpo_normalises_by_the_groups_mean_and_unbiased_std():
    advantages = grpo_advantages(REWARDS, GROUPS)
    std = math.sqrt(1 / 3)  # rewards 1,0,0,1: mean 0.5, unbiased variance 1/3
    assert advantages[:4].tolist() == pytest.approx([0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std], rel=1e-5)


def test_zero_variance_groups_get_zero_advantage_and_are_dropped_by_dynamic_sampling():
    assert grpo_advantages(REWARDS, GROUPS)[4:].tolist() == [0.0] * 4
    assert informative_groups(REWARDS, GROUPS).tolist() == [True] * 4 + [False] * 4


def test_dr_grpo_does_not_divide_by_the_std():
    assert dr_grpo_advantages(REWARDS, GROUPS)[:4].tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5])


def test_a_group_of_one_has_no_baseline():
    assert grpo_advantages(torch.tensor([1.0]), torch.tensor([7])).tolist() == [0.0]


def test_every_call_of_an_episode_gets_its_episodes_advantage():
    episode_advantages = torch.tensor([0.5, -0.5, 2.0])
    call_episode = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])  # episodes of 3, 2 and 4 calls
    calls = broadcast_to_calls(episode_advantages, call_episode)
    assert calls.tolist() == [0.5] * 3 + [-0.5] * 2 + [2.0] * 4


def test_estimators_are_looked_up_by_name():
    assert get_advantage_estimator("dr_grpo") is dr_grpo_advantages


def _batch(seed=0, rows=6, width=9):
    generator = torch.Generator().manual_seed(seed)
    logprobs = -torch.rand(rows, width, generator=generator)
    old = logprobs + 0.3 * (torch.rand(rows, width, generator=generator) - 0.5)
    lengths = torch.tensor([9, 3, 7, 1, 5, 8])[:rows]
    mask = (torch.arange(width)[None, :] < lengths[:, None]).float()
    advantages = torch.randn(rows, generator=generator)
    return logprobs, old, advantages, mask


def test_the_loss_does_not_change_with_the_micro_batch_split():
    logprobs, old, advantages, mask = _batch()
    total = mask.sum().item()
    whole = policy_loss(logprobs, old, advantages, mask, denominator=total).loss
    for split in ([1, 5], [2, 2, 2], [3, 3], [1, 1, 1, 1, 1, 1]):
        parts = torch.split(torch.arange(6), split)
        summed = sum(policy_loss(logprobs[i], old[i], advantages[i], mask[i], denominator=total).loss for i in parts)
        assert summed.item() == pytest.approx(whole.item(), rel=1e-6)


def test_padding_does_not_count_and_every_response_token_does():
    logprobs, old, advantages, mask = _batch()
    garbage = logprobs.masked_fill(mask == 0, 123.0)  # whatever sits in padding positions
    assert policy_loss(garbage, old, advantages, mask).loss.item() == pytest.approx(
        policy_loss(logprobs, old, advantages, mask).loss.item()
    )
    shorter = mask.clone()
    shorter[0, 8] = 0  # drop one real token (e.g. the EOS): the loss must change
    assert policy_loss(logprobs, old, advantages, shorter).loss.item() != pytest.approx(
        policy_loss(logprobs, old, advantages, mask).loss.item()
    )


def test_clip_higher_uses_separate_low_and_high_ranges():
    old = torch.zeros(1, 2)
    mask = torch.ones(1, 2)
    up = torch.log(torch.tensor([[1.5, 1.5]]))  # ratio 1.5
    down = torch.log(torch.tensor([[0.5, 0.5]]))  # ratio 0.5
    positive, negative = torch.tensor([1.0]), torch.tensor([-1.0])
    assert policy_loss(up, old, positive, mask, clip_low=0.2, clip_high=0.28).loss.item() == pytest.approx(-1.28)
    assert policy_loss(down, old, negative, mask, clip_low=0.2, clip_high=0.28).loss.item() == pytest.approx(0.8)
    assert policy_loss(up, old, positive, mask).clip_fraction == 1.0


def test_k3_kl_is_zero_for_equal_policies_and_positive_otherwise():
    logprobs = torch.log(torch.tensor([0.2, 0.5, 0.9]))
    assert kl_k3(logprobs, logprobs).abs().max().item() == 0.0
    assert (kl_k3(logprobs, logprobs - 0.3) > 0).all()


def test_kl_adds_to_the_loss_with_its_coefficient():
    logprobs, old, advantages, mask = _batch()
    ref = logprobs - 0.2
    base = policy_loss(logprobs, old, advantages, mask).loss
    with_kl = policy_loss(logprobs, old, advantages, mask, ref_logprobs=ref, kl_coef=0.5)
    assert with_kl.loss.item() == pytest.approx(base.item() + 0.5 * with_kl.kl, rel=1e-5)


def test_entropy_of_uniform_logits_is_log_vocab():
    assert entropy_from_logits(torch.zeros(2, 3, 50)).flatten().tolist() == pytest.approx([math.log(50)] * 6)


def test_truncated_importance_weights_are_capped_and_carry_no_gradient():
    learner = torch.tensor([0.0, 0.0], requires_grad=True)
    weights = truncated_importance_weights(learner, torch.tensor([0.0, -5.0]), cap=2.0)
    assert weights.tolist() == pytest.approx([1.0, 2.0]) and not weights.requires_grad


def test_overlong_penalty_falls_linearly_in_the_buffer():
    penalty = overlong_penalty(torch.tensor([50, 80, 90, 100]), max_tokens=100, buffer_tokens=20)
    assert penalty.tolist() == pytest.approx([0.0, 0.0, -0.5, -1.0])


def test_overlong_penalty_takes_one_limit_per_response():
    penalty = overlong_penalty(torch.tensor([14, 7]), max_tokens=torch.tensor([16, 8]), buffer_tokens=4)
    assert penalty.tolist() == pytest.approx([-0.5, -0.75])


def _call(episode: int, node: str, length: int, limit: int | None) -> TraceCall:
    """A recorded call of ``length`` response tokens sampled with the token limit ``limit``."""
    return TraceCall(
        episode_id=f"e{episode}", group_id="q", call_index=int(node == "final_answer"), node=node, prompt_ids=[1],
        response_ids=[2] * length, logprobs=[-1.0] * length, finish_reason="stop", max_tokens=limit,
        policy_version=0, latency_s=0.0, text="",
    )  # fmt: skip


SCORING = {"group_size": 2, "questions_per_step": 1, "memory_tokens": 16, "answer_tokens": 8}


def test_a_call_that_runs_into_the_overlong_buffer_is_trained_with_its_own_penalty():
    # one question read twice (rewards 1 and 0), each episode a memory update (limit 16) and an answer (limit 8)
    traces = [
        [_call(0, "update_memory", 16, 16), _call(0, "final_answer", 3, 8)],
        [_call(1, "update_memory", 4, 16), _call(1, "final_answer", 7, 8)],
    ]
    rewards = torch.tensor([1.0, 0.0])
    plain = score_calls(traces, rewards, RLConfig(**SCORING))
    assert plain.advantages == [0.5, 0.5, -0.5, -0.5] and plain.overlong_penalty == 0.0
    shaped = score_calls(traces, rewards, RLConfig(**SCORING, overlong_buffer=4))
    # the update that reached its limit loses 1, the answer 3 tokens into its 4-token buffer 0.75, the others 0
    assert shaped.advantages == pytest.approx([0.5 - 1.0, 0.5, -0.5, -0.5 - 0.75])
    assert shaped.calls == plain.calls and shaped.overlong_penalty == pytest.approx(-1.75 / 4)


def test_length_alone_keeps_no_group_and_a_call_recorded_without_its_limit_is_not_shaped():
    traces = [[_call(0, "final_answer", 8, 8)], [_call(1, "final_answer", 8, None)]]
    config = RLConfig(**SCORING, overlong_buffer=4, overlong_penalty_factor=0.5)
    dropped = score_calls(traces, torch.tensor([0.0, 0.0]), config)
    assert (dropped.calls, dropped.kept_episodes, dropped.overlong_penalty) == ([], 0, -0.25)
    kept = score_calls(traces, torch.tensor([1.0, 0.0]), config)
    assert kept.kept_episodes == 2 and kept.advantages == pytest.approx([0.5 - 0.5, -0.5])


def test_an_overlong_buffer_must_fit_inside_every_calls_limit():
    with pytest.raises(ValueError, match="overlong_buffer 8 must be smaller than memory_tokens"):
        RLConfig(**SCORING, overlong_buffer=8)


def test_sequence_mean_aggregation_weighs_sequences_equally():
    values, mask = torch.ones(2, 4), torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]])
    assert aggregate(values * torch.tensor([[1.0], [3.0]]), mask, mode="seq-mean-token-mean").item() == 2.0
    assert aggregate(values * torch.tensor([[1.0], [3.0]]), mask, mode="token-mean").item() == pytest.approx(7 / 5)
