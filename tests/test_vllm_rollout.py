"""The vLLM rollout backend (`VLLMRollout`) on the CPU build of vLLM, against the learner's transformers model.

vLLM lives in its own environment (`memagent vllm setup`), so the checks run there in one process
(`vllm_rollout_checks.py`: one engine for the plain checks, then a LoRA-enabled one) on a tiny Qwen2 built
here, with this package importable through a tree of links (`package_links`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from memagent_graph.integrations.models.vllm_environment import package_links, vllm_cpu_environment, vllm_python
from memagent_graph.training.rl.tiny_policy import build_tiny_policy

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CHECKS = Path(__file__).with_name("vllm_rollout_checks.py")
LORA = {"rank": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}


@pytest.fixture(scope="module")
def policy(tmp_path_factory) -> Path:
    return build_tiny_policy(tmp_path_factory.mktemp("vllm-rollout") / "policy", seed=0, hidden_size=128)


@pytest.fixture(scope="module")
def lora_inputs(policy, tmp_path_factory):
    """A LoRA policy whose adapters moved (lora_B random): the learner's model, its adapters' file, and a request
    (the LoRA settings and two chat prompts) for a LoRA-enabled vLLM engine."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from memagent_graph.training.rollout.weights import trainable_weights, with_lora

    folder = tmp_path_factory.mktemp("vllm-lora")
    torch.manual_seed(1)
    model = with_lora(AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32), **LORA)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.5)
    save_file(trainable_weights(model), str(folder / "adapters.safetensors"))
    tokenizer = AutoTokenizer.from_pretrained(str(policy))
    questions = ("What is the magic number?", "Name a colour of the sea at night.")
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, return_dict=False)
        for q in questions
    ]
    (folder / "request.json").write_text(json.dumps({"lora": LORA, "prompts": prompts}))
    return model.eval(), prompts, [folder / "adapters.safetensors", folder / "request.json"]


@pytest.fixture(scope="module")
def checks(policy, lora_inputs, tmp_path_factory) -> dict:
    """Both check scripts in one process of vLLM's environment: the plain engine's checks, then the LoRA one's."""
    links = package_links(tmp_path_factory.mktemp("site"))
    env = {**vllm_cpu_environment(engine_in_process=True), "PYTHONPATH": str(links)}
    command = [str(vllm_python()), str(CHECKS), str(policy), *map(str, lora_inputs[2])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def test_sampled_logprobs_are_the_learners_at_the_same_temperature(checks):
    assert checks["sampled_logprob_gap"] < 1e-3


def test_a_stopped_response_ends_with_eos_and_a_cut_one_is_length(checks):
    assert {"stop", "length"} >= set(checks["finish_reasons"])
    for ids, reason in zip(checks["sampled_ids"], checks["finish_reasons"], strict=True):
        assert (ids[-1] == checks["eos"]) == (reason == "stop")
        assert checks["eos"] not in ids[:-1]


def test_seeded_sampling_repeats_from_the_same_call_count(checks):
    assert checks["repeat_equal"]


def test_greedy_matches_the_learners_model_with_temperature_one_logprobs(checks):
    assert checks["greedy_equal_reference"]
    assert checks["greedy_logprob_gap"] < 1e-3


def test_weight_sync_replaces_the_engines_weights_and_its_cached_prefixes(checks):
    assert checks["synced_greedy_changed"]
    assert checks["synced_greedy_equal_reference"]
    assert checks["synced_logprob_gap"] < 1e-3


def test_passage_scores_from_prompt_log_probs_are_the_learners_query_likelihoods(checks):
    assert checks["score_gap_per_token"] < 0.01  # float32 on both sides, after the weight sync


def test_a_synced_lora_adapter_samples_with_the_learners_log_probs(checks, lora_inputs, policy):
    import torch
    from transformers import AutoModelForCausalLM

    from memagent_graph.training.rl.learner import token_logprobs

    learner, prompts, _ = lora_inputs
    base, result = AutoModelForCausalLM.from_pretrained(str(policy)).eval(), checks["lora"]
    with torch.no_grad():
        for prompt, ids, logprobs in zip(prompts, result["sampled_ids"], result["sampled_logprobs"], strict=True):
            adapted = token_logprobs(learner, prompt, ids, temperature=0.7)
            assert (adapted - torch.tensor(logprobs)).abs().max().item() < 1e-3
            assert (token_logprobs(base, prompt, ids, temperature=0.7) - adapted).abs().max().item() > 0.02
