"""A rollout worker's sampling state: the quote policy's scores follow the synced weights, its draws follow the
worker's seed and resume exactly, and seeded generation leaves the process's torch generator alone."""

from __future__ import annotations

import pytest
import torch

from memagent_graph import MemAgentConfig
from memagent_graph.config import RetrySettings
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.nodes.quote.scoring import GainCache
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rl.learner import choice_logprobs
from memagent_graph.training.rollout.backends import Sampling, TransformersRollout
from memagent_graph.training.rollout.worker import Episode, RolloutWorker

QUOTE = MemAgentConfig(
    chunk_tokens=200, memory_tokens=60, answer_tokens=12, top_p=1.0, memory_policy="quote",
    quote_temperature=1.0, quote_min_gain=0.0, quote_prefilter=0, retries=RetrySettings(max_attempts=1),
)  # fmt: skip


@pytest.fixture(scope="module")
def tasks(policy_dir):
    tokenizer = HuggingFaceTokenizer(policy_dir / "tokenizer.json")
    needles = [needle_document(tokens=700, tokenizer=tokenizer, seed=seed) for seed in (4, 5, 6)]
    return [Task(n.question, n.text, [n.answer]) for n in needles]


def _worker(policy_dir, seed: int) -> RolloutWorker:
    return RolloutWorker(policy_dir, reading=QUOTE, seed=seed)


def _episodes(tasks, step: int) -> list[Episode]:
    return [Episode(f"s{step}-q{i}", f"s{step}-q{i}", task) for i, task in enumerate(tasks)]


def _draws(rollouts) -> list[list[tuple[int, ...]]]:
    """Each episode's drawn orders, in call order."""
    return [[tuple(call.choice.order) for call in rollout.calls] for rollout in rollouts]


class VersionedScorer:
    """Scores a passage by its length, times the policy version plus one: each version scores differently."""

    accepts_quote_from = False

    def __init__(self) -> None:
        self.policy_version = 0
        self.calls = 0

    def score_passages(self, question: str, passages):
        self.calls += 1
        return [float(len(p) * (self.policy_version + 1)) for p in passages]


def test_the_gain_cache_scores_again_under_a_new_policy_version():
    scorer = VersionedScorer()
    cache = GainCache(scorer)
    assert cache.gains("q", ["ab", "abcd"]) == [2.0, 4.0]
    assert cache.gains("q", ["ab", "abcd"]) == [2.0, 4.0] and scorer.calls == 1
    scorer.policy_version = 1
    assert cache.gains("q", ["ab", "abcd"]) == [4.0, 8.0]
    assert cache.surprise("q") == 0.0 and scorer.calls == 2


def test_after_a_weight_sync_a_workers_draws_are_scored_by_the_new_weights(policy_dir, tasks):
    worker = _worker(policy_dir, seed=3)
    episodes = _episodes(tasks[:1], 0)
    worker.run(episodes)
    noise, model = torch.Generator().manual_seed(0), worker.rollout.backend.model
    weights = {name: p.detach() + 0.05 * torch.randn(p.shape, generator=noise) for name, p in model.named_parameters()}
    worker.load_weights(weights, 1)
    [rollout] = worker.run(episodes)
    with torch.no_grad():
        recomputed = choice_logprobs(model, rollout.calls, pad_id=worker.rollout.tokenizer.pad_token_id)
    assert {call.policy_version for call in rollout.calls} == {1}
    assert recomputed.tolist() == pytest.approx([call.choice.logprob for call in rollout.calls], abs=1e-3)


def test_workers_with_different_seeds_draw_different_quote_choices(policy_dir, tasks):
    episodes = _episodes(tasks[:1], 0)
    first, second = (_draws(_worker(policy_dir, seed).run(episodes)) for seed in (1, 2))
    assert first != second


def test_concurrent_reads_draw_the_same_quote_choices_whatever_the_thread_timing(policy_dir, tasks):
    episodes = _episodes(tasks, 0)
    assert _draws(_worker(policy_dir, 1).run(episodes)) == _draws(_worker(policy_dir, 1).run(episodes))


def test_a_restored_sampling_state_draws_the_same_quote_choices_again(policy_dir, tasks):
    worker = _worker(policy_dir, seed=7)
    worker.run(_episodes(tasks, 0))
    state = worker.sampling_state()
    expected = _draws(worker.run(_episodes(tasks, 1)))
    resumed = _worker(policy_dir, seed=7)
    resumed.restore_sampling_state(state)
    assert _draws(resumed.run(_episodes(tasks, 1))) == expected


def _global_rng_state() -> torch.Tensor:
    torch.manual_seed(123)
    torch.rand(3)  # somewhere in its stream, not at a seed
    return torch.get_rng_state()


def test_a_rollout_generate_leaves_torchs_global_generator_alone_and_repeats_for_a_seed(policy_dir):
    prompts, sampling = [[5, 6, 7, 8], [9, 10]], Sampling(max_tokens=12, temperature=1.0)
    sampled = []
    for _ in range(2):
        rollout = TransformersRollout(str(policy_dir), seed=11)
        before = _global_rng_state()
        sampled.append([g.response_ids for g in rollout.generate(prompts, sampling)])
        assert torch.equal(torch.get_rng_state(), before)
        torch.rand(5)  # the next call samples the same whatever the process's generator did in between
        sampled.append([g.response_ids for g in rollout.generate(prompts, sampling)])
    assert sampled[0] == sampled[2] and sampled[1] == sampled[3] and sampled[0] != sampled[1]


def test_the_embedded_engines_seeded_sampling_leaves_torchs_global_generator_alone(policy_dir):
    from memagent_graph.integrations.models.embedded_chat import LocalChatModel

    model = LocalChatModel(model_path=str(policy_dir), temperature=1.0, max_tokens=12, seed=5, batch_wait_s=0.0)
    model.load()
    before = _global_rng_state()
    first = model.invoke("Tell me something.").content
    assert torch.equal(torch.get_rng_state(), before)
    torch.rand(5)
    assert model.invoke("Tell me something.").content == first
