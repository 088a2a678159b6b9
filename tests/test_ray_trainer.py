"""The trainer on a local Ray cluster: rollout actors in parallel, weight sync, a killed actor restarted."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass

import pytest

from memagent_graph.training.rewards import REWARDS, register_reward
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rl.trainer import Trainer

pytestmark = [pytest.mark.slow, pytest.mark.ray]


@pytest.fixture(scope="module")
def config(tmp_path_factory, local_ray):
    register_reward("test_parity")(lambda reply, golds: float(len(reply) % 2))
    policy = build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0, hidden_size=32)
    yield RLConfig(
        policy=str(policy),
        prompts="tiny",
        chunk_tokens=128,
        memory_tokens=12,
        answer_tokens=8,
        group_size=3,
        questions_per_step=2,
        steps=3,
        eval_every=2,
        reward="test_parity",
        dynamic_sampling=False,
        rollout_workers=2,
        ray=True,
        task={"eval_samples": 2},
        learner={"lr": 1e-3},
    )
    del REWARDS["test_parity"]


@dataclass(frozen=True)
class Fitted:
    """A trainer after `fit` (3 steps on two rollout actors) and what was seen then; its actors stay up."""

    trainer: Trainer
    history: list[dict[str, float]]
    processes: set[int]  # the actors' and this process's ids, as the run started
    versions: list[int]  # each actor's policy version after the run


@pytest.fixture(scope="module")
def fitted(config, tmp_path_factory):
    output = tmp_path_factory.mktemp("run")
    trainer = Trainer(config.model_copy(update={"output_dir": str(output)}))
    try:
        processes = set(trainer.workers.pids()) | {os.getpid()}
        history = trainer.fit()
        yield Fitted(trainer, history, processes, [s["policy_version"] for s in trainer.workers.sampling_states()])
    finally:
        trainer.close()


def test_three_steps_end_to_end_on_two_rollout_actors(fitted):
    assert len(fitted.processes) == 3  # two actor processes besides this one
    steps = [m for m in fitted.history if "reward" in m]
    assert [m["step"] for m in steps] == [0, 1, 2]
    assert all(m["episodes"] == 6 and m["calls_trained"] > 0 for m in steps)
    assert [m["step"] for m in fitted.history if "eval_reward" in m] == [0, 2, 3]
    assert fitted.versions == [3, 3]
    assert (fitted.trainer.output_dir / "checkpoint" / "learner" / "policy.safetensors").is_file()


def test_a_killed_rollout_actor_is_restarted_and_its_episodes_read_again(fitted):
    trainer = fitted.trainer
    os.kill(trainer.workers.pids()[0], signal.SIGKILL)
    metrics = trainer.step()
    assert trainer.workers.restarts == 1
    assert metrics["episodes"] == 6 and metrics["calls_trained"] > 0
    assert [s["policy_version"] for s in trainer.workers.sampling_states()] == [v + 1 for v in fitted.versions]
