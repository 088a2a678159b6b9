"""The recording policy: a LangChain chat model over a rollout backend that records every call as a `TraceCall`.

It renders the chat template once, generates from those token ids, and records the prompt ids, response ids
(EOS included when generated) and their rollout log-probabilities, so the learner trains on exactly the
tokens that were sampled; text is never re-tokenized. Episode and group ids come from the run's metadata:

    agent.invoke(question, document, config={"metadata": {"episode_id": "e1", "group_id": "q7"}})

Training samples with top-p and top-k off: the learner's log-probabilities are those of the full softmax at
the same temperature (`token_logprobs`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from memagent_graph.errors import ConfigError
from memagent_graph.training.traces import TraceRecorder


@dataclass(frozen=True)
class Sampling:
    """How one call samples: a token limit and a temperature (0 = greedy)."""

    max_tokens: int
    temperature: float


@dataclass(frozen=True)
class Generation:
    """One sampled response: its token ids, their log-probabilities, and why it ended."""

    response_ids: list[int]
    logprobs: list[float] | None
    """None for a teacher's response (it was written, not sampled from the policy)."""
    finish_reason: str


class RolloutBackend(Protocol):
    """What generates for the recording policy (transformers on CPU; a vLLM engine on GPUs)."""

    policy_version: int

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """The chat-template token ids of ``messages``, ending with the assistant turn's opening."""
        ...

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling) -> list[Generation]:
        """Sample one response per prompt."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids`` without special tokens."""
        ...

    def response_ids(self, text: str, max_tokens: int) -> Generation:
        """A teacher's ``text`` as this policy's response tokens (EOS appended; cut at ``max_tokens``)."""
        ...


class TransformersRollout:
    """A Hugging Face causal LM generating in one left-padded batch per call, on CPU by default.

    Log-probabilities are those of the sampling distribution: ``log_softmax(logits / temperature)``
    (temperature 1 for greedy calls), top-p and top-k off.
    """

    def __init__(self, model: Any, tokenizer: Any = None, *, seed: int = 0) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model, str | Path):
            tokenizer = tokenizer or AutoTokenizer.from_pretrained(str(model), local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32, local_files_only=True)
        if tokenizer is None:
            raise ConfigError("TransformersRollout needs the model's tokenizer when given a model object")
        self.model, self.tokenizer = model.eval(), tokenizer
        self.policy_version = 0
        self._generator_seed = seed
        self.sampled_calls = 0
        """Generate calls so far: call n samples with seed ``seed + n`` (a checkpoint saves it)."""
        self._lock = threading.Lock()  # one generate at a time: torch models are not re-entrant

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # a BatchEncoding or a plain list

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def response_ids(self, text: str, max_tokens: int) -> Generation:
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        if len(ids) > max_tokens:
            return Generation(ids[:max_tokens], None, "length")
        return Generation(ids, None, "stop")

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling) -> list[Generation]:
        import torch

        pad, eos = self.tokenizer.pad_token_id, self.tokenizer.eos_token_id
        width = max(len(p) for p in prompts)
        input_ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in prompts])
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        greedy = sampling.temperature <= 0
        with self._lock, torch.no_grad():
            torch.manual_seed(self._generator_seed + self.sampled_calls)
            self.sampled_calls += 1
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=sampling.max_tokens,
                do_sample=not greedy,
                temperature=None if greedy else sampling.temperature,
                top_p=1.0,
                top_k=0,
                pad_token_id=pad,
                eos_token_id=eos,
                output_logits=True,
                return_dict_in_generate=True,
            )
        steps = torch.stack(out.logits, dim=1).float()  # raw logits: (batch, new tokens, vocab)
        logprobs = torch.log_softmax(steps / (1.0 if greedy else sampling.temperature), dim=-1)
        new = out.sequences[:, width:]
        chosen = logprobs.gather(-1, new[..., None]).squeeze(-1)
        results = []
        for row, row_logprobs in zip(new.tolist(), chosen.tolist(), strict=True):
            end = row.index(eos) + 1 if eos in row else len(row)
            results.append(Generation(row[:end], row_logprobs[:end], "stop" if eos in row else "length"))
        return results


def token_logprobs(model: Any, prompt_ids: Sequence[int], response_ids: Sequence[int], *, temperature: float) -> Any:
    """The learner's log-probabilities of ``response_ids`` after ``prompt_ids`` at ``temperature`` (1 if 0)."""
    import torch

    ids = torch.tensor([list(prompt_ids) + list(response_ids)])
    logits = model(input_ids=ids).logits[0, len(prompt_ids) - 1 : -1].float()
    scaled = logits / (temperature if temperature > 0 else 1.0)
    return torch.log_softmax(scaled, dim=-1).gather(-1, torch.tensor(list(response_ids))[:, None]).squeeze(-1)


class RecordingChatModel(BaseChatModel):
    """A chat model that generates with ``rollout`` and records each call in ``recorder`` (see module doc).

    With a ``teacher`` chat model, the teacher writes each reply and the policy's tokens of it are recorded
    (no log-probabilities): traces to imitate, for supervised fine-tuning by rejection sampling.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    rollout: Any
    recorder: TraceRecorder
    teacher: BaseChatModel | None = None
    default_max_tokens: int = 256

    @property
    def _llm_type(self) -> str:
        return "memagent-recording"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        top_p = kwargs.get("top_p")
        if top_p is not None and top_p < 1.0 and self.teacher is None:
            raise ConfigError(
                f"training rollouts sample from the full distribution; got top_p={top_p}: "
                "use MemAgentConfig(top_p=1.0) so the learner's log-probabilities match"
            )
        sampling = Sampling(
            max_tokens=int(kwargs.get("max_tokens") or self.default_max_tokens),
            temperature=float(kwargs.get("temperature", 1.0)),
        )
        metadata = dict(run_manager.metadata or {}) if run_manager is not None else {}
        prompt_ids = self.rollout.prompt_ids(convert_to_openai_messages(messages))
        started = time.perf_counter()
        if self.teacher is not None:
            written = self.teacher.invoke(messages, max_tokens=sampling.max_tokens)
            generation = self.rollout.response_ids(str(written.content), sampling.max_tokens)
        else:
            [generation] = self.rollout.generate([prompt_ids], sampling)
        text = self.rollout.decode(generation.response_ids)
        self.recorder.record(
            episode_id=str(metadata.get("episode_id", "unassigned")),
            group_id=str(metadata.get("group_id", "unassigned")),
            node=str(metadata.get("langgraph_node", "unknown")),
            prompt_ids=prompt_ids,
            response_ids=generation.response_ids,
            logprobs=generation.logprobs,
            finish_reason=generation.finish_reason,
            policy_version=self.rollout.policy_version,
            latency_s=round(time.perf_counter() - started, 4),
            text=text,
        )
        message = AIMessage(
            content=text,
            response_metadata={"finish_reason": generation.finish_reason},
            usage_metadata={
                "input_tokens": len(prompt_ids),
                "output_tokens": len(generation.response_ids),
                "total_tokens": len(prompt_ids) + len(generation.response_ids),
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])
