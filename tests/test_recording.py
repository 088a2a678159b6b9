"""The recording policy: the real graph's calls recorded as token-exact traces a learner can train on."""

from __future__ import annotations

import pytest
import torch
from helpers import recorded_read

from memagent_graph import MemAgentConfig
from memagent_graph.config import RetrySettings
from memagent_graph.errors import ConfigError
from memagent_graph.training.rl.learner import token_logprobs
from memagent_graph.training.rollout.recording import RecordingChatModel
from memagent_graph.training.rollout.traces import TraceRecorder, read_jsonl, read_parquet, write_jsonl, write_parquet

# rollouts record what the policy did: an empty memory is an outcome to learn from, not a fault to retry
CONFIG = MemAgentConfig(
    chunk_tokens=400, memory_tokens=24, answer_tokens=12, temperature=0.7, top_p=1.0,
    retries=RetrySettings(max_attempts=1),
)  # fmt: skip


@pytest.fixture(scope="module")
def recorded(rollout, policy_dir):
    return recorded_read(rollout, policy_dir, config=CONFIG, tokens=1000)


def test_every_call_of_the_episode_is_recorded_in_order_with_its_node(recorded):
    recorder, result = recorded
    calls = recorder.episode("episode-1")
    assert [c.call_index for c in calls] == list(range(result.num_chunks + 1))
    assert [c.node for c in calls] == ["update_memory"] * result.num_chunks + ["final_answer"]
    assert {(c.group_id, c.policy_version) for c in calls} == {("question-9", 0)}


def test_recorded_tokens_are_the_chat_template_ids_and_the_sampled_ids(recorded, rollout):
    recorder, _ = recorded
    for call in recorder.calls:
        assert call.prompt_ids[-3:] == rollout.tokenizer.encode("<|im_start|>assistant\n")[-3:]
        assert rollout.decode(call.response_ids) == call.text
        assert len(call.logprobs) == len(call.response_ids) > 0
        ends_with_eos = call.response_ids[-1] == rollout.tokenizer.eos_token_id
        assert call.finish_reason == ("stop" if ends_with_eos else "length")


def test_learner_logprobs_match_rollout_logprobs_at_the_sampling_temperature(recorded, rollout):
    recorder, _ = recorded
    with torch.no_grad():
        for call in recorder.calls:
            learner = token_logprobs(rollout.model, call.prompt_ids, call.response_ids, temperature=0.7)
            assert learner.tolist() == pytest.approx(call.logprobs, abs=2e-4)


def test_traces_round_trip_through_jsonl_and_parquet(recorded, tmp_path):
    recorder, _ = recorded
    assert read_jsonl(write_jsonl(recorder.calls, tmp_path / "t.jsonl")) == recorder.calls
    assert read_parquet(write_parquet(recorder.calls, tmp_path / "t.parquet")) == recorder.calls


def test_training_rollouts_refuse_top_p_sampling(rollout):
    model = RecordingChatModel(rollout=rollout, recorder=TraceRecorder())
    with pytest.raises(ConfigError, match="top_p=1.0"):
        model.invoke("hello", top_p=0.95)
