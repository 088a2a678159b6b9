"""Training the quote policy: a rollout read records each draw (what was kept, which note answered) in the
policy's tokens, the learner recomputes the draw's log-probability exactly, and a step moves it."""

from __future__ import annotations

import copy

import pytest
import torch
from helpers import recorded_read

from memagent_graph import MemAgentConfig
from memagent_graph.config import RetrySettings
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.integrations.models.query_likelihood import PROMPT
from memagent_graph.state import RunSettings
from memagent_graph.training.data.task_suite import suite_task
from memagent_graph.training.rewards import REWARDS, register_reward
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner, choice_logprobs
from memagent_graph.training.rl.trainer import Trainer
from memagent_graph.training.rollout.traces import read_jsonl, write_jsonl
from memagent_graph.training.sft.quote_oracle import oracle_draws, oracle_traces

CONFIG = MemAgentConfig(
    chunk_tokens=300, memory_tokens=60, answer_tokens=12, top_p=1.0, memory_policy="quote",
    quote_temperature=1.0, quote_min_gain=0.0, quote_prefilter=0, retries=RetrySettings(max_attempts=1),
)  # fmt: skip


def _read(rollout, policy_dir, *, settings=None):
    recorder, result = recorded_read(rollout, policy_dir, config=CONFIG, tokens=900, settings=settings)
    return recorder.episode("episode-1"), result


@pytest.fixture(scope="module")
def draws(rollout, policy_dir):
    return _read(rollout, policy_dir)


def _learner(rollout):
    config = LearnerConfig(bf16_autocast=False, lr=1e-3)
    return TorchLearner(copy.deepcopy(rollout.model), config=config, pad_id=rollout.tokenizer.pad_token_id)


def test_a_sampled_quote_read_records_one_draw_per_chunk_and_one_for_the_answer(draws):
    calls, result = draws
    assert [c.node for c in calls] == ["update_memory"] * result.num_chunks + ["final_answer"]
    assert all(c.choice is not None and c.group_id == "question-9" for c in calls)
    assert calls[-1].choice.stop_gain is None and len(calls[-1].choice.order) == 1


def test_a_draw_records_the_scoring_prompts_of_the_candidates_it_drew(draws, rollout):
    calls, _ = draws
    drawn = [(call.choice, call.text.splitlines()) for call in calls if call.choice.order]
    assert drawn
    for choice, lines in drawn:
        prompts = [choice.candidate_ids[i] for i in choice.order]
        assert prompts == [rollout.encode(PROMPT.format(passage=line)) for line in lines]


def test_the_learner_recomputes_the_rollouts_log_probability_of_each_draw(draws, rollout):
    calls, _ = draws
    with torch.no_grad():
        recomputed = choice_logprobs(rollout.model, calls, pad_id=rollout.tokenizer.pad_token_id)
    assert recomputed.tolist() == pytest.approx([c.choice.logprob for c in calls], abs=1e-3)


def test_a_step_with_a_positive_advantage_makes_the_draws_more_likely(draws, rollout):
    calls, _ = draws
    learner = _learner(rollout)
    stats = learner.update(calls, [1.0] * len(calls))
    assert stats["logprob_gap"] < 1e-3 and stats["grad_norm"] > 0
    with torch.no_grad():
        after = choice_logprobs(learner.model, calls, pad_id=rollout.tokenizer.pad_token_id)
    assert float(after.sum()) > sum(c.choice.logprob for c in calls)


def test_draws_survive_a_jsonl_round_trip(draws, tmp_path):
    calls, _ = draws
    assert read_jsonl(write_jsonl(calls, tmp_path / "traces.jsonl")) == calls


def test_a_greedy_read_draws_nothing_to_learn_from(rollout, policy_dir):
    calls, result = _read(rollout, policy_dir, settings=RunSettings(quote_temperature=0.0))
    assert calls == [] and result.num_chunks > 1


@pytest.fixture
def answer_parity_reward():
    """A reward that varies with the answer drawn (an untrained tiny policy never answers right): the parity of
    its characters' sum."""
    register_reward("test_answer_parity")(lambda reply, golds: float(sum(map(ord, reply)) % 2))
    yield "test_answer_parity"
    del REWARDS["test_answer_parity"]


@pytest.mark.integration
def test_a_trainer_step_on_the_quote_policy_trains_its_draws(policy_dir, answer_parity_reward, tmp_path):
    config = RLConfig.model_validate({
        "policy": str(policy_dir), "prompts": "tiny", "memory_policy": "quote", "quote_min_gain": 0.0,
        "task": {"kind": "niah_multikey_1", "tokens": 600}, "chunk_tokens": 128, "memory_tokens": 40,
        "answer_tokens": 8, "group_size": 3, "questions_per_step": 2, "ray": False, "dynamic_sampling": False,
        "reward": answer_parity_reward, "learner": {"lr": 1e-3}, "output_dir": str(tmp_path / "run"),
        "save_traces": True, "seed": 1,
    })  # fmt: skip
    trainer = Trainer(config)  # several keys' needles: seed 1's draws keep different ones in a group (seed 0's agree)
    before = {k: v.clone() for k, v in trainer.learner.model.state_dict().items()}
    metrics = trainer.step()
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert traces and all(call.choice is not None for call in traces)
    assert metrics["calls_trained"] == len(traces) and metrics["policy_version"] == 1
    assert any(not torch.equal(before[k], v) for k, v in trainer.learner.model.state_dict().items())


@pytest.fixture
def recorded_replies():
    replies = []
    register_reward("test_recorded")(lambda reply, golds: replies.append(reply) or 0.0)
    yield replies
    del REWARDS["test_recorded"]


@pytest.mark.integration
def test_the_trainers_greedy_evaluation_scores_the_quote_policys_answers(policy_dir, recorded_replies, tmp_path):
    config = RLConfig.model_validate({
        "policy": str(policy_dir), "prompts": "tiny", "memory_policy": "quote", "quote_min_gain": 0.0,
        "chunk_tokens": 128, "memory_tokens": 40, "answer_tokens": 8, "ray": False, "reward": "test_recorded",
        "task": {"kind": "niah_single_2", "tokens": 300, "eval_samples": 2}, "output_dir": str(tmp_path / "run"),
    })  # fmt: skip
    trainer = Trainer(config)
    trainer.evaluate()  # greedy: no draw is recorded, the span answers are still scored
    documents = [task.document for task in trainer.source.held_out_tasks(2)]
    assert len(recorded_replies) == 2 and any(recorded_replies)
    assert all(reply in document for reply, document in zip(recorded_replies, documents, strict=True))


def test_the_oracle_draws_the_evidence_then_stops_and_answers_from_the_first_hop(policy_dir):
    tokenizer = HuggingFaceTokenizer(policy_dir / "tokenizer.json")
    task = suite_task("two_hop", 0, tokens=900, tokenizer=tokenizer, split="train")
    reading = CONFIG.model_copy(update={"chunk_tokens": 200})
    draws = oracle_draws(task, tokenizer=tokenizer, reading=reading, temperature=1.0)
    kept = [{draw.candidates[i] for i in draw.choice.order} for draw in draws[:-1]]
    assert all(draw.choice.stopped for draw in draws[:-1])
    assert set(task.evidence) == kept[-1]  # the second hop is drawn with the first kept
    assert draws[-1].candidates[draws[-1].choice.order[0]] == task.evidence[0]


def test_a_warm_start_on_the_oracle_draws_makes_them_more_likely(rollout, policy_dir):
    tokenizer = HuggingFaceTokenizer(policy_dir / "tokenizer.json")
    tasks = [suite_task("two_hop", 0, tokens=400, tokenizer=tokenizer, split="train")]
    calls = oracle_traces(tasks, policy_tokens=rollout, tokenizer=tokenizer, reading=CONFIG)
    learner = _learner(rollout)
    pad = rollout.tokenizer.pad_token_id
    with torch.no_grad():
        before = float(choice_logprobs(learner.model, calls, pad_id=pad).sum())
    for _ in range(2):
        learner.sft_update(calls)
    with torch.no_grad():
        assert float(choice_logprobs(learner.model, calls, pad_id=pad).sum()) > before


@pytest.mark.integration
def test_the_trainers_warm_start_on_the_quote_policy_fits_the_oracles_draws(policy_dir, tmp_path):
    config = RLConfig.model_validate({
        "policy": str(policy_dir), "prompts": "tiny", "memory_policy": "quote", "chunk_tokens": 128,
        "memory_tokens": 40, "answer_tokens": 8, "ray": False, "output_dir": str(tmp_path / "run"),
        "task": {"kind": "two_hop", "tokens": 400}, "warm_start": {"tasks": 2, "steps": 2, "batch_size": 4},
    })  # fmt: skip
    trainer = Trainer(config)
    before = {k: v.clone() for k, v in trainer.learner.model.state_dict().items()}
    stats = trainer.warm_start()
    assert stats["warm_start_calls"] > 2 and trainer.version == 1
    assert any(not torch.equal(before[k], v) for k, v in trainer.learner.model.state_dict().items())
