"""Test doubles for tests, examples and benchmarks; no production module imports this package.

`RuleMemoryModel` (a deterministic rule-following policy) and `train_bpe_tokenizer` (a BPE tokenizer trained on
the spot) live with the training code that also uses them; `sampled_calls` records a learner's batch;
`simulated_server` is a loopback OpenAI-compatible server with fault injection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memagent_graph.training.rl.tiny_policy import train_bpe_tokenizer
from memagent_graph.training.sft.teachers import FACT_PATTERN, RuleMemoryModel, ScriptedChatModel

if TYPE_CHECKING:
    from memagent_graph.training.rollout.backends import RolloutBackend
    from memagent_graph.training.rollout.traces import TraceCall

__all__ = ["FACT_PATTERN", "RuleMemoryModel", "ScriptedChatModel", "sampled_calls", "train_bpe_tokenizer"]


def sampled_calls(rollout: RolloutBackend, questions: Sequence[str], *, max_tokens: int = 12) -> list[TraceCall]:
    """One recorded call per question, sampled at temperature 1 by ``rollout`` (a learner's training batch)."""
    from memagent_graph.training.rollout.backends import Sampling
    from memagent_graph.training.rollout.traces import TraceRecorder

    recorder = TraceRecorder()
    prompts = [rollout.prompt_ids([{"role": "user", "content": question}]) for question in questions]
    generations = rollout.generate(prompts, Sampling(max_tokens, 1.0))
    for index, (prompt, generation) in enumerate(zip(prompts, generations, strict=True)):
        recorder.record(
            episode_id=f"e{index}", group_id="g", node="update_memory", prompt_ids=prompt,
            response_ids=generation.response_ids, logprobs=generation.logprobs,
            finish_reason=generation.finish_reason, policy_version=0, latency_s=0.0, text="",
        )  # fmt: skip
    return recorder.calls
