"""The GPU memory plan: bytes per parameter by what holds them, vLLM's share when colocated, a clear error
when the peak exceeds the GPU, parameters counted without loading the policy."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memagent_graph.errors import ConfigError
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.memory_plan import check_fits, memory_plan, policy_parameters

pytestmark = pytest.mark.unit

COLOCATED = {"colocate": True, "rollout": {"backend": "vllm", "engine_options": {"gpu_memory_utilization": 0.5}}}


def test_a_full_weight_run_keeps_weights_gradients_adam_reference_and_rollout_copies():
    config = RLConfig(rollout_workers=2, learner={"kl_coef": 0.1})
    plan = memory_plan(config, parameters=1000, trainable=1000)
    assert (plan.weights, plan.gradients, plan.optimizer, plan.reference, plan.rollouts) == (
        4000,
        4000,
        8000,
        4000,
        8000,
    )
    assert plan.peak == 28_000


def test_lora_and_fsdp_shrink_what_each_gpu_holds():
    lora = memory_plan(RLConfig(), parameters=1000, trainable=10)
    assert (lora.gradients, lora.optimizer) == (40, 80)
    sharded = memory_plan(RLConfig(learner={"strategy": "fsdp", "workers": 4}), parameters=1000, trainable=1000)
    assert (sharded.weights, sharded.optimizer) == (1000, 2000)


def test_colocated_vllm_takes_its_share_while_rolling_out_and_none_while_the_learner_steps():
    config = RLConfig.model_validate(COLOCATED)
    plan = check_fits(memory_plan(config, parameters=1000, trainable=1000), config, gpu_bytes=100_000)
    assert plan.vllm == 50_000
    assert plan.peak == max(12_000 + 50_000, 12_000 + 4_000)
    assert "vLLM sleeps while the learner steps" in plan.lines()[0]


def test_a_run_that_cannot_fit_its_gpu_is_refused_with_what_to_change():
    config = RLConfig.model_validate(COLOCATED)
    with pytest.raises(ConfigError, match=r"does not fit its GPU: peak .* GiB.*`lora:`.*gpu_memory_utilization"):
        check_fits(memory_plan(config, parameters=2**30, trainable=2**30), config, gpu_bytes=8 * 2**30)


def test_colocation_needs_the_vllm_backend_and_a_single_learner():
    with pytest.raises(ValidationError, match="needs rollout.backend: vllm and learner.strategy: single"):
        RLConfig(colocate=True)


def test_parameters_are_counted_without_loading_the_policy(tmp_path):
    from memagent_graph.training.rl.tiny_policy import build_tiny_policy
    from memagent_graph.training.rollout.weights import load_policy, with_lora

    folder = build_tiny_policy(tmp_path / "policy", hidden_size=32)
    model = load_policy(folder)
    assert policy_parameters(folder) == (sum(p.numel() for p in model.parameters()),) * 2
    lora = {"rank": 2, "alpha": 4, "target_modules": ("q_proj",)}
    adapted = with_lora(model, **lora)
    expected = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    assert policy_parameters(folder, lora=lora)[1] == expected
