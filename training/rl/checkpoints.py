"""Training checkpoints: what the next step depends on, so a resumed run continues exactly. A folder holds
the learner's state in ``learner/`` (policy weights, optimiser and RNG: safetensors from the single-process
`TorchLearner`, or sharded by ``torch.distributed.checkpoint`` from a `LearnerGroup`, loadable by any number of
ranks and by the single learner) and the run's position in ``position.json`` (step, data position, policy
version, the rollout workers' sampling counters, the config it was written with). `export_model` writes a
plain Hugging Face folder from either."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

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


def read_policy(checkpoint: str | Path) -> Path:
    """The model folder the run of ``checkpoint`` started from (its config's ``policy``; a tiny policy is built
    in the run folder, the checkpoint's parent)."""
    checkpoint = Path(checkpoint)
    if not (checkpoint / "position.json").is_file():
        raise ConfigError(f"{checkpoint} is not a training checkpoint (no position.json)")
    policy = json.loads((checkpoint / "position.json").read_text())["config"]["policy"]
    if policy == "tiny":
        return checkpoint.parent / "base-policy"
    if policy == "embedded":
        from memagent_graph.integrations.models.embedded_files import ensure_local_model

        return ensure_local_model()
    return Path(policy)


def is_sharded(folder: str | Path) -> bool:
    """Whether ``folder`` holds a sharded learner checkpoint (``torch.distributed.checkpoint``)."""
    return (Path(folder) / ".metadata").is_file()


def save_sharded(folder: str | Path, model: Any, optimizer: Any, *, rank: int = 0) -> None:
    """Write this rank's shards of ``model`` and ``optimizer`` (every rank calls it) and its RNG state."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=str(folder))
    torch.save(torch.get_rng_state(), Path(folder) / f"rng-{rank}.pt")


def load_sharded(folder: str | Path, model: Any, optimizer: Any, *, rank: int = 0) -> None:
    """Load a checkpoint written by `save_sharded` from any number of ranks, resharded onto this one (in one
    process without a process group, whole)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_state, optimizer_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optimizer": optimizer_state}
    dcp.load(state, checkpoint_id=str(folder))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    rng = Path(folder) / f"rng-{rank}.pt"
    if rng.is_file():  # a rank the writing group did not have keeps its own
        torch.set_rng_state(torch.load(rng, weights_only=False))


def export_model(checkpoint: str | Path, output: str | Path, *, policy: str | Path) -> Path:
    """Write the policy of a training ``checkpoint`` as a Hugging Face folder (safetensors, config, tokenizer);
    ``policy`` is the folder the run started from."""
    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from transformers import AutoTokenizer

    from memagent_graph.training.rollout.weights import load_policy, load_trainable_weights

    learner = Path(checkpoint) / "learner"
    model = load_policy(policy)
    if is_sharded(learner):
        state = {"model": get_model_state_dict(model)}
        dcp.load(state, checkpoint_id=str(learner))
        set_model_state_dict(model, state["model"])
    elif (learner / "policy.safetensors").is_file():
        weights = load_file(str(learner / "policy.safetensors"))
        if any("lora_" in name for name in weights):
            raise ConfigError(
                f"{checkpoint} holds LoRA adapters, not a whole policy: load OUTPUT_DIR/adapter with peft instead"
            )
        load_trainable_weights(model, weights)
    else:
        raise ConfigError(f"{checkpoint} holds no learner state (no learner/ folder): pass a training checkpoint")
    output = Path(output)
    model.save_pretrained(str(output))
    AutoTokenizer.from_pretrained(str(policy), local_files_only=True).save_pretrained(str(output))
    return output
