"""Training checkpoints: what the next step depends on, so a resumed run continues exactly. A folder holds
the learner's state in ``learner/`` (its policy weights, optimiser and RNG, in the learner's own format:
`TorchLearner.save`, or sharded by `LearnerGroup.save`) and the run's position in ``position.json`` (step,
data position, policy version, the rollout workers' sampling counters, the config it was written with)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memagent_graph.errors import ConfigError


def write_position(folder: str | Path, position: dict[str, Any]) -> Path:
    """Write ``position.json`` into ``folder`` (created if needed)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "position.json").write_text(json.dumps(position, indent=2) + "\n")
    return folder


def read_position(folder: str | Path, *, config: dict[str, Any]) -> dict[str, Any]:
    """The position saved in ``folder``; a checkpoint written with another ``config`` is refused."""
    folder = Path(folder)
    if not (folder / "position.json").is_file():
        raise ConfigError(f"{folder} is not a training checkpoint (no position.json)")
    position = json.loads((folder / "position.json").read_text())
    if position["config"] != config:
        raise ConfigError(f"checkpoint {folder} was written with another config; resume with the same one")
    return position
