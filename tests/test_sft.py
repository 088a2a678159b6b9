"""SFT by rejection sampling: a teacher's traces in the policy's tokens, filtered by reward, imitated."""

from __future__ import annotations

import copy

import pytest

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.integrations.cli import main
from memagent_graph.testing import RuleMemoryModel
from memagent_graph.training.data.tasks import needle_tasks
from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner
from memagent_graph.training.rl.tiny_policy import TINY_PROMPTS, build_tiny_policy
from memagent_graph.training.rollout.backends import TransformersRollout
from memagent_graph.training.rollout.traces import TraceCall, write_jsonl
from memagent_graph.training.sft.rejection_sampling import (
    fine_tune,
    oversample_new_notes,
    rejection_sample,
    teacher_traces,
    writes_new_notes,
)

pytestmark = [
    pytest.mark.usefixtures("restore_logging"),  # `main` configures the loggers
    pytest.mark.integration,  # not in the unit tier: fine-tunes models
]

READING = MemAgentConfig(prompts=TINY_PROMPTS, chunk_tokens=128, memory_tokens=16, answer_tokens=12, top_p=1.0)
TEACHER = RuleMemoryModel(nothing="none", answer_template="\\boxed{{{value}}}")


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    folder = build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0, hidden_size=32)
    return folder, HuggingFaceTokenizer(folder / "tokenizer.json"), TransformersRollout(str(folder))


@pytest.fixture(scope="module")
def traces(policy):
    folder, tokenizer, rollout = policy
    tasks = needle_tasks(6, tokens=200, tokenizer=tokenizer, chunk_tokens=128, value_kind="word", haystack="noise")
    return teacher_traces(TEACHER, rollout, tokenizer, tasks, reading=READING)


def test_teacher_replies_are_recorded_in_the_policys_tokens_and_scored(policy, traces):
    _, _, rollout = policy
    assert len({c.episode_id for c in traces}) == 6
    for call in traces:
        assert call.response_ids[-1] == rollout.tokenizer.eos_token_id and call.logprobs is None
        assert rollout.decode(call.response_ids) == call.text
    finals = [c for c in traces if c.node == "final_answer"]
    assert all(c.reward == 1.0 and c.text.startswith("\\boxed{") for c in finals)  # needles never straddle chunks


def test_rejection_sampling_keeps_only_episodes_that_reached_the_reward(traces):
    failed = [c.model_copy(update={"reward": 0.0}) if c.episode_id == "teacher-0" else c for c in traces]
    kept = rejection_sample(failed)
    assert {c.episode_id for c in kept} == {f"teacher-{i}" for i in range(1, 6)}


def _call(episode: str, index: int, text: str, node: str = "update_memory") -> TraceCall:
    return TraceCall(
        episode_id=episode, group_id=episode, call_index=index, node=node, prompt_ids=[1], response_ids=[2],
        logprobs=None, finish_reason="stop", policy_version=0, latency_s=0.0, text=text, reward=1.0,
    )  # fmt: skip


def test_calls_that_write_new_notes_are_the_updates_that_change_the_memory_to_something():
    texts = ["none", "none", "fact one", "fact one", "fact one\nfact two"]
    calls = [_call("a", i, text) for i, text in enumerate(texts)] + [_call("a", 5, "\\boxed{x}", "final_answer")]
    calls += [_call("b", 0, "fact one")]  # another episode: its first note is new
    flags = writes_new_notes(list(reversed(calls)), nothing="none")
    assert list(reversed(flags)) == [False, False, True, False, True, False, True]


def test_oversampling_repeats_new_notes_until_they_reach_the_share(traces):
    flags = writes_new_notes(traces, nothing="none")
    new_calls = {id(call) for call, flag in zip(traces, flags, strict=True) if flag}
    balanced = oversample_new_notes(list(reversed(traces)), nothing="none", share=0.5, seed=3)
    repeats = balanced[len(traces) :]
    assert repeats and len(new_calls) + len(repeats) >= len(traces) - len(new_calls)
    assert {id(call) for call in repeats} <= new_calls
    assert balanced == oversample_new_notes(list(reversed(traces)), nothing="none", share=0.5, seed=3)


def test_oversampling_refuses_a_share_outside_zero_to_one(traces):
    with pytest.raises(ConfigError, match="between 0 and 1"):
        oversample_new_notes(traces, nothing="none", share=1.0)


def test_rejection_sampling_refuses_traces_without_rewards(traces):
    with pytest.raises(ConfigError, match="no reward"):
        rejection_sample([c.model_copy(update={"reward": None}) for c in traces])


def test_fine_tuning_on_the_kept_traces_lowers_their_loss(policy, traces):
    _, _, rollout = policy
    learner = TorchLearner(copy.deepcopy(rollout.model), config=LearnerConfig(lr=1e-2), pad_id=0)
    history = fine_tune(learner, rejection_sample(traces), steps=20, batch_size=8, seed=0)
    assert history[-1]["loss"] < 0.6 * history[0]["loss"]


def test_memagent_train_sft_writes_a_fine_tuned_model(policy, traces, tmp_path, capsys):
    folder, _, _ = policy
    write_jsonl(traces, tmp_path / "traces.jsonl")
    code = main(["train", "sft", "--traces", str(tmp_path / "traces.jsonl"), "--policy", str(folder),
                 "--output", str(tmp_path / "sft"), "--steps", "3", "--lr", "1e-3"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and f"{len(traces)} calls of 6 episodes" in out and "step    3" in out
    assert (tmp_path / "sft" / "config.json").is_file() and (tmp_path / "sft" / "tokenizer.json").is_file()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["train", "sft", "--traces", "nowhere.jsonl", "--policy", ".", "--output", "x"], "no traces file"),
        (["train", "rl", "--config", "nowhere.yaml"], "cannot read training config"),
    ],
)
def test_train_commands_report_bad_input_in_one_line(args, says, capsys):
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1 and says in err and "Traceback" not in err
