"""Training checkpoints: what the next step depends on, so a resumed run continues exactly. A folder holds
the trainable weights (``policy.safetensors``), the optimiser and torch RNG (``trainer_state.pt``) and the
run's position (``position.json``: step, data position, policy version, the workers' sampling counters and
the config it was written with)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from memagent_graph.errors import ConfigError
from memagent_graph.training.rollout.weights import trainable_weights


def save_checkpoint(folder: str | Path, *, model: Any, optimizer: Any, position: dict[str, Any]) -> Path:
    """Write ``model``'s trainable weights, ``optimizer``, the torch RNG and ``position`` to ``folder``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(trainable_weights(model), str(folder / "policy.safetensors"))
    torch.save({"optimizer": optimizer.state_dict(), "torch_rng": torch.get_rng_state()}, folder / "trainer_state.pt")
    (folder / "position.json").write_text(json.dumps(position, indent=2) + "\n")
    return folder


def load_checkpoint(
    folder: str | Path, *, optimizer: Any, config: dict[str, Any]
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Restore ``optimizer`` and the torch RNG from ``folder``; return its weights and position. A checkpoint
    written with another ``config`` (its ``position["config"]``) is refused."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / "position.json").is_file():
        raise ConfigError(f"{folder} is not a training checkpoint (no position.json)")
    position = json.loads((folder / "position.json").read_text())
    if position["config"] != config:
        raise ConfigError(f"checkpoint {folder} was written with another config; resume with the same one")
    weights = load_file(str(folder / "policy.safetensors"))
    state = torch.load(folder / "trainer_state.pt", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["torch_rng"])
    return weights, position
