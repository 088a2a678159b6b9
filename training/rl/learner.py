"""The learner: one policy-gradient step from recorded calls, in plain torch (AdamW, micro-batches, clipping).

Every recorded call is a (prompt ids, response ids, rollout log-probabilities) row with its advantage.
Rows are packed into micro-batches; the loss is summed over response tokens (EOS included, padding
excluded) and divided by the token count of the *whole* step, so how the step is cut into micro-batches
never changes the gradient. `Learner` is what the trainer drives: this process's `TorchLearner`, or a
`LearnerGroup` of ranks.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol, runtime_checkable

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.query_likelihood import query_log_likelihoods
from memagent_graph.precision import Bf16Setting, resolve_bf16
from memagent_graph.training.rl.algorithms import (
    Aggregation,
    PolicyLoss,
    entropy_from_logits,
    plackett_luce_logprob,
    policy_loss,
    truncated_importance_weights,
)
from memagent_graph.training.rollout.traces import TraceCall
from memagent_graph.training.rollout.weights import load_trainable_weights, trainable_weights

if TYPE_CHECKING:
    from memagent_graph.training.sft.rejection_sampling import SupervisedLearner


class LearnerConfig(BaseModel):
    """The learner's optimiser and objective (`RLConfig.learner`, the ``learner:`` block of a run's YAML)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lr: float = Field(1e-5, gt=0)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    micro_batch_size: int = Field(8, ge=1)
    max_tokens_per_micro_batch: int | None = Field(None, ge=1)
    """A token budget per micro-batch (rows x longest row, padding included): calls are packed by length,
    longest first, so long chunks and short answers do not share a padded batch. None: ``micro_batch_size``
    calls in order."""
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = Field(0.0, ge=0)
    """Weight of the k3 KL penalty to the reference policy (the policy RL starts from: after the warm start, if
    any); 0 skips it."""
    loss_mode: Aggregation = "token-mean"
    rollout_correction: Literal["none", "tis"] = "none"
    """``tis``: truncated importance sampling for rollouts sampled by another engine (vLLM in bf16): the clip
    ratio is taken against the learner's own log-probs before the step, and each token's loss is weighted by
    min(exp(learner - rollout log-prob), ``tis_cap``). ``none``: the ratio is taken against the rollout's."""
    tis_cap: float = Field(2.0, gt=0)
    bf16_autocast: Bf16Setting = "auto"
    """bf16 autocast of the forward pass (weights and optimiser stay fp32). ``auto``: where the CPU computes
    bf16 natively (AVX512-BF16 or AMX), fp32 elsewhere."""
    workers: int = Field(1, ge=1)
    """Learner ranks (Ray actors forming one torch.distributed group); 1 with ``strategy: single`` learns in
    the trainer's process."""
    strategy: Literal["single", "fsdp", "ddp"] = "single"
    """``fsdp``: FSDP2 shards the policy per decoder layer; ``ddp``: every rank holds all of it."""
    param_dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    """FSDP2 mixed precision (``strategy: fsdp``): bfloat16 gathers, forward and backward; gradients are
    reduced and the optimiser steps in float32. ``auto``: bfloat16 where it is native (as ``bf16_autocast``)
    with ``strategy: fsdp``, float32 otherwise."""
    offload: bool = False
    """FSDP2 on GPU ranks: keep parameters, gradients and optimiser state on the CPU between uses (torch's
    ``CPUOffloadPolicy``; CPU ranks refuse it)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory for long chunks, ~30% more compute)."""
    cpus_per_worker: float = Field(0.0, ge=0)
    """Ray CPUs each learner rank reserves. Rollouts and learning take turns, so by default the ranks reserve
    none and share the rollout actors' CPUs (a reservation the machine cannot meet would wait forever)."""

    @model_validator(mode="after")
    def _one_rank_learns_alone(self) -> LearnerConfig:
        if self.strategy == "single" and self.workers > 1:
            raise ValueError(f"workers: {self.workers} needs strategy fsdp or ddp (single is one process)")
        if self.param_dtype == "bfloat16" and self.strategy != "fsdp":
            raise ValueError(f"param_dtype {self.param_dtype} is FSDP2's mixed precision: use strategy fsdp")
        return self

    def fsdp_param_dtype(self, *, device: str = "cpu") -> str:
        """FSDP2's parameter dtype on ``device`` (``param_dtype`` with ``auto`` resolved)."""
        setting = "auto" if self.param_dtype == "auto" else self.param_dtype == "bfloat16"
        bf16 = resolve_bf16(setting, what="learner.param_dtype bfloat16", device=device)
        return "bfloat16" if bf16 else "float32"


@runtime_checkable
class Learner(Protocol):
    """What the trainer drives, implemented by `TorchLearner` (one process) and `LearnerGroup` (Ray ranks)."""

    def update(self, calls: Sequence[TraceCall], advantages: Sequence[float]) -> dict[str, float]:
        """One optimiser step on ``calls`` (one advantage per call); the step's loss, grad norm and stats."""
        ...

    def supervised(self, *, lr: float) -> SupervisedLearner:
        """Supervised steps on this policy with their own optimiser at ``lr`` (the warm start)."""
        ...

    def anchor_reference(self) -> None:
        """Make the KL reference the policy as it is now (no-op without a KL penalty)."""
        ...

    def weights(self) -> dict[str, torch.Tensor]:
        """The trainable weights, whole, on CPU: what the rollout workers load."""
        ...

    def save(self, folder: str | Path) -> None:
        """Checkpoint the policy, optimiser and RNG in ``folder``."""
        ...

    def load(self, folder: str | Path) -> None:
        """Continue from a checkpoint written by `save`."""
        ...

    def save_adapter(self, folder: str | Path, *, base_model: str | None = None) -> Path:
        """The LoRA adapters as a peft folder (``base_model`` names the model they adapt)."""
        ...

    def close(self) -> None:
        """Release processes and process groups (nothing to do in one process)."""
        ...


@dataclass(frozen=True)
class Packed:
    """Micro-batch tensors: ``input_ids``/``attention_mask`` (rows, length) and, aligned on response tokens
    (rows, longest response), ``response_ids``, ``response_mask`` and the rollout ``old_logprobs``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_lengths: list[int]
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    old_logprobs: torch.Tensor

    def to(self, device: torch.device) -> Packed:
        """These tensors on ``device``."""
        return dataclasses.replace(
            self,
            **{
                f.name: getattr(self, f.name).to(device) for f in dataclasses.fields(self) if f.name != "prompt_lengths"
            },
        )


def pack(calls: Sequence[TraceCall], *, pad_id: int) -> Packed:
    """Right-pad prompt+response rows; align response tokens (EOS included) and their rollout log-probs."""
    width = max(len(c.prompt_ids) + len(c.response_ids) for c in calls)
    longest = max(len(c.response_ids) for c in calls)
    ids, attention, responses, masks, old = [], [], [], [], []
    for call in calls:
        row = call.prompt_ids + call.response_ids
        ids.append(row + [pad_id] * (width - len(row)))
        attention.append([1] * len(row) + [0] * (width - len(row)))
        gap = longest - len(call.response_ids)
        responses.append(call.response_ids + [pad_id] * gap)
        masks.append([1] * len(call.response_ids) + [0] * gap)
        old.append(list(call.logprobs or [0.0] * len(call.response_ids)) + [0.0] * gap)
    return Packed(
        input_ids=torch.tensor(ids),
        attention_mask=torch.tensor(attention),
        prompt_lengths=[len(c.prompt_ids) for c in calls],
        response_ids=torch.tensor(responses),
        response_mask=torch.tensor(masks, dtype=torch.float32),
        old_logprobs=torch.tensor(old, dtype=torch.float32),
    )


def response_logits(model: Any, packed: Packed) -> torch.Tensor:
    """The logits that predicted each response token: (rows, longest response, vocab), zeros past a row's end.

    Only those positions go through the LM head (transformers' per-row ``logits_to_keep``): the prompt's logits
    are never used, and on a small policy with a large vocabulary the head is most of a step's work.
    """
    width, longest = packed.input_ids.shape[1], packed.response_ids.shape[1]
    starts = torch.tensor([start - 1 for start in packed.prompt_lengths])
    positions = (starts[:, None] + torch.arange(longest)).to(packed.input_ids.device)
    inside = positions < width  # a row whose prompt is long and response short ends before the longest response
    keep = positions.clamp(max=width - 1)
    logits = model(input_ids=packed.input_ids, attention_mask=packed.attention_mask, logits_to_keep=keep).logits
    return torch.where(inside[..., None], logits, torch.zeros((), dtype=logits.dtype, device=logits.device)).float()


@dataclass(frozen=True)
class StepShare:
    """One rank's part of a step split across ranks: the whole step's response tokens and calls (the loss
    denominators), the micro-batches every rank runs (collectives need each rank in each one), the rank count
    (gradient sync averages over it) and a call to run at zero weight once this rank's own calls are done."""

    total_tokens: float
    total_calls: int
    micro_batches: int
    ranks: int
    filler: TraceCall | None

    @classmethod
    def whole(cls, calls: Sequence[TraceCall], *, config: LearnerConfig) -> StepShare:
        """The whole step on one rank."""
        return cls(
            total_tokens=float(sum(step_units(c) for c in calls)),
            total_calls=len(calls),
            micro_batches=len(micro_batches(calls, config=config)),
            ranks=1,
            filler=None,
        )


def step_units(call: TraceCall) -> int:
    """What a call adds to a step's loss denominator: its response tokens, or 1 for a quote-policy draw."""
    return 1 if call.choice is not None else len(call.response_ids)


def micro_batches(calls: Sequence[TraceCall], *, config: LearnerConfig) -> list[list[int]]:
    """The indices of ``calls`` in each micro-batch: ``micro_batch_size`` in order, or with
    ``max_tokens_per_micro_batch`` packed longest first under the budget (a call over it alone)."""
    size, budget = config.micro_batch_size, config.max_tokens_per_micro_batch
    if budget is None:
        return [list(range(start, min(start + size, len(calls)))) for start in range(0, len(calls), size)]
    lengths = [len(c.prompt_ids) + len(c.response_ids) for c in calls]
    batches: list[list[int]] = []
    for index in sorted(range(len(calls)), key=lambda i: -lengths[i]):
        batch = batches[-1] if batches else None  # longest first: the batch's first call sets its width
        if batch is None or len(batch) == size or (len(batch) + 1) * lengths[batch[0]] > budget:
            batches.append([index])
        else:
            batch.append(index)
    return batches


class _Part(NamedTuple):
    """One micro-batch's calls of one kind (generated, or quote-policy draws), their advantages, and the pass's
    weight (0: a pass on the filler, `TorchLearner._passes`)."""

    rows: list[TraceCall]
    advantages: list[float]
    weight: float


class TorchLearner:
    """AdamW on a Hugging Face causal LM (optionally a peft LoRA model: only trainable weights are updated)."""

    def __init__(
        self,
        model: Any,
        *,
        config: LearnerConfig | None = None,
        pad_id: int = 0,
        temperature: float = 1.0,
        reference: Any = None,
        device: str | torch.device = "cpu",
    ):
        """``temperature`` is the rollouts' sampling temperature (log-probabilities come from ``logits /
        temperature``); ``reference`` is the frozen model the KL penalty compares with (needed when
        ``config.kl_coef > 0``); the model, the reference and every batch live on ``device``."""
        self.device = torch.device(device)
        self.model, self.config, self.pad_id = model.to(self.device), config or LearnerConfig(), pad_id
        self.reference = None if reference is None else reference.to(self.device)
        self.temperature = temperature
        self.autocast = resolve_bf16(self.config.bf16_autocast, what="learner.bf16_autocast", device=self.device.type)
        if self.config.kl_coef > 0 and reference is None:
            raise ConfigError(
                f"learner.kl_coef={self.config.kl_coef} needs a reference model to compare with; "
                "pass reference= (the Trainer keeps a frozen copy of the starting policy) or set kl_coef: 0"
            )
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(trainable, lr=self.config.lr, weight_decay=self.config.weight_decay)

    def _forward(self, calls: Sequence[TraceCall]) -> tuple[Packed, torch.Tensor, torch.Tensor]:
        self.model.train()
        packed = pack(list(calls), pad_id=self.pad_id).to(self.device)
        with self._autocast():
            logits = response_logits(self.model, packed) / self.temperature
        logprobs = torch.log_softmax(logits, -1).gather(-1, packed.response_ids[..., None]).squeeze(-1)
        return packed, logits, logprobs

    def backward(
        self, calls: Sequence[TraceCall], advantages: Sequence[float], *, share: StepShare | None = None
    ) -> dict[str, float]:
        """Accumulate the step's gradient over micro-batches (no optimiser step); return the loss and stats.

        With ``share``, ``calls`` are this rank's part of a step split across ranks (`StepShare`): the loss is
        normalised by the whole step's tokens, and the stats are this rank's parts of the step's (they add up).
        """
        share = share or StepShare.whole(calls, config=self.config)
        stats = {"loss": 0.0, "clip_fraction": 0.0, "approx_kl": 0.0, "kl": 0.0, "entropy": 0.0}
        stats["tokens"] = share.total_tokens
        stats["logprob_gap"] = 0.0  # the largest |learner - rollout| log-prob of a sampled token, before the step
        for indices, rows, weight in self._passes(calls, share):
            row_advantages = [advantages[i] for i in indices] if weight else [0.0]
            for is_choice in (False, True):
                part = [
                    (row, a)
                    for row, a in zip(rows, row_advantages, strict=True)
                    if (row.choice is not None) == is_choice
                ]
                if part:
                    run = self._choice_pass if is_choice else self._token_pass
                    run(_Part([row for row, _ in part], [a for _, a in part], weight), share=share, stats=stats)
        return stats

    def _token_pass(self, part: _Part, *, share: StepShare, stats: dict[str, float]) -> None:
        """Accumulate the gradient of one micro-batch's generated calls; add to ``stats``."""
        config, total_tokens = self.config, share.total_tokens
        packed, logits, logprobs = self._forward(part.rows)
        reference = self._reference_logprobs(packed) if config.kl_coef > 0 else None
        sampled = torch.tensor([[call.logprobs is not None] for call in part.rows], device=self.device)
        old_logprobs, importance = self._old_logprobs(logprobs, packed, sampled)
        result = self._loss(logprobs, old_logprobs, part.advantages, packed.response_mask, share, reference, importance)
        # gradient sync across ranks averages (divides by the rank count): scaled, the average is the sum
        (result.loss * (part.weight * share.ranks)).backward()
        if not part.weight:
            return
        self._add_stats(stats, result, total_tokens)
        with torch.no_grad():
            entropy = entropy_from_logits(logits.detach())
            stats["entropy"] += float((entropy * packed.response_mask).sum()) / total_tokens
            gap = float(((logprobs - packed.old_logprobs).abs() * packed.response_mask * sampled).max())
            stats["logprob_gap"] = max(stats["logprob_gap"], gap)

    def _choice_pass(self, part: _Part, *, share: StepShare, stats: dict[str, float]) -> None:
        """Accumulate the gradient of one micro-batch's quote-policy draws (each one unit of the loss, like a
        token: `step_units`); add to ``stats``. No KL term: the reference penalty covers generated tokens."""
        logprobs = self._choice_logprobs(part.rows)[:, None]
        old = torch.tensor([[call.choice.logprob] for call in part.rows], device=self.device)  # type: ignore[union-attr]
        mask = torch.ones_like(old)
        result = self._loss(logprobs, old, part.advantages, mask, share, None, None)
        (result.loss * (part.weight * share.ranks)).backward()
        if part.weight:
            self._add_stats(stats, result, share.total_tokens)
            stats["logprob_gap"] = max(stats["logprob_gap"], float((logprobs.detach() - old).abs().max()))

    def _choice_logprobs(self, rows: list[TraceCall]) -> torch.Tensor:
        self.model.train()
        with self._autocast():
            return choice_logprobs(self.model, rows, pad_id=self.pad_id)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast of the forward pass when `LearnerConfig.bf16_autocast` resolved on."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16) if self.autocast else contextlib.nullcontext()

    def _loss(
        self,
        logprobs: torch.Tensor,
        old_logprobs: torch.Tensor,
        advantages: list[float],
        mask: torch.Tensor,
        share: StepShare,
        reference: torch.Tensor | None,
        importance: torch.Tensor | None,
    ) -> PolicyLoss:
        config = self.config
        return policy_loss(
            logprobs,
            old_logprobs,
            torch.tensor(advantages, dtype=torch.float32, device=self.device),
            mask,
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            ref_logprobs=reference,
            kl_coef=config.kl_coef,
            importance_weights=importance,
            mode=config.loss_mode,
            denominator=share.total_tokens if config.loss_mode == "token-mean" else float(share.total_calls),
        )

    @staticmethod
    def _add_stats(stats: dict[str, float], result: PolicyLoss, total_tokens: float) -> None:
        stats["loss"] += float(result.loss.detach())
        stats["clip_fraction"] += result.clip_fraction * result.tokens / total_tokens
        stats["approx_kl"] += result.approx_kl * result.tokens / total_tokens
        stats["kl"] += result.kl

    def _old_logprobs(
        self, logprobs: torch.Tensor, packed: Packed, sampled: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The log-probs the clip ratio is taken against, and the tokens' importance weights (`rollout_correction`;
        rows without rollout log-probs weigh 1)."""
        if self.config.rollout_correction == "none":
            return packed.old_logprobs, None
        own = logprobs.detach()
        weights = truncated_importance_weights(own, packed.old_logprobs, cap=self.config.tis_cap)
        return own, torch.where(sampled, weights, torch.ones_like(weights))

    def _passes(
        self, calls: Sequence[TraceCall], share: StepShare
    ) -> Iterator[tuple[list[int], list[TraceCall], float]]:
        """Each micro-batch's indices, rows and weight (`micro_batches`); once this rank's calls are done,
        zero-weight passes on the filler keep it in every collective of the busier ranks."""
        batches = micro_batches(calls, config=self.config)
        for index in range(share.micro_batches):
            if index < len(batches):
                yield batches[index], [calls[i] for i in batches[index]], 1.0
            else:
                yield [], [share.filler], 0.0

    def sft_update(self, calls: Sequence[TraceCall], *, share: StepShare | None = None) -> dict[str, float]:
        """One supervised step: mean negative log-likelihood of the response tokens (EOS in, padding out) and
        of the quote-policy draws (each one unit, `step_units`); ``share`` as in `backward`."""
        self.optimizer.zero_grad(set_to_none=True)
        share = share or StepShare.whole(calls, config=self.config)
        loss_sum = 0.0
        for _, rows, weight in self._passes(calls, share):
            generated = [row for row in rows if row.choice is None]
            drawn = [row for row in rows if row.choice is not None]
            likelihood = self._choice_logprobs(drawn).sum() if drawn else torch.zeros((), device=self.device)
            if generated:
                packed, _, logprobs = self._forward(generated)
                likelihood = likelihood + (logprobs * packed.response_mask).sum()
            loss = -likelihood / share.total_tokens
            (loss * (weight * share.ranks)).backward()
            loss_sum += float(loss.detach()) * weight
        return {"loss": loss_sum, "tokens": share.total_tokens, "grad_norm": self.clip_and_step()}

    def supervised(self, *, lr: float) -> TorchLearner:
        """A learner for supervised steps on this one's policy: its own optimiser at ``lr``, no KL, temperature 1
        (imitation fits the policy's own distribution, whatever the rollouts sample at)."""
        config = self.config.model_copy(update={"lr": lr, "kl_coef": 0.0})
        return TorchLearner(self.model, config=config, pad_id=self.pad_id, temperature=1.0, device=self.device)

    def update(self, calls: Sequence[TraceCall], advantages: Sequence[float]) -> dict[str, float]:
        """One optimiser step from ``calls`` (one advantage per call); returns loss, grad norm and stats."""
        self.optimizer.zero_grad(set_to_none=True)
        stats = self.backward(calls, advantages)
        stats["grad_norm"] = self.clip_and_step()
        return stats

    def anchor_reference(self) -> None:
        """Make the KL reference the policy as it is now (after a warm start: the policy RL starts from);
        nothing to do without a KL penalty."""
        if self.reference is not None:
            self.reference = frozen_copy(self.model)

    def weights(self) -> dict[str, torch.Tensor]:
        """The trainable weights (copies, on the CPU): what the rollout workers load."""
        return {name: tensor.to("cpu") for name, tensor in trainable_weights(self.model).items()}

    def save(self, folder: str | Path) -> None:
        """The trainable weights (``policy.safetensors``), the optimiser and the torch RNG (``trainer_state.pt``)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        save_file(self.weights(), str(folder / "policy.safetensors"))
        state = {"optimizer": self.optimizer.state_dict(), "torch_rng": torch.get_rng_state()}
        torch.save(state, folder / "trainer_state.pt")

    def save_adapter(self, folder: str | Path, *, base_model: str | None = None) -> Path:
        """The LoRA adapters as a peft folder (``adapter_config.json``, ``adapter_model.safetensors``): what the
        embedded engine and ``PeftModel.from_pretrained`` load; ``base_model`` replaces the folder the policy
        was loaded from as the model they adapt."""
        if not hasattr(self.model, "peft_config"):
            raise ConfigError("this run trains every weight (no `lora:`): there is no adapter to save")
        if base_model is not None:
            self.model.peft_config["default"].base_model_name_or_path = base_model
        # LoRA leaves the embeddings alone; "auto" would look the base model up on the Hugging Face Hub
        self.model.save_pretrained(str(folder), save_embedding_layers=False)
        return Path(folder)

    def close(self) -> None:
        """Nothing to release: the policy lives in this process."""

    def load(self, folder: str | Path) -> None:
        """Load what `save` wrote, or a `LearnerGroup`'s sharded checkpoint (gathered whole)."""
        from safetensors.torch import load_file

        from memagent_graph.training.rl.checkpoints import is_sharded, load_sharded

        folder = Path(folder)
        if is_sharded(folder):
            load_sharded(folder, self.model, self.optimizer)
            return
        if not (folder / "policy.safetensors").is_file():
            raise ConfigError(f"{folder} holds no single-process learner checkpoint (no policy.safetensors)")
        load_trainable_weights(self.model, load_file(str(folder / "policy.safetensors")))
        state = torch.load(folder / "trainer_state.pt", weights_only=False)
        self.optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])

    def clip_and_step(self) -> float:
        """Clip the accumulated gradient, take the optimiser step; return the gradient norm before clipping."""
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        norm = torch.nn.utils.clip_grad_norm_(trainable, self.config.max_grad_norm)
        self.optimizer.step()
        return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)  # a DTensor when sharded

    def _reference_logprobs(self, packed: Packed) -> torch.Tensor:
        with torch.no_grad():
            logits = response_logits(self.reference, packed) / self.temperature
        return torch.log_softmax(logits, -1).gather(-1, packed.response_ids[..., None]).squeeze(-1)


def token_logprobs(model: Any, prompt_ids: Sequence[int], response_ids: Sequence[int], *, temperature: float) -> Any:
    """The learner's log-probabilities of ``response_ids`` after ``prompt_ids`` at ``temperature`` (1 if 0)."""
    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    scaled = logits / (temperature if temperature > 0 else 1.0)
    return torch.log_softmax(scaled, dim=-1).gather(-1, torch.tensor(list(response_ids))[:, None]).squeeze(-1)


def choice_logprobs(model: Any, calls: Sequence[TraceCall], *, pad_id: int) -> torch.Tensor:
    """Each quote-policy draw's log-probability under ``model``: its candidates' gains rescored
    (`query_log_likelihoods`), then the Plackett-Luce draw (`plackett_luce_logprob`); one per call."""
    values = []
    for call in calls:
        choice = call.choice
        if choice is None:
            raise ConfigError(f"call {call.call_index} of episode {call.episode_id} is not a quote-policy draw")
        scores = query_log_likelihoods(
            model, choice.query_ids, [choice.empty_ids, *choice.candidate_ids], pad_id=pad_id
        )
        gains = scores[1:] - scores[0]
        values.append(
            plackett_luce_logprob(
                gains, choice.order, stopped=choice.stopped, stop_gain=choice.stop_gain, temperature=choice.temperature
            )
        )
    return torch.stack(values)


def frozen_copy(model: Any) -> Any:
    """A copy of ``model`` in eval mode with no trainable weights (the KL penalty's reference policy)."""
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference
