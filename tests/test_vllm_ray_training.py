"""RL with the vLLM rollout backend inside a Ray rollout worker (run from `memagent vllm setup`'s environment)
and the learner on two FSDP ranks: the rollouts see every synced policy, and the run resumes onto one rank."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from memagent_graph.training.rewards import REWARDS, register_reward
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.learner import token_logprobs
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rl.trainer import Trainer

pytestmark = [pytest.mark.vllm, pytest.mark.ray, pytest.mark.slow, pytest.mark.usefixtures("local_ray")]

AGREE = 1e-3  # fp32 vLLM and the fp32 learner on the same weights (their kernels differ in summation order)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0, hidden_size=128)


@pytest.fixture(scope="module")
def parity_reward():
    """A reward that varies with the policy's output (an untrained tiny policy never answers right)."""
    register_reward("test_vllm_parity")(lambda reply, golds: float(len(reply) % 2))
    yield
    del REWARDS["test_vllm_parity"]


VLLM_ROLLOUT = {"backend": "vllm", "engine_options": {"dtype": "float32", "max_model_len": 2048, "enforce_eager": True}}


def _config(policy, folder, *, learner: dict, rollout: dict) -> RLConfig:
    return RLConfig.model_validate(
        {
            "policy": str(policy), "prompts": "tiny", "chunk_tokens": 128, "memory_tokens": 12, "answer_tokens": 8,
            "group_size": 4, "questions_per_step": 2, "ray": True, "rollout_workers": 1, "dynamic_sampling": False,
            "reward": "test_vllm_parity", "save_traces": True, "output_dir": str(folder), "seed": 5,
            "learner": {"lr": 1e-2, "micro_batch_size": 4, "bf16_autocast": False, "param_dtype": "float32", **learner},
            "rollout": rollout,
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def run(policy, parity_reward, tmp_path_factory):
    """Two steps on 2 FSDP ranks with vLLM rollouts, a checkpoint, then one step resumed on a single learner.
    The resumed run samples with transformers: one vLLM engine per test run (the weight sync into vLLM is the
    first run's; the resume restores the learner's shards and the step count, whatever the rollout backend)."""
    folder = tmp_path_factory.mktemp("run")
    trainer = Trainer(_config(policy, folder / "two", learner={"workers": 2, "strategy": "fsdp"}, rollout=VLLM_ROLLOUT))
    try:
        steps = [trainer.step(), trainer.step()]
        trainer.save(folder / "checkpoint")
    finally:
        trainer.close()
    resumed = Trainer(_config(policy, folder / "one", learner={"strategy": "single"}, rollout={}))
    try:
        resumed.restore(folder / "checkpoint")
        steps.append(resumed.step())
    finally:
        resumed.close()
    traces = [json.loads(line) for line in (folder / "two" / "traces.jsonl").read_text().splitlines()]
    return steps, traces


def test_every_step_trains_on_vllm_rollouts_of_the_current_policy(run):
    steps, _ = run
    assert [step["policy_version"] for step in steps] == [1, 2, 3]
    assert all(step["calls_trained"] > 0 for step in steps)
    for step in steps:  # vLLM's log-probs of its samples are the learner's: it held the learner's weights
        assert step["logprob_gap"] < AGREE, step


def test_the_synced_policy_differs_from_the_starting_one(run, policy):
    """The control for the agreement above: after the first update the starting weights give other log-probs."""
    _, traces = run
    base = AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32).eval()
    second_step = [call for call in traces if call["episode_id"].startswith("s1-") and call["response_ids"]]
    with torch.no_grad():
        gaps = [
            (token_logprobs(base, c["prompt_ids"], c["response_ids"], temperature=1.0) - torch.tensor(c["logprobs"]))
            .abs()
            .max()
            .item()
            for c in second_step
        ]
    assert max(gaps) > 20 * AGREE


def test_the_run_resumes_onto_one_rank_at_the_next_step(run):
    steps, _ = run
    assert steps[2]["step"] == 2
