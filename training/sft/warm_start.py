"""Warm starts: before RL, a teacher acts out the policy on tasks, only its verified calls are kept (rejection
sampling), and the policy takes supervised steps on them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rollout.backends import ChatTokens
from memagent_graph.training.rollout.traces import TraceCall
from memagent_graph.training.sft.oracle import OracleMemoryModel
from memagent_graph.training.sft.quote_oracle import oracle_traces
from memagent_graph.training.sft.rejection_sampling import (
    SupervisedLearner,
    fine_tune,
    oversample_new_notes,
    rejection_sample,
    teacher_traces,
)
from memagent_graph.training.sft.teachers import RuleMemoryModel


class WarmStart(BaseModel):
    """Supervised steps on teacher traces before RL (rejection sampling: only verified episodes are kept)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: int = Field(256, ge=1)
    teacher: Literal["rule", "oracle"] = Field(
        "rule", description="rule: copies needle-like facts; oracle: knows each task's evidence and answer."
    )
    steps: int = Field(100, ge=0)
    lr: float = Field(3e-3, gt=0)
    batch_size: int = Field(16, ge=1)
    new_notes_share: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="Repeat the calls that write new notes until they are this share of the SFT calls (most "
        "chunks hold nothing; without it a small policy learns never to write a fact down). None: as recorded.",
    )


def warm_start(
    settings: WarmStart,
    *,
    learner: SupervisedLearner,
    policy_tokens: ChatTokens,
    tokenizer: Tokenizer,
    tasks: Sequence[Task],
    reading: MemAgentConfig,
    reward: str,
    tiny_prompts: bool,
    seed: int,
    log: Callable[[str], None],
) -> dict[str, float]:
    """Teacher traces on ``tasks`` (read with ``reading``, scored with ``reward``), rejection-sampled, then
    ``settings.steps`` supervised steps of ``learner``; returns the last loss and the number of calls kept.
    For the quote policy the traces are the oracle's draws (`quote_oracle`: right by construction)."""
    if reading.memory_policy == "quote":
        kept = oracle_traces(tasks, policy_tokens=policy_tokens, tokenizer=tokenizer, reading=reading)
        log(f"warm start: {len(kept)} oracle draws of the quote policy; {settings.steps} SFT steps")
        return _fine_tune(settings, learner, kept, seed=seed, log=log)
    teacher: Any
    if settings.teacher == "oracle":
        teacher = OracleMemoryModel(tasks=tasks, prompts=reading.prompts)
    elif tiny_prompts:
        teacher = RuleMemoryModel(nothing="none", answer_template="\\boxed{{{value}}}")
    else:
        teacher = RuleMemoryModel()
    # the teacher writes every reply: the policy only tokenizes them
    calls = teacher_traces(teacher, policy_tokens, tokenizer, tasks, reading=reading, reward=reward)
    kept = rejection_sample(calls)
    log(f"warm start: {len(kept)} of {len(calls)} teacher calls verified; {settings.steps} SFT steps")
    if settings.new_notes_share is not None:
        verified = len(kept)
        kept = oversample_new_notes(kept, nothing=teacher.nothing, share=settings.new_notes_share, seed=seed)
        log(f"warm start: {len(kept) - verified} repeats of the calls that write new notes")

    return _fine_tune(settings, learner, kept, seed=seed, log=log)


def _fine_tune(
    settings: WarmStart,
    learner: SupervisedLearner,
    calls: Sequence[TraceCall],
    *,
    seed: int,
    log: Callable[[str], None],
) -> dict[str, float]:
    def report(step: int, stats: dict[str, float]) -> None:
        if (step + 1) % 10 == 0:
            log(f"warm start step {step + 1}/{settings.steps}: loss {stats['loss']:.4f}")

    history = fine_tune(learner, calls, steps=settings.steps, batch_size=settings.batch_size, seed=seed, on_step=report)
    return {"warm_start_loss": history[-1]["loss"] if history else 0.0, "warm_start_calls": float(len(calls))}
