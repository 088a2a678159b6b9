"""The learner: micro-batch invariance, EOS in and padding out of the loss, a step moves the policy, weight sync."""

from __future__ import annotations

import copy
import inspect
import logging

import pytest
import torch

from memagent_graph import precision
from memagent_graph.errors import ConfigError
from memagent_graph.testing import sampled_calls
from memagent_graph.training.rl.learner import Learner, LearnerConfig, TorchLearner, pack, token_logprobs
from memagent_graph.training.rl.learner_group import LearnerGroup
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rollout.backends import TransformersRollout
from memagent_graph.training.rollout.weights import load_trainable_weights, trainable_weights

QUESTIONS = ["What is the magic number?", "Name a colour.", "Who wrote it?", "Where is it?", "Why?"]


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    return TransformersRollout(str(build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0)), seed=3)


@pytest.fixture(scope="module")
def calls(rollout):
    return sampled_calls(rollout, QUESTIONS)


ADVANTAGES = [1.0, -0.5, 0.25, -1.0, 0.5]


def _learner(rollout, **options):
    """A learner in fp32 on every CPU: these tests check exact algebra, not bf16 rounding."""
    model = copy.deepcopy(rollout.model)
    config = LearnerConfig(**{"bf16_autocast": False, **options})
    return TorchLearner(model, config=config, pad_id=rollout.tokenizer.pad_token_id)


def _gradients(learner, calls):
    learner.model.zero_grad(set_to_none=True)
    stats = learner.backward(calls, ADVANTAGES)
    return stats["loss"], torch.cat([p.grad.flatten() for p in learner.model.parameters() if p.grad is not None])


def test_the_loss_and_gradient_do_not_change_with_the_micro_batch_size(rollout, calls):
    loss_1, grad_1 = _gradients(_learner(rollout, micro_batch_size=1), calls)
    for size in (2, 5):  # uneven micro-batches (2 + 2 + 1), then the whole batch in one pass
        loss, grad = _gradients(_learner(rollout, micro_batch_size=size), calls)
        assert loss == pytest.approx(loss_1, rel=1e-5)
        assert torch.allclose(grad, grad_1, atol=1e-6)


def test_eos_counts_in_the_loss_and_padding_does_not(rollout, calls):
    eos = rollout.tokenizer.eos_token_id
    stopped = calls[1].model_copy(
        update={"response_ids": calls[1].response_ids[:3] + [eos], "logprobs": calls[1].logprobs[:3] + [-1.0]}
    )
    batch = [calls[0], stopped, calls[2]]
    packed = pack(batch, pad_id=rollout.tokenizer.pad_token_id)
    assert packed.response_mask.sum().item() == sum(len(c.response_ids) for c in batch)  # no padding counted
    assert packed.response_mask[1, :4].tolist() == [1, 1, 1, 1]  # the EOS position is trained
    assert packed.response_mask[1, 4:].sum().item() == 0
    learner = _learner(rollout)
    without_eos = stopped.model_copy(
        update={"response_ids": stopped.response_ids[:3], "logprobs": stopped.logprobs[:3]}
    )
    assert learner.backward([stopped], [1.0])["loss"] != pytest.approx(learner.backward([without_eos], [1.0])["loss"])


def test_a_step_raises_positive_and_lowers_negative_advantage_responses(rollout, calls):
    learner = _learner(rollout, lr=3e-3, micro_batch_size=2)

    def total(call):
        return token_logprobs(learner.model, call.prompt_ids, call.response_ids, temperature=1.0).sum().item()

    with torch.no_grad():
        before = [total(c) for c in calls]
    for _ in range(3):
        learner.update(calls, ADVANTAGES)
    with torch.no_grad():
        after = [total(c) for c in calls]
    assert after[0] > before[0] and after[3] < before[3]  # advantages +1 and -1


def test_a_kl_coefficient_without_a_reference_model_is_refused(rollout):
    with pytest.raises(ConfigError, match="kl_coef=0.1 needs a reference model"):
        _learner(rollout, kl_coef=0.1)


def test_the_kl_to_the_starting_policy_is_zero_and_grows_once_the_policy_moves(rollout, calls):
    model = copy.deepcopy(rollout.model)
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    learner = TorchLearner(model, config=LearnerConfig(lr=1e-2, kl_coef=0.5), pad_id=0, reference=reference)
    learner.model.zero_grad(set_to_none=True)
    assert learner.backward(calls, ADVANTAGES)["kl"] == pytest.approx(0.0, abs=1e-6)
    learner.update(calls, ADVANTAGES)
    assert learner.backward(calls, ADVANTAGES)["kl"] > 1e-4


def test_rollout_and_learner_weights_are_identical_after_a_sync(rollout, calls):
    learner = _learner(rollout, lr=1e-2)
    learner.update(calls, ADVANTAGES)
    target = TransformersRollout(copy.deepcopy(rollout.model), rollout.tokenizer)
    before = target.model.state_dict()
    assert any(not torch.equal(before[name], tensor) for name, tensor in trainable_weights(learner.model).items())
    load_trainable_weights(target.model, trainable_weights(learner.model))
    for name, tensor in learner.model.state_dict().items():
        assert torch.equal(target.model.state_dict()[name], tensor), name


def test_the_logprob_gap_and_approx_kl_are_zero_on_the_rollouts_own_policy_and_show_a_stale_one(rollout, calls):
    own = _learner(rollout).update(calls, ADVANTAGES)
    assert own["logprob_gap"] < 1e-4 and own["approx_kl"] == pytest.approx(0.0, abs=1e-5)
    stale = [c.model_copy(update={"logprobs": [lp - 0.5 for lp in c.logprobs]}) for c in calls]
    shifted = _learner(rollout).backward(stale, ADVANTAGES)
    assert shifted["logprob_gap"] == pytest.approx(0.5, abs=1e-4)
    assert shifted["approx_kl"] == pytest.approx(-0.5, abs=1e-4)  # token mean of old - new log-probability


@pytest.mark.parametrize("implementation", [TorchLearner, LearnerGroup])
def test_the_single_learner_and_the_group_implement_the_learner_protocol(implementation):
    members = [name for name, value in vars(Learner).items() if callable(value) and not name.startswith("_")]
    assert {"update", "supervised", "weights", "save", "load"} <= set(members)
    for name in members:
        expected = [(p.name, p.kind) for p in inspect.signature(getattr(Learner, name)).parameters.values()]
        actual = [(p.name, p.kind) for p in inspect.signature(getattr(implementation, name)).parameters.values()]
        assert actual == expected, name


def test_a_learner_is_a_learner_and_without_lora_has_no_adapter_to_save(rollout, tmp_path):
    learner = _learner(rollout)
    assert isinstance(learner, Learner)
    with pytest.raises(ConfigError, match="no adapter to save"):
        learner.save_adapter(tmp_path / "adapter")


def test_bf16_autocast_auto_follows_the_cpus_native_bf16(rollout, monkeypatch):
    for native in (True, False):
        monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda native=native: native)
        assert _learner(rollout, bf16_autocast="auto").autocast is native


def test_an_explicit_bf16_autocast_without_native_bf16_warns_once(rollout, monkeypatch, caplog):
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    precision._warn_slow_bf16.cache_clear()
    with caplog.at_level(logging.WARNING, logger="memagent_graph.precision"):
        assert _learner(rollout, bf16_autocast=True).autocast
        _learner(rollout, bf16_autocast=True)
    warnings = [message for message in caplog.messages if "no native bf16" in message]
    assert len(warnings) == 1 and "learner.bf16_autocast" in warnings[0] and "set it to auto" in warnings[0]


def test_fsdp_param_dtype_auto_is_bfloat16_only_with_native_bf16(monkeypatch):
    for native, expected in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda native=native: native)
        assert LearnerConfig(strategy="fsdp", workers=2).fsdp_param_dtype() == expected


def _shifted(calls, shift):
    return [c.model_copy(update={"logprobs": [lp + shift for lp in c.logprobs]}) for c in calls]


def test_tis_weighs_each_token_by_its_capped_learner_to_rollout_ratio(rollout, calls):
    _, exact = _gradients(_learner(rollout, rollout_correction="tis"), calls)
    _, mild = _gradients(_learner(rollout, rollout_correction="tis"), _shifted(calls, -0.5))
    _, far = _gradients(_learner(rollout, rollout_correction="tis", tis_cap=2.0), _shifted(calls, -3.0))
    assert torch.allclose(mild, exact * torch.exp(torch.tensor(0.5)), rtol=1e-3, atol=1e-6)
    assert torch.allclose(far, exact * 2.0, rtol=1e-3, atol=1e-6)  # exp(3) is capped at tis_cap


def test_without_tis_a_rollout_that_underrates_its_tokens_clips_the_positive_advantages(rollout, calls):
    positive = [1.0] * len(calls)
    learner = _learner(rollout)
    learner.model.zero_grad(set_to_none=True)
    learner.backward(_shifted(calls, -3.0), positive)  # ratio exp(3) is past 1 + clip_high on every token
    assert all(p.grad is None or not p.grad.any() for p in learner.model.parameters())
    tis = _learner(rollout, rollout_correction="tis")
    tis.model.zero_grad(set_to_none=True)
    tis.backward(_shifted(calls, -3.0), positive)
    assert any(p.grad is not None and p.grad.any() for p in tis.model.parameters())


def test_a_token_budget_packs_calls_longest_first_and_never_pads_past_it(calls):
    from memagent_graph.training.rl.learner import micro_batches

    lengths = [len(c.prompt_ids) + len(c.response_ids) for c in calls]
    budget = 2 * max(lengths)
    batches = micro_batches(calls, config=LearnerConfig(micro_batch_size=8, max_tokens_per_micro_batch=budget))
    assert sorted(i for batch in batches for i in batch) == list(range(len(calls)))
    for batch in batches:
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= budget
        assert [lengths[i] for i in batch] == sorted((lengths[i] for i in batch), reverse=True)


def test_the_gradient_does_not_change_when_a_token_budget_repacks_the_micro_batches(rollout, calls):
    loss_1, grad_1 = _gradients(_learner(rollout, micro_batch_size=1), calls)
    longest = max(len(c.prompt_ids) + len(c.response_ids) for c in calls)
    loss, grad = _gradients(_learner(rollout, micro_batch_size=8, max_tokens_per_micro_batch=2 * longest), calls)
    assert loss == pytest.approx(loss_1, rel=1e-5)
    assert torch.allclose(grad, grad_1, atol=1e-6)
