"""The trainer in one process: RL steps through the real graph, logs, checkpoints, YAML config, LoRA."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from memagent_graph.errors import ConfigError
from memagent_graph.training.rewards import REWARDS, register_reward
from memagent_graph.training.rl.config import LoraSettings, RLConfig
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rl.trainer import Trainer

pytestmark = pytest.mark.integration  # not in the unit tier: builds trainers and policies


@pytest.fixture
def parity_reward():
    """A reward that varies with the policy's output (an untrained tiny policy never answers right)."""
    register_reward("test_parity")(lambda reply, golds: float(len(reply) % 2))
    yield "test_parity"
    del REWARDS["test_parity"]


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0, hidden_size=32)


def _config(policy, tmp_path, **changes) -> RLConfig:
    settings = {
        "policy": str(policy),
        "prompts": "tiny",
        "chunk_tokens": 128,
        "memory_tokens": 12,
        "answer_tokens": 8,
        "group_size": 3,
        "questions_per_step": 2,
        "ray": False,
        "dynamic_sampling": False,
        "learner": {"lr": 1e-3},
        "output_dir": str(tmp_path / "run"),
        **changes,
    }
    return RLConfig.model_validate(settings)


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.learner.model.state_dict().items()}


def test_a_step_reads_every_episode_through_the_graph_and_updates_the_policy(policy, parity_reward, tmp_path):
    trainer = Trainer(_config(policy, tmp_path, reward=parity_reward, save_traces=True))
    before = _weights(trainer)
    metrics = trainer.step()
    traces = [json.loads(line) for line in (tmp_path / "run" / "traces.jsonl").read_text().splitlines()]
    episodes = {call["episode_id"] for call in traces}
    assert len(episodes) == metrics["episodes"] == 2 * 3
    last_calls = {e: max((c for c in traces if c["episode_id"] == e), key=lambda c: c["call_index"]) for e in episodes}
    assert all(call["node"] == "final_answer" for call in last_calls.values())
    assert all(call["reward"] in (0.0, 1.0) for call in traces)
    assert metrics["calls_trained"] == len(traces) and metrics["policy_version"] == 1
    assert any(not torch.equal(before[k], v) for k, v in trainer.learner.model.state_dict().items())


def test_rollout_workers_read_with_the_learners_weights_after_a_step(policy, parity_reward, tmp_path):
    trainer = Trainer(_config(policy, tmp_path, reward=parity_reward))
    trainer.step()
    [worker] = trainer.workers.workers
    rollout = worker.rollout.model.state_dict()
    for name, tensor in trainer.learner.model.state_dict().items():
        assert torch.equal(rollout[name], tensor), name
    assert worker.rollout.policy_version == 1


def test_groups_with_equal_rewards_are_dropped_and_nothing_is_updated(policy, tmp_path):
    trainer = Trainer(_config(policy, tmp_path, dynamic_sampling=True))
    before = _weights(trainer)
    metrics = trainer.step()  # the untrained policy never answers right: every reward is 0
    assert (metrics["reward"], metrics["kept_episodes"], metrics["calls_trained"]) == (0.0, 0, 0)
    assert metrics["policy_version"] == 0
    assert all(torch.equal(before[k], v) for k, v in trainer.learner.model.state_dict().items())


def test_calls_record_their_nodes_token_limit_and_overlong_shaping_trains_on_their_lengths(policy, tmp_path):
    trainer = Trainer(_config(policy, tmp_path, overlong_buffer=4, save_traces=True))
    metrics = trainer.step()
    traces = [json.loads(line) for line in (tmp_path / "run" / "traces.jsonl").read_text().splitlines()]
    assert {(call["node"], call["max_tokens"]) for call in traces} == {("update_memory", 12), ("final_answer", 8)}
    lengths = [(len(call["response_ids"]), call["max_tokens"]) for call in traces]
    expected = sum(min(0.0, -(length - (limit - 4)) / 4) for length, limit in lengths) / len(traces)
    assert expected < 0 and metrics["overlong_penalty"] == pytest.approx(expected)
    # every reward is 0 (the untrained policy never answers right): the penalties alone move the policy
    assert metrics["reward"] == 0.0 and metrics["calls_trained"] == len(traces) and metrics["policy_version"] == 1


def test_each_step_logs_a_json_line_and_tensorboard_scalars(policy, parity_reward, tmp_path):
    trainer = Trainer(_config(policy, tmp_path, reward=parity_reward))
    trainer.step()
    trainer.evaluate()
    trainer.close()
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = {"reward", "grad_norm", "entropy", "clip_fraction", "approx_kl", "overlong_penalty", "rollout_s"}
    assert lines[0]["step"] == 0 and logged <= set(lines[0])
    assert "eval_reward" in lines[1]
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


def test_a_resumed_run_reproduces_the_next_step_exactly(policy, parity_reward, tmp_path):
    def trainer(name: str) -> Trainer:
        return Trainer(_config(policy, tmp_path / name, reward=parity_reward, seed=9))

    straight = trainer("straight")
    straight.step()
    expected = straight.step()
    first = trainer("first")
    first.step()
    first.save(tmp_path / "ckpt")
    resumed = trainer("resumed")
    resumed.restore(tmp_path / "ckpt")
    again = resumed.step()
    assert again["step"] == 1 and again["policy_version"] == expected["policy_version"] == 2
    for key in ("loss", "reward", "grad_norm", "kept_episodes"):
        assert again[key] == expected[key], key
    # the optimiser state and the data position came back too: the weights after the step are the same
    for name, tensor in straight.learner.model.state_dict().items():
        assert torch.equal(resumed.learner.model.state_dict()[name], tensor), name


def test_a_checkpoint_of_another_config_is_refused(policy, parity_reward, tmp_path):
    trainer = Trainer(_config(policy, tmp_path / "a", reward=parity_reward))
    trainer.save(tmp_path / "ckpt")
    other = Trainer(_config(policy, tmp_path / "b", reward=parity_reward, group_size=4))
    with pytest.raises(ConfigError, match="another config"):
        other.restore(tmp_path / "ckpt")


def test_a_kl_coefficient_trains_against_a_frozen_copy_of_the_starting_policy(policy, parity_reward, tmp_path):
    trainer = Trainer(_config(policy, tmp_path, reward=parity_reward, learner={"lr": 1e-3, "kl_coef": 0.1}))
    start = _weights(trainer)
    trainer.step()
    reference = trainer.learner.reference
    assert not any(p.requires_grad for p in reference.parameters())
    assert all(torch.equal(start[k], v) for k, v in reference.state_dict().items())
    assert any(not torch.equal(start[k], v) for k, v in trainer.learner.model.state_dict().items())


def test_a_warm_start_moves_the_kl_reference_to_the_policy_rl_starts_from(policy, tmp_path):
    warm, budgets = {"tasks": 4, "steps": 2, "batch_size": 2}, {"memory_tokens": 16, "answer_tokens": 12}
    trainer = Trainer(_config(policy, tmp_path, warm_start=warm, learner={"kl_coef": 0.1}, **budgets))
    base = _weights(trainer)
    trainer.warm_start()
    warmed = _weights(trainer)
    reference = trainer.learner.reference.state_dict()
    assert any(not torch.equal(base[k], warmed[k]) for k in base)
    assert all(torch.equal(warmed[k], v) for k, v in reference.items())
    assert not any(p.requires_grad for p in trainer.learner.reference.parameters())


def test_with_lora_only_the_adapters_train_and_they_reach_the_rollouts(policy, parity_reward, tmp_path):
    lora = LoraSettings(rank=4, alpha=8).model_dump()
    trainer = Trainer(_config(policy, tmp_path, reward=parity_reward, lora=lora))
    before = _weights(trainer)
    trainer.step()
    after = trainer.learner.model.state_dict()
    changed = {k for k, v in after.items() if not torch.equal(before[k], v)}
    assert changed and all("lora_" in k for k in changed)
    rollout = trainer.workers.workers[0].rollout.model.state_dict()
    assert all(torch.equal(rollout[k], after[k]) for k in changed)


def test_the_config_loads_from_yaml_and_wrong_fields_are_named(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("group_size: 8\nlearner: {lr: 3.0e-4}\ntask: {tokens: 300}\n")
    config = RLConfig.from_yaml(good)
    assert (config.group_size, config.learner.lr, config.task.tokens) == (8, 3e-4, 300)
    bad = tmp_path / "bad.yaml"
    bad.write_text("group_size: 1\nlearnr: {lr: 1}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: group_size: .*; learnr: Extra inputs"):
        RLConfig.from_yaml(bad)
    with pytest.raises(ConfigError, match="not valid YAML"):
        (tmp_path / "broken.yaml").write_text("steps: [1,\n")
        RLConfig.from_yaml(tmp_path / "broken.yaml")


def test_the_vllm_backend_without_vllm_installed_is_a_clear_config_error(policy, tmp_path):
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here: its backend is exercised by test_vllm_rollout.py")
    with pytest.raises(ConfigError, match="needs vLLM in this environment"):
        Trainer(_config(policy, tmp_path, rollout={"backend": "vllm"}))


def test_oracle_warm_start_on_suite_tasks_then_the_lora_adapter_is_saved_as_a_peft_folder(policy, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    config = _config(
        policy,
        tmp_path,
        task={"kind": ["niah_single_1", "two_hop"], "tokens": 300, "eval_samples": 2},
        reward="ruler_match_all",
        warm_start={"teacher": "oracle", "tasks": 4, "steps": 2, "batch_size": 2},
        lora={"rank": 2, "alpha": 4},
        steps=0,
        chunk_tokens=256,
        memory_tokens=96,
        answer_tokens=48,
    )
    trainer = Trainer(config)
    trained = {k: v.clone() for k, v in trainer.learner.model.state_dict().items() if "lora_B" in k}
    trainer.fit()
    adapter = tmp_path / "run" / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(policy)), str(adapter))
    after = {k: v for k, v in loaded.state_dict().items() if "lora_B" in k}
    assert any(not torch.equal(after[k], trained[k]) for k in trained)  # the warm start moved the adapters


def test_suite_tasks_for_training_and_evaluation_differ_in_seed_and_phrasing(policy, tmp_path):
    config = _config(policy, tmp_path, task={"kind": "niah_single_2", "tokens": 300})
    trainer = Trainer(config)
    (train, _), held_out = trainer.source.take(0, 3), trainer.source.held_out_tasks(3)
    assert {t.question for t in train}.isdisjoint({t.question for t in held_out})
    assert all("mentioned in the provided text" in t.question for t in held_out)
    assert not any("mentioned in the provided text" in t.question for t in train)


def test_an_unknown_task_family_in_the_config_is_named():
    with pytest.raises(ValueError, match="niah_single_9"):
        RLConfig.model_validate({"task": {"kind": ["niah_single_2", "niah_single_9"]}})


class _RecordingPool:
    """The real rollout pool, with vLLM's sleep and wake recorded instead of run (sleep mode needs a GPU)."""

    def __init__(self, pool, order):
        self.pool, self.order = pool, order

    def run(self, episodes, **options):
        self.order.append("run")
        return self.pool.run(episodes, **options)

    def sleep(self):
        self.order.append("sleep")

    def wake(self, tags=None):
        self.order.append(f"wake {tags}")

    def sync(self, weights, version):
        self.order.append("sync")
        self.pool.sync(weights, version)


class _RecordingLearner:
    def __init__(self, learner, order):
        self.learner, self.order = learner, order

    def update(self, calls, advantages):
        self.order.append("update")
        return self.learner.update(calls, advantages)

    def weights(self):
        return self.learner.weights()


def test_colocated_rollouts_sleep_while_the_learner_steps_and_wake_weights_before_the_sync(
    policy, parity_reward, tmp_path
):
    trainer = Trainer(_config(policy, tmp_path, reward=parity_reward))
    order, pool, learner = [], trainer.workers, trainer.learner
    trainer.workers, trainer.learner = _RecordingPool(pool, order), _RecordingLearner(learner, order)
    trainer.colocated = True
    trainer.step()
    assert order == ["run", "sleep", "update", "wake ['weights']", "sync", "wake ['kv_cache']"]
    trainer.workers, trainer.learner = pool, learner
