"""LoRA on `VLLMRollout`, run inside vLLM's own environment after `vllm_rollout_checks.py` (same process).

REQUEST.json holds the LoRA settings and the prompts (token ids); the adapters are the learner's trainable
weights under peft's names. Samples with the base weights, then again after syncing the adapters.
"""

from __future__ import annotations

import json


def main(policy: str, adapters: str, request: str) -> dict:
    from safetensors.torch import load_file

    from memagent_graph.training.rollout.backends import Sampling
    from memagent_graph.training.rollout.vllm_backend import VLLMRollout

    asked = json.loads(open(request, encoding="utf-8").read())
    rollout = VLLMRollout(policy, seed=5, lora=asked["lora"], dtype="float32", max_model_len=2048, enforce_eager=True)
    base = rollout.generate(asked["prompts"], Sampling(max_tokens=16, temperature=0.0))
    rollout.load_weights(load_file(adapters))
    sampled = rollout.generate(asked["prompts"], Sampling(max_tokens=16, temperature=0.7))
    rollout.close()
    return {
        "base_ids": [g.response_ids for g in base],
        "sampled_ids": [g.response_ids for g in sampled],
        "sampled_logprobs": [g.logprobs for g in sampled],
    }
