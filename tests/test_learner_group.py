"""The learner across ranks (Ray actors, gloo, a tiny Qwen2 on CPU): a 2-rank FSDP2 or DDP step equals the
single-process learner's on the same batch, also when the ranks get uneven micro-batch counts; its weights
gather whole for the rollout workers; a sharded checkpoint resumes onto another number of ranks, alone and
inside a training run; ranks or rollout workers that Ray cannot place refuse the run with the fix; and the
documented two-rank run of the example runs to the end on 2 CPUs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml
from transformers import AutoModelForCausalLM

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.cli import main
from memagent_graph.testing import sampled_calls
from memagent_graph.training.rewards import REWARDS, register_reward
from memagent_graph.training.rl.checkpoints import is_sharded
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner, frozen_copy
from memagent_graph.training.rl.learner_group import LearnerGroup, LearnerRankError, split_calls
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rl.trainer import Trainer
from memagent_graph.training.rollout.backends import TransformersRollout
from memagent_graph.training.rollout.weights import trainable_weights

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.usefixtures("local_ray")]

QUESTIONS = ["What is the magic number?", "Name a colour.", "Who wrote it?", "Where is it?", "Why?"]
ADVANTAGES = [1.0, -0.5, 0.25, -1.0, 0.5]
TOLERANCE = 1e-5  # fp32; the ranks sum the same terms in another order
# fp32 on every CPU (the ranks are compared with the single learner exactly); one test turns on bf16 params
EXAMPLE = Path(__file__).parent.parent / "examples" / "train_tiny.yaml"
DOCS = Path(__file__).parent.parent / "docs" / "training.md"
SETTINGS = {"lr": 1e-2, "micro_batch_size": 2, "cpus_per_worker": 0.5, "bf16_autocast": False, "param_dtype": "float32"}


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0, hidden_size=64)


@pytest.fixture(scope="module")
def calls(policy):
    return sampled_calls(TransformersRollout(str(policy), seed=3), QUESTIONS)


@pytest.fixture(scope="module")
def single(policy, calls):
    """The single-process learner's stats and weights after one step on the batch."""
    learner = _single_learner(policy)
    stats = learner.update(calls, ADVANTAGES)
    return stats, trainable_weights(learner.model)


def _single_learner(policy, weights=None, **settings) -> TorchLearner:
    """The single-process learner on the policy, or on ``weights`` (a group's, gathered whole)."""
    model = AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32)
    if weights is not None:
        model.load_state_dict(weights, strict=False)
    config = LearnerConfig(**{k: v for k, v in {**SETTINGS, **settings}.items() if k != "cpus_per_worker"})
    reference = frozen_copy(model) if config.kl_coef > 0 else None
    return TorchLearner(model, config=config, pad_id=model.config.pad_token_id or 0, reference=reference)


def _assert_same_step(stats, weights, single):
    expected_stats, expected_weights = single
    for key in ("loss", "grad_norm", "clip_fraction", "approx_kl", "entropy", "tokens", "logprob_gap"):
        assert stats[key] == pytest.approx(expected_stats[key], abs=TOLERANCE), key
    assert set(weights) == set(expected_weights)
    for name, tensor in expected_weights.items():
        torch.testing.assert_close(weights[name], tensor, atol=TOLERANCE, rtol=0, msg=name)


def test_five_calls_split_over_two_ranks_give_them_uneven_micro_batch_counts():
    assert split_calls(5, 2) == [range(0, 2), range(2, 5)]  # 1 and 2 micro-batches of 2
    assert split_calls(1, 2) == [range(0, 0), range(0, 1)]  # a rank may get none


def _assert_one_bundle_per_rank(group: LearnerGroup) -> None:
    import ray

    placed = ray.util.placement_group_table(group.placement)
    assert placed["strategy"] == "PACK" and placed["state"] == "CREATED"
    assert list(placed["bundles"].values()) == [{"CPU": 0.5}, {"CPU": 0.5}]


@pytest.fixture(scope="class")
def fsdp_start(policy, calls):
    """One 2-rank FSDP group (``SETTINGS``) and its first step on the batch (stats, weights), taken here on fresh
    weights, for the tests of `TestOneFSDPGroup`."""
    group = LearnerGroup(policy, config=LearnerConfig(**SETTINGS, workers=2, strategy="fsdp"))
    try:
        yield group, (group.update(calls, ADVANTAGES), group.weights())
    finally:
        group.close()


@pytest.fixture(scope="class")
def fsdp_group(fsdp_start):
    """`fsdp_start`'s group for the tests that take it in whatever state the one before left it: a supervised
    step from its current weights, a checkpoint written or read, and, last, a killed rank (which ends it)."""
    return fsdp_start[0]


@pytest.fixture(scope="class")
def one_rank_group(policy):
    """A 1-rank FSDP group, the other side of the checkpoint tests (a load replaces all of its state)."""
    group = LearnerGroup(policy, config=LearnerConfig(**SETTINGS, workers=1, strategy="fsdp"))
    yield group
    group.close()


class TestOneFSDPGroup:
    """Checks on one 2-rank FSDP group (and a 1-rank one for the checkpoints), in this order: a group costs two
    processes that import torch. Class-scoped: the ranks' CPUs are free again for the tests after the class."""

    def test_a_two_rank_fsdp_step_equals_the_single_learners_step(self, fsdp_start, single):
        group, (stats, weights) = fsdp_start
        _assert_one_bundle_per_rank(group)
        _assert_same_step(stats, weights, single)

    def test_a_two_rank_supervised_step_equals_the_single_learners(self, policy, calls, fsdp_group):
        learner = _single_learner(policy, fsdp_group.weights())  # a supervised step starts its own optimiser
        single = learner.supervised(lr=3e-3)
        expected = single.sft_update(calls), trainable_weights(learner.model)
        stats = fsdp_group.supervised(lr=3e-3).sft_update(calls)
        weights = fsdp_group.weights()
        assert stats["loss"] == pytest.approx(expected[0]["loss"], abs=TOLERANCE)
        assert stats["grad_norm"] == pytest.approx(expected[0]["grad_norm"], abs=TOLERANCE)
        for name, tensor in expected[1].items():
            torch.testing.assert_close(weights[name], tensor, atol=TOLERANCE, rtol=0, msg=name)

    @pytest.mark.parametrize(("writers", "readers"), [(2, 1), (1, 2)])
    def test_a_sharded_checkpoint_resumes_onto_another_rank_count(
        self, calls, fsdp_group, one_rank_group, tmp_path, writers, readers
    ):
        checkpoint = tmp_path / "learner"
        first, resumed = (fsdp_group, one_rank_group) if writers == 2 else (one_rank_group, fsdp_group)
        first.update(calls, ADVANTAGES)
        first.save(checkpoint)
        expected = first.update(calls, ADVANTAGES), first.weights()
        resumed.load(checkpoint)
        _assert_same_step(resumed.update(calls, ADVANTAGES), resumed.weights(), expected)

    def test_a_killed_rank_fails_the_step_with_the_way_to_resume(self, calls, fsdp_group):
        import ray

        group = fsdp_group  # its last test: the group ends here
        placement = group.placement
        ray.kill(group.ranks[1])
        with pytest.raises(LearnerRankError, match="resume the run from its last checkpoint"):
            group.update(calls, ADVANTAGES)
        assert group.ranks == []  # the surviving rank was stopped too: it would wait for the lost one
        assert ray.util.placement_group_table(placement)["state"] == "REMOVED"


@pytest.fixture(scope="class")
def ddp_group(policy):
    """A 2-rank DDP group with a KL penalty (its reference is the starting policy: 0 KL on the first step)."""
    group = LearnerGroup(policy, config=LearnerConfig(**SETTINGS, kl_coef=0.5, workers=2, strategy="ddp"))
    yield group
    group.close()


class TestOneDDPGroup:
    """A DDP group's first step, then its KL reference moved (the collective is the same under FSDP)."""

    def test_a_two_rank_ddp_step_equals_the_single_learners_step(self, policy, calls, ddp_group):
        learner = _single_learner(policy, kl_coef=0.5)
        expected = learner.update(calls, ADVANTAGES), trainable_weights(learner.model)
        _assert_one_bundle_per_rank(ddp_group)
        stats = ddp_group.update(calls, ADVANTAGES)
        _assert_same_step(stats, ddp_group.weights(), expected)
        assert stats["kl"] == pytest.approx(expected[0]["kl"], abs=TOLERANCE)

    def test_anchoring_moves_every_ranks_kl_reference_to_the_current_policy(self, calls, ddp_group):
        ddp_group.supervised(lr=3e-3).sft_update(calls)  # a warm start moves the policy from the reference
        before = ddp_group.update(calls, ADVANTAGES)
        ddp_group.anchor_reference()
        after = ddp_group.update(calls, ADVANTAGES)
        assert before["kl"] > 1e-4 and after["kl"] < 1e-9


def test_bfloat16_mixed_precision_keeps_the_step_close_to_the_float32_one(policy, calls, single):
    config = LearnerConfig(**{**SETTINGS, "param_dtype": "bfloat16"}, workers=2, strategy="fsdp")
    group = LearnerGroup(policy, config=config)
    try:
        stats = group.update(calls, ADVANTAGES)
    finally:
        group.close()
    expected = single[0]
    assert stats["loss"] == pytest.approx(expected["loss"], abs=0.02)  # bf16 rounding, not a different step
    assert stats["grad_norm"] == pytest.approx(expected["grad_norm"], rel=0.05)
    assert stats["loss"] != expected["loss"]  # it did compute in bfloat16


def test_mixed_precision_without_fsdp_is_refused():
    with pytest.raises(ValueError, match="FSDP2's mixed precision"):
        LearnerConfig(workers=2, strategy="ddp", param_dtype="bfloat16")


def _run(policy, folder, *, workers: int, strategy: str = "fsdp") -> RLConfig:
    learner = {**SETTINGS, "lr": 1e-3, "workers": workers, "strategy": strategy}
    return RLConfig.model_validate(
        {
            "policy": str(policy), "prompts": "tiny", "chunk_tokens": 128, "memory_tokens": 12, "answer_tokens": 8,
            "group_size": 2, "questions_per_step": 2, "ray": False, "dynamic_sampling": False,
            "reward": "test_length_parity", "learner": learner, "output_dir": str(folder), "seed": 5,
        }
    )  # fmt: skip


@pytest.fixture(scope="module")
def parity_reward():
    """A reward that varies with the policy's output (an untrained tiny policy never answers right)."""
    register_reward("test_length_parity")(lambda reply, golds: float(len(reply) % 2))
    yield
    del REWARDS["test_length_parity"]


@dataclass(frozen=True)
class TwoRankRun:
    """A training run on two FSDP ranks: a step, a checkpoint, a second step, and what was seen on the way."""

    first: dict[str, float]
    rollout_weights: dict[str, torch.Tensor]  # the rollout worker's, after the first step's sync
    learner_weights: dict[str, torch.Tensor]  # the ranks', gathered whole, as the checkpoint saved them
    checkpoint: Path
    second: dict[str, float]


@pytest.fixture(scope="module")
def two_rank_run(policy, parity_reward, tmp_path_factory) -> TwoRankRun:
    folder = tmp_path_factory.mktemp("two-rank-run")
    trainer = Trainer(_run(policy, folder / "run", workers=2))
    try:
        first = trainer.step()
        [worker] = trainer.workers.workers
        rollout = {name: tensor.clone() for name, tensor in worker.rollout.model.state_dict().items()}
        trainer.save(folder / "run" / "checkpoint")
        saved = trainer.learner.weights()
        return TwoRankRun(first, rollout, saved, folder / "run" / "checkpoint", second=trainer.step())
    finally:
        trainer.close()


def test_a_run_on_two_fsdp_ranks_syncs_its_rollouts_and_resumes_in_one_process(policy, two_rank_run, tmp_path):
    run = two_rank_run
    for name, tensor in run.learner_weights.items():
        assert torch.equal(run.rollout_weights[name], tensor), name
    assert run.first["calls_trained"] > 0 and run.first["policy_version"] == 1
    assert run.second["logprob_gap"] < 1e-4  # the second step sampled from the weights the ranks synced
    resumed = Trainer(_run(policy, tmp_path / "one", workers=1, strategy="single"))
    try:
        resumed.restore(run.checkpoint)
        for name, tensor in resumed.learner.weights().items():
            torch.testing.assert_close(tensor, run.learner_weights[name], atol=0, rtol=0, msg=name)
        again = resumed.step()
    finally:
        resumed.close()
    assert again["calls_trained"] == run.second["calls_trained"]
    for key in ("reward", "loss", "grad_norm"):
        assert again[key] == pytest.approx(run.second[key], abs=TOLERANCE), key


@pytest.mark.usefixtures("restore_logging")  # `main` configures the loggers
def test_export_writes_a_sharded_checkpoints_policy_as_a_hugging_face_folder(two_rank_run, tmp_path):
    output = tmp_path / "hf"
    assert main(["train", "export", "--checkpoint", str(two_rank_run.checkpoint), "--output", str(output)]) == 0
    exported = AutoModelForCausalLM.from_pretrained(str(output), local_files_only=True)
    for name, tensor in trainable_weights(exported).items():
        torch.testing.assert_close(tensor, two_rank_run.learner_weights[name], atol=0, rtol=0, msg=name)
    assert (output / "tokenizer.json").is_file()


LORA = {"rank": 4, "alpha": 8, "target_modules": ("q_proj", "v_proj")}


def _single_lora_step(policy, calls, *, seed: int = 0):
    """The single learner's LoRA step, its adapters built from the same seed as the ranks'."""
    from memagent_graph.training.rollout.weights import with_lora

    torch.manual_seed(seed)
    model = with_lora(AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32), **LORA)
    config = LearnerConfig(**{k: v for k, v in SETTINGS.items() if k != "cpus_per_worker"})
    stats = TorchLearner(model, config=config, pad_id=0).update(calls, ADVANTAGES)
    return stats, trainable_weights(model)


@pytest.fixture(scope="module")
def single_lora(policy, calls):
    single = _single_lora_step(policy, calls)
    assert single[1] and all("lora_" in name for name in single[1])  # only the adapters train
    return single


@pytest.fixture(scope="class")
def lora_fsdp_start(policy, calls):
    """A 2-rank FSDP group training LoRA adapters and its first step (stats, weights), taken on fresh adapters."""
    group = LearnerGroup(policy, config=LearnerConfig(**SETTINGS, workers=2, strategy="fsdp"), lora=LORA)
    try:
        yield group, (group.update(calls, ADVANTAGES), group.weights())
    finally:
        group.close()


class TestOneLoRAGroup:
    """Checks on one 2-rank FSDP group training LoRA adapters: its first step, then its PEFT folder."""

    def test_two_fsdp_ranks_training_lora_adapters_take_the_single_learners_step(self, lora_fsdp_start, single_lora):
        _assert_same_step(*lora_fsdp_start[1], single_lora)

    def test_a_lora_group_saves_its_adapters_as_a_peft_folder(self, policy, calls, lora_fsdp_start, tmp_path):
        from peft import PeftModel

        group = lora_fsdp_start[0]  # in whatever state the test before left it
        group.update(calls, ADVANTAGES)
        expected = group.weights()
        folder = group.save_adapter(tmp_path / "adapter", base_model="tiny-base")
        base = AutoModelForCausalLM.from_pretrained(str(policy), dtype=torch.float32)
        loaded = PeftModel.from_pretrained(base, str(folder))
        assert loaded.peft_config["default"].base_model_name_or_path == "tiny-base"
        for name, tensor in expected.items():
            torch.testing.assert_close(loaded.state_dict()[name], tensor, atol=0, rtol=0, msg=name)


def test_two_ddp_ranks_training_lora_adapters_take_the_single_learners_step(policy, calls, single_lora):
    group = LearnerGroup(policy, config=LearnerConfig(**SETTINGS, workers=2, strategy="ddp"), lora=LORA)
    try:
        _assert_same_step(group.update(calls, ADVANTAGES), group.weights(), single_lora)
    finally:
        group.close()


def test_ranks_that_the_cluster_cannot_place_are_refused_with_what_it_has():
    refused = r"cannot place 2 learner ranks of \{'CPU': 64.0\} each within 1 s: .* available of \{'CPU': 2.0\}; lower"
    config = LearnerConfig(workers=2, strategy="fsdp", cpus_per_worker=64)
    with pytest.raises(ConfigError, match=refused + " learner.workers"):
        LearnerGroup("unused", config=config, placement_timeout_s=1.0)


def test_a_run_whose_rollout_workers_find_no_cpu_left_is_refused_with_the_fix(policy, tmp_path):
    import ray

    # the learner's rank holds both CPUs of the cluster: nothing is left for the rollout workers
    learner = {**SETTINGS, "workers": 1, "strategy": "fsdp", "cpus_per_worker": 2.0}
    config = _run(policy, tmp_path, workers=1).model_copy(
        update={"ray": True, "rollout_workers": 2, "placement_timeout_s": 1.0, "learner": LearnerConfig(**learner)}
    )
    refused = r"cannot place 2 rollout workers of \{'CPU': 0.01\} each within 1 s: the cluster has \{'CPU': 0.0\} "
    with pytest.raises(ConfigError, match=refused + r"available of \{'CPU': 2.0\}; lower rollout_workers .*cpus_per"):
        Trainer(config)
    assert {group["state"] for group in ray.util.placement_group_table().values()} == {"REMOVED"}  # the rank's too


DOCUMENTED = re.search(r"## Scaling out the learner\n.*?```yaml\n(.*?)```", DOCS.read_text(), re.S)[1]
"""docs/training.md's change to examples/train_tiny.yaml that puts the learner on two FSDP ranks."""


@pytest.mark.integration  # the training command, as a user runs it
@pytest.mark.usefixtures("restore_logging")  # `main` configures the loggers
def test_the_documented_two_rank_run_of_the_example_runs_to_the_end_on_two_cpus(tmp_path, capsys):
    # this module's Ray cluster has the 2 CPUs the example hung on: two rollout workers beside two ranks
    example = {**yaml.safe_load(EXAMPLE.read_text()), **yaml.safe_load(DOCUMENTED)}
    smaller = {  # every part of the run, once: warm start, evaluation, one RL step, weight sync, checkpoint
        "steps": 1, "questions_per_step": 2, "group_size": 2, "eval_every": 0, "dynamic_sampling": False,
        "task": {**example["task"], "eval_samples": 2}, "warm_start": {**example["warm_start"], "tasks": 8, "steps": 2},
    }  # fmt: skip
    config = tmp_path / "train_tiny_fsdp.yaml"
    config.write_text(yaml.safe_dump({**example, **smaller}))
    assert main(["train", "rl", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    [step] = [line for line in lines if "reward" in line]
    assert step["calls_trained"] > 0 and step["policy_version"] == 2  # the warm start, then the RL step
    assert len([line for line in lines if "eval_reward" in line]) == 2
    assert is_sharded(tmp_path / "run" / "checkpoint" / "learner")
    assert "on 2 rollout worker(s)" in capsys.readouterr().out


def test_cpu_offload_on_cpu_ranks_is_refused():
    with pytest.raises(ConfigError, match="needs device: cuda"):
        LearnerGroup("unused", config=LearnerConfig(workers=2, strategy="fsdp", offload=True))
