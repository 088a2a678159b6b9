"""Rollout workers as Ray actors (or in this process): split episodes, gather traces, sync weights.

Episodes are dealt to workers by question group, so a group's episodes share a worker's batches. A worker
that dies mid-step (its actor process killed, out of memory…) is replaced by a fresh actor, given the current
weights, and its episodes are read again; the step completes. (Ray's own ``max_restarts`` would re-create the
actor with its *initial* weights and retry the call before we could send the current ones, so the restart is
done here.) Weights travel once through the object store (`ray.put`) and every actor loads the same copy.

On Ray the workers live in a placement group: each asks for one CPU, or an equal share of the CPUs the cluster
has free when fewer are left (the learner ranks' bundles hold some; `rollout_worker_cpus`), and a run whose
actors Ray cannot place in time is refused with what it asked for and what the cluster has (`place_bundles`).

The vLLM backend on a machine whose environment has no vLLM (CPU machines: vLLM lives in `memagent vllm
setup`'s environment) runs its actors on that environment's Python (`vllm_ray_runtime_env`).
"""

from __future__ import annotations

import importlib.util
import logging
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memagent_graph.errors import ConfigError
from memagent_graph.training.rollout.ray_cluster import ensure_ray
from memagent_graph.training.rollout.traces import Rollout
from memagent_graph.training.rollout.worker import Episode, RolloutWorker

logger = logging.getLogger(__name__)

_SEED_STRIDE = 1_000_003  # worker k samples with seed + k * stride: independent, reproducible streams
_RAY_UNIT = 10_000  # Ray counts fractional resources in units of 0.0001

PLACEMENT_TIMEOUT_S = 60.0
"""How long Ray may take to place a run's actors (learner ranks, rollout workers) before the run is refused."""
MIN_ACTOR_CPUS = 0.01
"""The least CPU an actor's bundle holds (Ray refuses empty bundles): what learner ranks without CPUs of their own
and rollout workers on a cluster with no CPU left ask for."""


def rollout_worker_cpus(free_cpus: float, workers: int) -> float:
    """The CPUs each of ``workers`` rollout actors asks Ray for: one where ``free_cpus`` (the cluster's, after the
    learner ranks' bundles) has that many for each, else an equal share of them, rounded down to Ray's unit, and
    at least `MIN_ACTOR_CPUS` (a cluster without even that much free refuses the run, `place_bundles`)."""
    share = math.floor(max(free_cpus, 0.0) / workers * _RAY_UNIT) / _RAY_UNIT
    return max(min(1.0, share), MIN_ACTOR_CPUS)


def place_bundles(bundles: list[dict[str, float]], *, strategy: str, timeout_s: float, what: str, fix: str) -> Any:
    """A Ray placement group of ``bundles`` (``what``: e.g. "2 rollout workers"), ready when it returns.

    Raises `ConfigError` when Ray cannot place it within ``timeout_s``: the message names the resources each
    bundle asks for, those the cluster has available and in all, and ``fix``.
    """
    import ray
    from ray.util.placement_group import placement_group

    group = placement_group(bundles, strategy=strategy)
    try:
        ray.get(group.ready(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        ray.util.remove_placement_group(group)
        kinds = sorted({kind for bundle in bundles for kind in bundle})
        available, total = (
            {kind: round(resources.get(kind, 0.0), 4) for kind in kinds}
            for resources in (ray.available_resources(), ray.cluster_resources())
        )
        raise ConfigError(
            f"Ray cannot place {what} of {bundles[0]} each within {timeout_s:g} s: the cluster has {available} "
            f"available of {total}; {fix}"
        ) from None
    return group


class WorkerPool:
    """``count`` `RolloutWorker`s built from ``worker_options`` (see module doc)."""

    def __init__(
        self,
        count: int,
        *,
        use_ray: bool,
        seed: int,
        gpus: float = 0.0,
        placement_timeout_s: float = PLACEMENT_TIMEOUT_S,
        **worker_options: Any,
    ) -> None:
        """``gpus``: Ray GPUs per actor; ``placement_timeout_s``: how long Ray may take to place the actors
        before the run is refused (`ConfigError`)."""
        self.count, self.use_ray, self.seed, self.options = count, use_ray, seed, worker_options
        self.restarts = 0
        self._weights: Any = None
        self._version = 0
        self._links: tempfile.TemporaryDirectory[str] | None = None
        self.placement: Any = None
        if use_ray:
            import ray

            ensure_ray()
            environment = self._vllm_environment()
            cpus = rollout_worker_cpus(ray.available_resources().get("CPU", 0.0), count)
            bundle = {"CPU": cpus, **({"GPU": gpus} if gpus else {})}
            self.placement = place_bundles(
                [dict(bundle) for _ in range(count)],
                strategy="PACK",
                timeout_s=placement_timeout_s,
                what=f"{count} rollout worker{'s' if count > 1 else ''}",
                fix="lower rollout_workers (or rollout.gpus_per_worker), give the learner ranks fewer CPUs "
                "(learner.cpus_per_worker, learner.workers), or add nodes",
            )
            self._actor_class = ray.remote(num_cpus=cpus, num_gpus=gpus, **environment)(RolloutWorker)
        self.workers = [self._start(rank) for rank in range(count)]

    def _vllm_environment(self) -> dict[str, Any]:
        """The actor options that run the vLLM backend from vLLM's own environment, when this one lacks vLLM."""
        if self.options.get("backend") != "vllm" or importlib.util.find_spec("vllm") is not None:
            return {}
        from memagent_graph.integrations.models.vllm_environment import vllm_ray_runtime_env

        self._links = tempfile.TemporaryDirectory(prefix="memagent-package-")
        return {"runtime_env": vllm_ray_runtime_env(Path(self._links.name))}

    def _start(self, rank: int) -> Any:
        options = {**self.options, "seed": self.seed + rank * _SEED_STRIDE}
        if not self.use_ray:
            return RolloutWorker(**options)
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        in_bundle = PlacementGroupSchedulingStrategy(placement_group=self.placement, placement_group_bundle_index=rank)
        return self._actor_class.options(scheduling_strategy=in_bundle).remote(**options, threads=1)

    def _call(self, worker: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        """Start ``method`` on a worker: a Ray object ref for an actor, the result in-process."""
        if self.use_ray:
            return getattr(worker, method).remote(*args, **kwargs)
        return getattr(worker, method)(*args, **kwargs)

    def _get(self, pending: Any) -> Any:
        if not self.use_ray:
            return pending
        import ray

        return ray.get(pending)

    def run(self, episodes: Sequence[Episode], *, greedy: bool = False) -> list[Rollout]:
        """Read ``episodes`` across the workers; each episode's calls and answer (`Rollout`), in the order given."""
        groups = dict.fromkeys(episode.group_id for episode in episodes)  # in order of appearance
        rank_of = {group: index % self.count for index, group in enumerate(groups)}
        shards = [[e for e in episodes if rank_of[e.group_id] == rank] for rank in range(self.count)]
        pending = [
            self._call(w, "run", shard, greedy=greedy) if shard else None
            for w, shard in zip(self.workers, shards, strict=False)
        ]
        traces: dict[str, Rollout] = {}
        for rank, (shard, result) in enumerate(zip(shards, pending, strict=True)):
            if result is not None:
                traces.update(
                    zip((e.episode_id for e in shard), self._gather(rank, shard, result, greedy), strict=True)
                )
        return [traces[episode.episode_id] for episode in episodes]

    def _gather(self, rank: int, shard: list[Episode], pending: Any, greedy: bool) -> list[Rollout]:
        if not self.use_ray:
            return pending
        import ray

        try:
            return ray.get(pending)
        except ray.exceptions.RayActorError as error:
            logger.warning("rollout worker %d died (%s); restarting it and re-reading its episodes", rank, error)
            self.restarts += 1
            self.workers[rank] = self._start(rank)
            ray.get(self.workers[rank].load_weights.remote(self._weights, self._version))
            return ray.get(self.workers[rank].run.remote(shard, greedy=greedy))

    def sync(self, weights: dict[str, Any], version: int) -> None:
        """Send the learner's trainable weights to every worker as policy ``version``."""
        if self.use_ray:
            import ray

            weights = ray.put(weights)
        self._weights, self._version = weights, version
        self._get([self._call(w, "load_weights", weights, version) for w in self.workers])

    def sleep(self) -> None:
        """Free every worker's GPU memory for the learner (vLLM's sleep mode: weights to the CPU, KV cache
        dropped); `wake` brings it back."""
        self._get([self._call(w, "sleep") for w in self.workers])

    def wake(self, tags: Sequence[str] | None = None) -> None:
        """Undo `sleep` for ``tags`` (vLLM's "weights", "kv_cache"; None: all)."""
        self._get([self._call(w, "wake", tags) for w in self.workers])

    def sampling_states(self) -> list[dict[str, int]]:
        return self._get([self._call(w, "sampling_state") for w in self.workers])

    def restore_sampling_states(self, states: list[dict[str, int]]) -> None:
        if len(states) != self.count:
            raise ConfigError(f"the checkpoint has {len(states)} rollout workers, this run {self.count}")
        self._get([self._call(w, "restore_sampling_state", s) for w, s in zip(self.workers, states, strict=True)])

    def pids(self) -> list[int]:
        return self._get([self._call(w, "pid") for w in self.workers])

    def close(self) -> None:
        if self.use_ray:
            import ray

            for worker in self.workers:
                ray.kill(worker)
            if self.placement is not None:
                ray.util.remove_placement_group(self.placement)
                self.placement = None
        self.workers = []
        if self._links is not None:
            self._links.cleanup()
