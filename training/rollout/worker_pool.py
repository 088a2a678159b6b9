"""Rollout workers as Ray actors (or in this process): split episodes, gather traces, sync weights.

Episodes are dealt to workers by question group, so a group's episodes share a worker's batches. A worker
that dies mid-step (its actor process killed, out of memory…) is replaced by a fresh actor, given the current
weights, and its episodes are read again; the step completes. (Ray's own ``max_restarts`` would re-create the
actor with its *initial* weights and retry the call before we could send the current ones, so the restart is
done here.) Weights travel once through the object store (`ray.put`) and every actor loads the same copy.

The vLLM backend on a machine whose environment has no vLLM (CPU machines: vLLM lives in `memagent vllm
setup`'s environment) runs its actors on that environment's Python (`vllm_ray_runtime_env`).
"""

from __future__ import annotations

import importlib.util
import logging
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


class WorkerPool:
    """``count`` `RolloutWorker`s built from ``worker_options`` (see module doc)."""

    def __init__(self, count: int, *, use_ray: bool, seed: int, gpus: float = 0.0, **worker_options: Any) -> None:
        self.count, self.use_ray, self.seed, self.options = count, use_ray, seed, worker_options
        self.restarts = 0
        self._weights: Any = None
        self._version = 0
        self._links: tempfile.TemporaryDirectory[str] | None = None
        if use_ray:
            import ray

            ensure_ray()
            environment = self._vllm_environment()
            self._actor_class = ray.remote(num_cpus=1, num_gpus=gpus, **environment)(RolloutWorker)
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
        return self._actor_class.remote(**options, threads=1)

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
        self.workers = []
        if self._links is not None:
            self._links.cleanup()
