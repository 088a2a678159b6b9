"""Policy weights between the learner and the rollout workers: what a step changes (all weights, or only the
LoRA adapters), loading them into a rollout copy, and wrapping a policy with LoRA the same way on both sides."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch


def trainable_weights(model: Any) -> dict[str, torch.Tensor]:
    """The weights a step changes (all of them, or only the LoRA adapters): what a weight sync sends."""
    return {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}


def load_trainable_weights(model: Any, weights: dict[str, torch.Tensor]) -> None:
    """Load `trainable_weights` of the learner into a rollout copy of the same (LoRA-wrapped) policy."""
    unexpected = model.load_state_dict(weights, strict=False).unexpected_keys
    if unexpected:
        raise ValueError(f"weights for another architecture (e.g. {unexpected[0]}): rollout and learner differ")


def with_lora(model: Any, *, rank: int, alpha: int, target_modules: Sequence[str]) -> Any:
    """``model`` wrapped by peft with LoRA adapters (only they train; the base weights stay frozen)."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules=list(target_modules)))


def attention_implementation(device: str = "cpu") -> str:
    """``flash_attention_2`` on a GPU where the flash-attn package is installed, else torch's ``sdpa``."""
    import importlib.util

    return "flash_attention_2" if device == "cuda" and importlib.util.find_spec("flash_attn") else "sdpa"


def load_policy(folder: str | Path, *, device: str = "cpu") -> Any:
    """A policy folder's causal LM in float32 (the learner's and the rollouts' master copy), from local files,
    with the attention kernel for ``device``."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        str(folder), dtype=torch.float32, local_files_only=True, attn_implementation=attention_implementation(device)
    )
