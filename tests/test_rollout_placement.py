"""How many CPUs each rollout worker asks Ray for: one each where the cluster has them, else an equal share of
what the learner ranks' bundles leave (two workers beside two FSDP ranks on a 2-CPU machine used to wait forever
for a second whole CPU)."""

from __future__ import annotations

import pytest

from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rollout.worker_pool import MIN_ACTOR_CPUS, rollout_worker_cpus


def test_each_rollout_worker_asks_for_one_cpu_where_the_cluster_has_them():
    assert rollout_worker_cpus(2.0, 2) == 1.0
    assert rollout_worker_cpus(16.0, 2) == 1.0


def test_rollout_workers_share_what_the_learner_ranks_leave():
    # two ranks' bundles hold 0.01 CPU each on a 2-CPU machine: 1.98 left for two workers
    share = rollout_worker_cpus(1.98, 2)
    assert share == pytest.approx(0.99, abs=1e-4) and 2 * share <= 1.98
    assert rollout_worker_cpus(1.0, 3) == 0.3333  # rounded down to Ray's unit: three always fit


def test_a_cluster_with_no_cpu_left_gets_the_least_request_and_refuses_later():
    assert rollout_worker_cpus(0.0, 2) == MIN_ACTOR_CPUS
    assert rollout_worker_cpus(0.01, 4) == MIN_ACTOR_CPUS


def test_the_placement_wait_is_a_setting_of_a_minute():
    assert RLConfig().placement_timeout_s == 60.0
    assert RLConfig(placement_timeout_s=5).placement_timeout_s == 5.0
    with pytest.raises(ValueError, match="placement_timeout_s"):
        RLConfig(placement_timeout_s=0)
