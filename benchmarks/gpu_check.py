"""The trainer's device check: one command on a GPU machine (torch, transformers, peft and accelerate installed;
no vLLM, no Ray, no network), one JSON out.

    python benchmarks/gpu_check.py --out DIR [--device cuda|cpu] [--quick]

It runs (1) the README training example (`examples/train_tiny.yaml`) on ``--device`` with no Ray, and reports
whether the reward rose; (2) learner and generate tokens/s of the SmolLM2-135M architecture with random weights
(no download) on ``--device`` and on 2 CPU threads, side by side; (3) one FSDP2 step of a 1-rank process group
(nccl on cuda, gloo on cpu), in float32 and with bfloat16 parameters, against the single learner's float32 step
on the same batch. ``--quick`` shrinks every part
(the test suite runs ``--device cpu --quick``). The project's other dependencies travel to such a machine as
wheels: ``python benchmarks/fetch_wheels.py``.
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from memagent_graph.errors import ConfigError
from memagent_graph.precision import resolve_device
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner
from memagent_graph.training.rl.learner_group import LearnerRank
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rl.trainer import Trainer
from memagent_graph.training.rollout.traces import TraceCall
from memagent_graph.training.rollout.weights import load_policy, trainable_weights

EXAMPLE = Path(__file__).parent.parent / "examples" / "train_tiny.yaml"
SMOLLM2_135M = {"hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
                "num_key_value_heads": 3, "vocab_size": 49152, "tie_word_embeddings": True}  # fmt: skip
FSDP_TOLERANCE = {"float32": 1e-4, "bfloat16": 0.1}
"""Largest relative difference allowed between the 1-rank FSDP2 step's weight update and the single learner's
(float32: summation order only; bfloat16 parameters: rounding of the forward and backward)."""


def training_example(device: str, folder: Path, *, quick: bool) -> dict[str, Any]:
    """The README training example on ``device`` in this process: evaluations, rewards and wall time."""
    config = RLConfig.from_yaml(EXAMPLE)
    changes: dict[str, Any] = {"device": device, "ray": False, "rollout_workers": 1, "output_dir": str(folder)}
    if quick:
        changes |= {"steps": 2, "questions_per_step": 2, "group_size": 2, "eval_every": 0,
                    "warm_start": config.warm_start.model_copy(update={"steps": 2, "tasks": 8}),
                    "task": config.task.model_copy(update={"eval_samples": 4})}  # fmt: skip
    config = config.model_copy(update=changes)
    started = time.perf_counter()
    trainer = Trainer(config)
    try:
        history = trainer.fit()
    finally:
        trainer.close()
    rewards = [step["reward"] for step in history if "reward" in step]
    evals = [step["eval_reward"] for step in history if "eval_reward" in step]
    tenth = max(len(rewards) // 3, 1)
    first, last = sum(rewards[:tenth]) / tenth, sum(rewards[-tenth:]) / tenth
    return {"seconds": round(time.perf_counter() - started, 1), "eval_rewards": evals, "sampled_reward_first": first,
            "sampled_reward_last": last, "reward_rose_or_held": evals[-1] >= evals[0] - 0.05}  # fmt: skip


def _calls(count: int, *, prompt: int, response: int, vocab: int, seed: int = 0) -> list[TraceCall]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (count, prompt + response), generator=generator).tolist()
    return [
        TraceCall(
            episode_id=f"e{i}",
            group_id="g",
            call_index=0,
            node="final_answer",
            prompt_ids=row[:prompt],
            response_ids=row[prompt:],
            logprobs=None,
            finish_reason="length",
            policy_version=0,
            latency_s=0.0,
            text="",
        )  # fmt: skip
        for i, row in enumerate(ids)
    ]


def throughput(device: str, *, quick: bool) -> dict[str, float]:
    """Learner and generate tokens/s of the SmolLM2-135M architecture (random weights) on ``device``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from memagent_graph.integrations.models.generation import Sampling, generate

    shape = {**SMOLLM2_135M, "num_hidden_layers": 2} if quick else SMOLLM2_135M
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**shape))
    learner = TorchLearner(model, config=LearnerConfig(micro_batch_size=8), device=device)
    prompt, response = (64, 16) if quick else (1024, 128)
    calls = _calls(8, prompt=prompt, response=response, vocab=shape["vocab_size"])
    learner.update(calls[:2], [1.0, -1.0])  # warm-up: kernels, allocator
    started = time.perf_counter()
    learner.update(calls, [1.0, -1.0] * 4)
    learn_s = time.perf_counter() - started
    started = time.perf_counter()
    generate(
        model.eval(),
        [c.prompt_ids for c in calls],
        Sampling(response, 1.0),
        pad_id=0,
        eos_ids={shape["vocab_size"] - 1},
    )
    generate_s = time.perf_counter() - started
    tokens = sum(len(c.prompt_ids) + len(c.response_ids) for c in calls)
    return {
        "learner_tokens_per_s": round(tokens / learn_s, 1),
        "generate_tokens_per_s": round(8 * response / generate_s, 1),
    }


def fsdp_step(device: str, folder: Path, *, param_dtype: str) -> dict[str, Any]:
    """One step of a 1-rank FSDP2 group (nccl on cuda) in ``param_dtype`` against the single learner's float32
    step on the same batch: the relative difference of their weight updates."""
    policy = build_tiny_policy(folder / "policy", seed=0, hidden_size=64)
    calls = _calls(4, prompt=24, response=8, vocab=1000, seed=1)
    advantages = [1.0, -0.5, 0.25, -1.0]
    config = LearnerConfig(lr=1e-2, micro_batch_size=2, bf16_autocast=False, strategy="fsdp", workers=1,
                           param_dtype=param_dtype)  # fmt: skip
    alone = config.model_copy(update={"strategy": "single", "param_dtype": "float32"})
    single = TorchLearner(load_policy(policy, device=device), config=alone, device=device)
    start = trainable_weights(single.model)
    single.update(calls, advantages)
    rank = LearnerRank(0, 1, policy=str(policy), config=config.model_dump(), temperature=1.0, seed=0, device=device)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rank.setup("127.0.0.1", port)
    try:
        rank.update(calls, advantages)
        weights = rank.full_weights()
    finally:
        rank.close()
    expected = {name: (tensor - start[name]).float().cpu() for name, tensor in trainable_weights(single.model).items()}
    moved = {name: weights[name].float() - start[name].float().cpu() for name in expected}
    difference = sum(float((moved[n] - expected[n]).norm() ** 2) for n in expected) ** 0.5
    relative = difference / sum(float(t.norm() ** 2) for t in expected.values()) ** 0.5
    return {"param_dtype": param_dtype, "relative_update_gap": relative, "tolerance": FSDP_TOLERANCE[param_dtype],
            "equal": relative <= FSDP_TOLERANCE[param_dtype]}  # fmt: skip


def machine(device: str) -> dict[str, Any]:
    """What ran it: the CPU, the GPU if any, torch's version."""
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    return {"cpu": platform.processor() or platform.machine(), "gpu": gpu, "torch": torch.__version__}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for gpu_check.json")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--quick", action="store_true", help="small shapes and 2 steps (what the tests run)")
    args = parser.parse_args()
    try:
        device = resolve_device(args.device, what="--device")
    except ConfigError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"device": device, "quick": args.quick, "machine": machine(device)}
    with tempfile.TemporaryDirectory() as scratch:
        result["training_example"] = training_example(device, Path(scratch) / "train", quick=args.quick)
        print(f"training example: {result['training_example']}", flush=True)
        result["fsdp_step"] = [
            fsdp_step(device, Path(scratch) / dtype, param_dtype=dtype) for dtype in ("float32", "bfloat16")
        ]
        print(f"1-rank FSDP2 step: {result['fsdp_step']}", flush=True)
    result["throughput"] = {device: throughput(device, quick=args.quick)}
    if device != "cpu":
        torch.set_num_threads(2)
        result["throughput"]["cpu (2 threads)"] = throughput("cpu", quick=args.quick)
    print(f"throughput: {result['throughput']}", flush=True)
    (out / "gpu_check.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out / 'gpu_check.json'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
