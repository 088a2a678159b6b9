"""One in-process RL step through the real graph: rollouts, rewards, advantages, update, weight sync, log."""

from __future__ import annotations

import json

import pytest
import torch

from memagent_graph.errors import ConfigError
from memagent_graph.haystack import needle_document
from memagent_graph.tokenization import HuggingFaceTokenizer
from memagent_graph.training.learner import LearnerConfig
from memagent_graph.training.recording import TransformersRollout
from memagent_graph.training.rewards import REWARDS, register_reward
from memagent_graph.training.tiny_policy import build_tiny_policy
from memagent_graph.training.trainer import RLConfig, StepRunner, Task, learner_for

CONFIG = RLConfig(group_size=3, chunk_tokens=300, memory_tokens=12, answer_tokens=8, dynamic_sampling=False)


@pytest.fixture
def parity_reward():
    """A reward that varies with the policy's output (an untrained tiny policy never answers right)."""
    register_reward("test_parity")(lambda reply, golds: float(len(reply) % 2))
    yield "test_parity"
    del REWARDS["test_parity"]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    folder = build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0)
    return folder, HuggingFaceTokenizer(folder / "tokenizer.json")


def _tasks(tokenizer):
    needles = [needle_document(tokens=450, tokenizer=tokenizer, seed=seed) for seed in (1, 2)]
    return [Task(n.question, n.text, [n.answer]) for n in needles]


def test_a_step_reads_every_episode_through_the_graph_and_updates_the_policy(policy, parity_reward, tmp_path):
    folder, tokenizer = policy
    rollout = TransformersRollout(str(folder), seed=5)
    runner = StepRunner(
        rollout,
        learner_for(rollout, LearnerConfig(lr=1e-3)),
        tokenizer,
        config=CONFIG.model_copy(update={"reward": parity_reward}),
        log_path=tmp_path / "log.jsonl",
    )
    before = {k: v.clone() for k, v in rollout.model.state_dict().items()}
    metrics = runner.step(_tasks(tokenizer))
    episodes = {call.episode_id for call in runner.recorder.calls}
    assert len(episodes) == 2 * CONFIG.group_size
    assert all(runner.recorder.episode(e)[-1].node == "final_answer" for e in episodes)
    assert metrics["calls_trained"] == len(runner.recorder.calls) and metrics["policy_version"] == 1
    assert any(not torch.equal(before[k], v) for k, v in rollout.model.state_dict().items())
    logged = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert logged[0]["step"] == 0 and {"reward", "grad_norm", "entropy", "clip_fraction"} <= set(logged[0])


def test_groups_with_equal_rewards_are_dropped_and_nothing_is_updated(policy):
    folder, tokenizer = policy
    rollout = TransformersRollout(str(folder), seed=5)
    runner = StepRunner(
        rollout, learner_for(rollout), tokenizer, config=CONFIG.model_copy(update={"dynamic_sampling": True})
    )
    metrics = runner.step(_tasks(tokenizer))  # the untrained policy never answers right: every reward is 0
    assert (metrics["reward"], metrics["kept_episodes"], metrics["calls_trained"]) == (0.0, 0, 0)
    assert rollout.policy_version == 0


def test_learner_and_rollouts_must_share_the_temperature(policy):
    folder, tokenizer = policy
    rollout = TransformersRollout(str(folder))
    with pytest.raises(ConfigError, match="temperature"):
        StepRunner(rollout, learner_for(rollout, LearnerConfig(temperature=0.7)), tokenizer, config=CONFIG)


def test_a_resumed_run_reproduces_the_next_steps_loss_exactly(policy, parity_reward, tmp_path):
    folder, tokenizer = policy
    config = CONFIG.model_copy(update={"reward": parity_reward})

    def runner():
        rollout = TransformersRollout(str(folder), seed=9)
        return StepRunner(rollout, learner_for(rollout, LearnerConfig(lr=1e-3)), tokenizer, config=config)

    tasks = _tasks(tokenizer)
    straight = runner()
    straight.step(tasks)
    expected = straight.step(tasks)
    first = runner()
    first.step(tasks)
    first.save(tmp_path / "ckpt")
    resumed = runner()
    resumed.restore(tmp_path / "ckpt")
    again = resumed.step(tasks)
    assert again["step"] == 1 and again["policy_version"] == expected["policy_version"] == 2
    assert (again["loss"], again["reward"], again["grad_norm"]) == (
        expected["loss"],
        expected["reward"],
        expected["grad_norm"],
    )
    # the optimiser state came back too: the weights after the resumed step are the uninterrupted run's
    for name, tensor in straight.learner.model.state_dict().items():
        assert torch.equal(resumed.learner.model.state_dict()[name], tensor), name
