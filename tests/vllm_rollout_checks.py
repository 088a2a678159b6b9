"""Checks of `VLLMRollout` run inside vLLM's own environment by `test_vllm_rollout.py`; prints one JSON object.

    <vllm venv>/bin/python tests/vllm_rollout_checks.py POLICY_FOLDER [ADAPTERS.safetensors REQUEST.json]

With the LoRA arguments the same process then runs `vllm_lora_checks.py` (one interpreter, one vLLM import).

The reference is the transformers model in float32 (the learner's view): log-probabilities of the tokens vLLM
sampled, greedy continuations, and the same after a weight sync of perturbed weights (the prompts are long
enough to fill several KV-cache blocks, so a prefix cache kept across the sync would show); the quote policy's
passage scores from the engine's prompt log-probabilities against the reference's query likelihoods.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(policy: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from memagent_graph.integrations.models.query_likelihood import (
        passage_prompt_ids,
        query_log_likelihoods,
        question_ids,
    )
    from memagent_graph.training.rl.learner import token_logprobs
    from memagent_graph.training.rollout.backends import Sampling
    from memagent_graph.training.rollout.vllm_backend import VLLMRollout
    from memagent_graph.training.rollout.weights import trainable_weights

    rollout = VLLMRollout(policy, seed=7, dtype="float32", max_model_len=2048, enforce_eager=True)
    reference = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32).eval()
    questions = ["What is the magic number?", "Name a colour of the sea at night.", "Who wrote it?"]
    context = " ".join(f"Line {i}: the grass is green and the sky is blue." for i in range(16))  # several KV blocks
    prompts = [rollout.prompt_ids([{"role": "user", "content": f"{context}\n{q}"}]) for q in questions]
    eos = rollout.tokenizer.eos_token_id

    def logprob_gap(generations, temperature):
        with torch.no_grad():
            gaps = [
                (token_logprobs(reference, p, g.response_ids, temperature=temperature) - torch.tensor(g.logprobs))
                .abs()
                .max()
                .item()
                for p, g in zip(prompts, generations, strict=True)
                if g.response_ids
            ]
        return max(gaps)

    def greedy_reference(prompt, max_tokens):
        with torch.no_grad():
            out = reference.generate(
                torch.tensor([prompt]), max_new_tokens=max_tokens, do_sample=False, eos_token_id=eos
            )
        return out[0, len(prompt) :].tolist()

    sampled = rollout.generate(prompts, Sampling(max_tokens=24, temperature=0.7))
    rollout.sampled_calls = 0
    again = rollout.generate(prompts, Sampling(max_tokens=24, temperature=0.7))
    greedy = rollout.generate(prompts, Sampling(max_tokens=16, temperature=0.0))
    result = {
        "sampled_ids": [g.response_ids for g in sampled],
        "finish_reasons": [g.finish_reason for g in sampled],
        "eos": eos,
        "sampled_logprob_gap": logprob_gap(sampled, 0.7),
        "repeat_equal": [g.response_ids for g in again] == [g.response_ids for g in sampled],
        "greedy_equal_reference": [g.response_ids for g in greedy] == [greedy_reference(p, 16) for p in prompts],
        "greedy_logprob_gap": logprob_gap(greedy, 1.0),
    }
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    rollout.load_weights(trainable_weights(reference))
    synced = rollout.generate(prompts, Sampling(max_tokens=16, temperature=0.0))
    result["synced_greedy_equal_reference"] = [g.response_ids for g in synced] == [
        greedy_reference(p, 16) for p in prompts
    ]
    passages = ["Line 3: the grass is green and the sky is blue.", "The magic number is 41.", ""]
    with torch.no_grad():
        query = question_ids(rollout.encode, questions[0])
        reference_scores = query_log_likelihoods(
            reference, query, passage_prompt_ids(rollout.encode, passages), pad_id=rollout.tokenizer.pad_token_id
        ).tolist()
    scores = rollout.score_passages(questions[0], passages)
    result["score_gap_per_token"] = max(abs(a - b) for a, b in zip(scores, reference_scores, strict=True)) / len(query)
    result["synced_greedy_changed"] = [g.response_ids for g in synced] != [g.response_ids for g in greedy]
    result["synced_logprob_gap"] = logprob_gap(synced, 1.0)
    rollout.close()
    return result


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    result = main(sys.argv[1])
    if len(sys.argv) == 4:
        sys.path.insert(0, str(Path(__file__).parent))
        from vllm_lora_checks import main as lora_checks

        result["lora"] = lora_checks(*sys.argv[1:4])
    print("RESULT " + json.dumps(result), flush=True)
