"""The learner across processes: N Ray actors form one ``torch.distributed`` group (``gloo`` on CPU, ``nccl``
with one GPU per rank; rank 0's address from Ray) and hold the policy sharded by FSDP2 (per decoder layer, then
the root; parameters and optimiser optionally offloaded to the CPU on GPU ranks) or replicated by DDP; with
``lora`` the ranks train only the adapters, and only the adapters travel to the rollout workers.

A step's calls are split into contiguous parts, one per rank; every rank normalises its loss by the *whole*
step's token count and runs as many micro-batches as the busiest rank (zero-weight passes keep it in every
collective), so the summed gradient, the clipped global norm and the step equal the single-process
learner's on the same batch. Weights leave the group whole (gathered to rank 0, on CPU) for the rollout
workers; checkpoints are sharded (``torch.distributed.checkpoint``), one file set per rank.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from memagent_graph.errors import ConfigError, MemAgentError
from memagent_graph.training.rl.checkpoints import is_sharded, load_sharded, save_sharded
from memagent_graph.training.rl.learner import (
    LearnerConfig,
    StepShare,
    TorchLearner,
    frozen_copy,
    micro_batches,
    step_units,
)
from memagent_graph.training.rollout.ray_cluster import ensure_ray
from memagent_graph.training.rollout.traces import TraceCall
from memagent_graph.training.rollout.weights import load_policy, with_lora
from memagent_graph.training.rollout.worker_pool import MIN_ACTOR_CPUS, PLACEMENT_TIMEOUT_S, place_bundles

_STATS = ("loss", "clip_fraction", "approx_kl", "kl", "entropy")


class LearnerRankError(MemAgentError, RuntimeError):
    """A learner rank died or failed mid-step: the step is lost; resume the run from its last checkpoint."""


def split_calls(count: int, ranks: int) -> list[range]:
    """Contiguous, nearly equal parts of ``count`` calls, one per rank (a rank may get none)."""
    bounds = [count * rank // ranks for rank in range(ranks + 1)]
    return [range(bounds[rank], bounds[rank + 1]) for rank in range(ranks)]


class LearnerRank:
    """One rank of the group (run as a Ray actor): its shard of the policy, its optimiser, its part of each step."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        *,
        policy: str,
        config: dict[str, Any],
        temperature: float,
        seed: int,
        lora: dict[str, Any] | None = None,
        device: str = "cpu",
    ) -> None:
        self.rank, self.world_size, self.policy = rank, world_size, policy
        self.config, self.temperature, self.seed = LearnerConfig.model_validate(config), temperature, seed
        self.lora, self.device = lora, device
        self.learner: TorchLearner | None = None
        self._supervised: TorchLearner | None = None
        self._trainable: list[str] = []

    def address(self) -> tuple[str, int]:
        """Where rank 0 listens for the others: this node's address and a free port."""
        import ray

        with socket.socket() as probe:
            probe.bind(("", 0))
            port = probe.getsockname()[1]
        return ray.util.get_node_ip_address(), port

    def setup(self, master: str, port: int) -> None:
        """Join the process group, load the policy, shard (or replicate) it and build the optimiser."""
        import torch.distributed as dist

        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = master, str(port)
        if self.device == "cuda":  # Ray gives each rank one GPU (CUDA_VISIBLE_DEVICES): it is device 0 here
            torch.cuda.set_device(0)
        dist.init_process_group("nccl" if self.device == "cuda" else "gloo", rank=self.rank, world_size=self.world_size)
        torch.manual_seed(self.seed)
        model = load_policy(self.policy, device=self.device)
        pad_id = model.config.pad_token_id or 0
        if self.lora is not None:
            model = with_lora(model, **self.lora)
        self._trainable = [name for name, p in model.named_parameters() if p.requires_grad]
        reference = None
        if self.config.kl_coef > 0:  # the policy as training starts, frozen, whole on every rank
            reference = frozen_copy(model)
        self.learner = TorchLearner(
            self._wrap(model),
            config=self.config,
            pad_id=pad_id,
            temperature=self.temperature,
            reference=reference,
            device=self.device,
        )

    def _wrap(self, model: Any) -> Any:
        if self.config.strategy == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            return DistributedDataParallel(model)
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        options: dict[str, Any] = {
            "mp_policy": MixedPrecisionPolicy(
                param_dtype=getattr(torch, self.config.fsdp_param_dtype(device=self.device)),
                reduce_dtype=torch.float32,
            )
        }
        if self.config.offload:
            from torch.distributed.fsdp import CPUOffloadPolicy

            options["offload_policy"] = CPUOffloadPolicy()
        for module in model.modules():  # one FSDP unit per decoder layer: all-gathered one at a time
            if type(module).__name__.endswith("DecoderLayer"):
                fully_shard(module, **options)
        fully_shard(model, **options)
        return model

    def update(self, calls: Sequence[TraceCall], advantages: Sequence[float]) -> dict[str, float]:
        """Take this rank's part of the step, sum the gradient across ranks, clip and step; the step's stats."""
        import torch.distributed as dist

        assert self.learner is not None, "setup() first"
        mine, share = self._share(calls)
        self.learner.optimizer.zero_grad(set_to_none=True)
        stats = self.learner.backward([calls[i] for i in mine], [advantages[i] for i in mine], share=share)
        summed = torch.tensor([stats[key] for key in _STATS], dtype=torch.float64)
        dist.all_reduce(summed)
        stats.update(zip(_STATS, summed.tolist(), strict=True))
        gap = torch.tensor([stats["logprob_gap"]], dtype=torch.float64)
        dist.all_reduce(gap, op=dist.ReduceOp.MAX)
        stats["logprob_gap"] = float(gap)
        stats["grad_norm"] = self.learner.clip_and_step()
        return stats

    def _share(self, calls: Sequence[TraceCall]) -> tuple[range, StepShare]:
        """This rank's indices of ``calls`` and its `StepShare` of the step."""
        parts = split_calls(len(calls), self.world_size)
        share = StepShare(
            total_tokens=float(sum(step_units(c) for c in calls)),
            total_calls=len(calls),
            micro_batches=max(len(micro_batches([calls[i] for i in part], config=self.config)) for part in parts),
            ranks=self.world_size,
            filler=calls[0],
        )
        return parts[self.rank], share

    def start_supervised(self, lr: float) -> None:
        """Build the supervised learner (its own optimiser at ``lr``) that `sft_update` steps."""
        assert self.learner is not None, "setup() first"
        self._supervised = self.learner.supervised(lr=lr)

    def sft_update(self, calls: Sequence[TraceCall]) -> dict[str, float]:
        """One supervised step on this rank's part of ``calls``; the step's loss (summed over ranks)."""
        import torch.distributed as dist

        mine, share = self._share(calls)
        assert self._supervised is not None, "start_supervised() first"
        stats = self._supervised.sft_update([calls[i] for i in mine], share=share)
        loss = torch.tensor([stats["loss"]], dtype=torch.float64)
        dist.all_reduce(loss)
        return {**stats, "loss": float(loss)}

    def anchor_reference(self) -> None:
        """Load the policy as it is now into this rank's KL reference (a collective: every rank calls it)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        assert self.learner is not None, "setup() first"
        if self.learner.reference is not None:
            state = get_model_state_dict(self.learner.model, options=StateDictOptions(full_state_dict=True))
            self.learner.reference.load_state_dict(state)

    def full_weights(self) -> dict[str, torch.Tensor]:
        """The trainable weights, whole, on rank 0 (every rank must call: it is a collective); {} elsewhere."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        assert self.learner is not None, "setup() first"
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state = get_model_state_dict(self.learner.model, options=options)
        return {name: state[name] for name in self._trainable} if self.rank == 0 else {}

    def save_adapter(self, folder: str, base_model: str | None) -> None:
        """Gather the LoRA adapters and write them as a peft folder from rank 0 (a collective)."""
        from peft import get_peft_model_state_dict
        from safetensors.torch import save_file

        assert self.learner is not None, "setup() first"
        weights = self.full_weights()
        if self.rank != 0:
            return
        adapters = get_peft_model_state_dict(self.learner.model, state_dict=weights)
        config = self.learner.model.peft_config["default"]
        if base_model is not None:
            config.base_model_name_or_path = base_model
        Path(folder).mkdir(parents=True, exist_ok=True)
        config.save_pretrained(folder)
        save_file(
            {name: tensor.contiguous() for name, tensor in adapters.items()},
            str(Path(folder) / "adapter_model.safetensors"),
        )

    def save(self, folder: str) -> None:
        """Write this rank's shards of the policy and optimiser, and its RNG state."""
        assert self.learner is not None, "setup() first"
        save_sharded(folder, self.learner.model, self.learner.optimizer, rank=self.rank)

    def load(self, folder: str) -> None:
        """Load a checkpoint written by `save` from any number of ranks (resharded onto these)."""
        assert self.learner is not None, "setup() first"
        load_sharded(folder, self.learner.model, self.learner.optimizer, rank=self.rank)

    def close(self) -> None:
        """Leave the process group."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def rank_placement(config: LearnerConfig, *, device: str, timeout_s: float = PLACEMENT_TIMEOUT_S) -> Any:
    """A Ray placement group of one bundle per rank (its CPUs, and one GPU on cuda), packed onto as few nodes as
    fit (``PACK``: a node's GPUs talk over NVLink, not the network); ready when it returns, refused
    (`ConfigError`) when Ray cannot place it within ``timeout_s``."""
    bundle = {"CPU": max(config.cpus_per_worker, MIN_ACTOR_CPUS), **({"GPU": 1} if device == "cuda" else {})}
    return place_bundles(
        [dict(bundle) for _ in range(config.workers)],
        strategy="PACK",
        timeout_s=timeout_s,
        what=f"{config.workers} learner rank{'s' if config.workers > 1 else ''}",
        fix="lower learner.workers or learner.cpus_per_worker, or add nodes",
    )


class LearnerGroup:
    """``config.workers`` learner ranks as Ray actors, a `Learner` like one `TorchLearner`: `update` a step,
    `weights` for the rollout workers, `save` / `load` sharded checkpoints."""

    def __init__(
        self,
        policy: str | Path,
        *,
        config: LearnerConfig,
        temperature: float = 1.0,
        seed: int = 0,
        lora: dict[str, Any] | None = None,
        device: str = "cpu",
        placement_timeout_s: float = PLACEMENT_TIMEOUT_S,
    ) -> None:
        """``lora``: train adapters (`LoraSettings` fields) on every rank; ``device`` cuda: one GPU per rank;
        ``placement_timeout_s``: how long Ray may take to place the ranks before the run is refused."""
        import ray

        if config.strategy == "single":
            raise ConfigError("a learner group shards or replicates the policy: use strategy fsdp or ddp")
        if config.offload and device != "cuda":
            raise ConfigError("`learner.offload` moves GPU ranks' parameters to the CPU: it needs device: cuda")
        ensure_ray()
        self.placement = rank_placement(config, device=device, timeout_s=placement_timeout_s)
        gpus = 1 if device == "cuda" else 0
        actor = ray.remote(num_cpus=config.cpus_per_worker, num_gpus=gpus)(LearnerRank)
        options = {
            "policy": str(policy), "config": config.model_dump(), "temperature": temperature, "seed": seed,
            "lora": lora, "device": device,
        }  # fmt: skip
        self.config, self.lora = config, lora
        self.ranks = [
            actor.options(scheduling_strategy=self._in_bundle(rank)).remote(rank, config.workers, **options)
            for rank in range(config.workers)
        ]
        master, port = self._all([self.ranks[0].address.remote()])[0]
        self._all([rank.setup.remote(master, port) for rank in self.ranks])

    def _in_bundle(self, rank: int) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return PlacementGroupSchedulingStrategy(placement_group=self.placement, placement_group_bundle_index=rank)

    def _all(self, pending: list[Any]) -> list[Any]:
        import ray

        results: dict[Any, Any] = {}
        try:
            waiting = list(pending)
            while waiting:  # fail fast: the other ranks would wait in their next collective for the lost one
                [done], waiting = ray.wait(waiting, num_returns=1)
                results[done] = ray.get(done)
            return [results[ref] for ref in pending]
        except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as error:
            self.close()
            raise LearnerRankError(
                f"a learner rank failed ({type(error).__name__}: {str(error).splitlines()[0]}); the step is lost: "
                "resume the run from its last checkpoint (memagent train rl --resume)"
            ) from None

    def update(self, calls: Sequence[TraceCall], advantages: Sequence[float]) -> dict[str, float]:
        """One optimiser step on ``calls`` across the ranks; the step's loss, grad norm and stats."""
        import ray

        calls_ref, advantages_ref = ray.put(list(calls)), ray.put(list(advantages))
        return self._all([rank.update.remote(calls_ref, advantages_ref) for rank in self.ranks])[0]

    def supervised(self, *, lr: float) -> _GroupSupervised:
        """Supervised steps on the group's policy (`TorchLearner.supervised` on every rank)."""
        self._all([rank.start_supervised.remote(lr) for rank in self.ranks])
        return _GroupSupervised(self.ranks, self._all)

    def anchor_reference(self) -> None:
        """Make every rank's KL reference the policy as it is now (`TorchLearner.anchor_reference`)."""
        self._all([rank.anchor_reference.remote() for rank in self.ranks])

    def weights(self) -> dict[str, torch.Tensor]:
        """The trainable weights, whole (gathered from the shards): what the rollout workers load."""
        return self._all([rank.full_weights.remote() for rank in self.ranks])[0]

    def save(self, folder: str | Path) -> None:
        """A sharded checkpoint of the policy, the optimiser and each rank's RNG in ``folder``."""
        self._all([rank.save.remote(str(folder)) for rank in self.ranks])

    def load(self, folder: str | Path) -> None:
        """Load a checkpoint written by a group of any size."""
        if not is_sharded(folder):
            raise ConfigError(f"{folder} holds no sharded learner checkpoint (no .metadata)")
        self._all([rank.load.remote(str(folder)) for rank in self.ranks])

    def save_adapter(self, folder: str | Path, *, base_model: str | None = None) -> Path:
        """The LoRA adapters, gathered from the ranks, as a peft folder (`TorchLearner.save_adapter`)."""
        if self.lora is None:
            raise ConfigError("this run trains every weight (no `lora:`): there is no adapter to save")
        self._all([rank.save_adapter.remote(str(folder), base_model) for rank in self.ranks])
        return Path(folder)

    def close(self) -> None:
        """Stop the ranks."""
        import ray

        for rank in self.ranks:
            ray.kill(rank)
        self.ranks = []
        if self.placement is not None:
            ray.util.remove_placement_group(self.placement)
            self.placement = None


class _GroupSupervised:
    """The group as a `SupervisedLearner` (what `sft.fine_tune` steps)."""

    def __init__(self, ranks: list[Any], run: Callable[[list[Any]], list[Any]]) -> None:
        """``run`` waits for the ranks' results (the group's, which fails fast when a rank dies)."""
        self.ranks, self.run = ranks, run

    def sft_update(self, calls: Sequence[TraceCall]) -> dict[str, float]:
        import ray

        calls_ref = ray.put(list(calls))
        return self.run([rank.sft_update.remote(calls_ref) for rank in self.ranks])[0]
