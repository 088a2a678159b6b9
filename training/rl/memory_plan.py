"""What a run keeps on its GPU, estimated before anything is loaded, and a clear error when it cannot fit.

Bytes per parameter: fp32 master weights 4; gradients 4 and AdamW's two moments 8 for each *trainable*
parameter; a frozen KL reference 4; a transformers rollout copy 4 per worker; vLLM takes its
``gpu_memory_utilization`` share of the GPU (weights and KV cache). FSDP divides the learner's part by its ranks
(one GPU each). Colocated, vLLM sleeps while the learner steps (its weights go to CPU memory, its KV cache is
freed), so the peak is the larger of rollout time (learner at rest + vLLM) and learning time (learner with its
gradients). Activations are not counted: they depend on the micro-batch's tokens
(``learner.max_tokens_per_micro_batch`` bounds them; ``learner.gradient_checkpointing`` shrinks them).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memagent_graph.errors import ConfigError
from memagent_graph.training.rl.config import RLConfig

GIB = 2**30
VLLM_DEFAULT_SHARE = 0.9
"""vLLM's default ``gpu_memory_utilization``."""


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes on one GPU, by what holds them."""

    weights: int
    gradients: int
    optimizer: int
    reference: int
    rollouts: int
    vllm: int
    colocated: bool

    @property
    def peak(self) -> int:
        """The most the GPU holds at once (see the module doc)."""
        at_rest = self.weights + self.optimizer + self.reference
        if self.colocated:
            return max(at_rest + self.vllm, at_rest + self.gradients)
        return at_rest + self.gradients + self.rollouts + self.vllm

    def lines(self) -> list[str]:
        """The plan as printed at the start of a run."""
        parts = ("weights", "gradients", "optimizer", "reference", "rollouts", "vllm")
        shown = [f"{name} {getattr(self, name) / GIB:.2f} GiB" for name in parts if getattr(self, name)]
        mode = " (vLLM sleeps while the learner steps)" if self.colocated else ""
        return [f"GPU memory plan per GPU: {', '.join(shown)}; peak {self.peak / GIB:.2f} GiB{mode}"]


def memory_plan(config: RLConfig, *, parameters: int, trainable: int) -> MemoryPlan:
    """The plan of ``config`` for a policy of ``parameters`` (``trainable`` of them train); vLLM's share
    depends on the GPU's size (`check_fits` adds it)."""
    ranks = config.learner.workers if config.learner.strategy == "fsdp" else 1
    transformers_rollouts = config.rollout.backend == "transformers"
    return MemoryPlan(
        weights=4 * parameters // ranks,
        gradients=4 * trainable // ranks,
        optimizer=8 * trainable // ranks,
        reference=4 * parameters // ranks if config.learner.kl_coef > 0 else 0,
        rollouts=4 * parameters * config.rollout_workers if transformers_rollouts else 0,
        vllm=0,
        colocated=config.colocate,
    )


def check_fits(plan: MemoryPlan, config: RLConfig, *, gpu_bytes: int) -> MemoryPlan:
    """``plan`` with vLLM's share of a GPU of ``gpu_bytes`` added; `ConfigError` when its peak exceeds the GPU."""
    if config.colocate:  # otherwise vLLM workers hold GPUs of their own (rollout.gpus_per_worker)
        share = float(config.rollout.engine_options.get("gpu_memory_utilization", VLLM_DEFAULT_SHARE))
        plan = dataclasses.replace(plan, vllm=int(share * gpu_bytes))
    if plan.peak > gpu_bytes:
        raise ConfigError(
            f"the run does not fit its GPU: peak {plan.peak / GIB:.1f} GiB of {gpu_bytes / GIB:.1f} GiB "
            f"({plan.lines()[0].split(': ', 1)[1]}); train LoRA adapters (`lora:`), shard the learner "
            "(`learner.strategy: fsdp`, `learner.offload`), or lower `rollout.engine_options.gpu_memory_utilization`"
        )
    return plan


def policy_parameters(folder: str | Path, *, lora: dict[str, Any] | None = None) -> tuple[int, int]:
    """(all, trainable) parameters of the policy in ``folder`` (with ``lora`` adapters), counted on the meta
    device: nothing is loaded."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from memagent_graph.training.rollout.weights import with_lora

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(folder), local_files_only=True))
        if lora is not None:
            model = with_lora(model, **lora)
    parameters = list(model.parameters())
    return sum(p.numel() for p in parameters), sum(p.numel() for p in parameters if p.requires_grad)
