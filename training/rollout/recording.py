"""The recording policy: a LangChain chat model over a rollout backend that records every call as a `TraceCall`.

It renders the chat template once, generates from those token ids, and records the prompt ids, response ids
(EOS included when generated), their rollout log-probabilities and the call's token limit, so the learner
trains on exactly the tokens that were sampled; text is never re-tokenized. Episode and group ids come from
the run's metadata:

    agent.invoke(question, document, config={"metadata": {"episode_id": "e1", "group_id": "q7"}})

Training samples with top-p and top-k off: the learner's log-probabilities are those of the full softmax at
the same temperature (`learner.token_logprobs`). The backends are in `backends` and `vllm_backend`.

For the quote policy it is also the scorer (the backend's `score_passages`) and the `ChoiceRecorder`: each
draw is recorded as a call whose ``choice`` holds the query, the candidates' scoring prompts (token ids),
what was drawn and its log-probability, so the learner can rescore the candidates under its own weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.query_likelihood import passage_prompt_ids, question_ids
from memagent_graph.nodes.quote.choice import Draw
from memagent_graph.training.rollout.backends import Sampling
from memagent_graph.training.rollout.traces import ChoiceTrace, TraceRecorder


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

    accepts_quote_from: ClassVar[bool] = False
    """Replies are sampled freely: the quote policy answers from its notes (``quote_answer`` span or line)."""

    @property
    def _llm_type(self) -> str:
        return "memagent-recording"

    @property
    def policy_version(self) -> int:
        """The version of the weights it generates and scores with (a `VersionedScorer`: the quote policy's
        cached scores are kept per version)."""
        return self.rollout.policy_version

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """The rollout policy's log p(question | passage) for each passage (the quote policy's scores)."""
        if not hasattr(self.rollout, "score_passages"):
            raise ConfigError(
                f"the quote policy's rollouts need a backend that scores passages, and "
                f"{type(self.rollout).__name__} does not: use `rollout.backend: transformers`"
            )
        return self.rollout.score_passages(question, passages)

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """The rollout policy's log p(continuation | prompt) for each continuation (the ``extract`` answer)."""
        if not hasattr(self.rollout, "score_continuations"):
            raise ConfigError(
                f"the quote policy's extract answer needs a backend that scores continuations, and "
                f"{type(self.rollout).__name__} does not: use `rollout.backend: transformers`, or `quote_answer: span`"
            )
        return self.rollout.score_continuations(prompt, continuations)

    def record_choice(self, draw: Draw, *, metadata: Mapping[str, Any]) -> None:
        """Record a quote-policy draw as a call with its ``choice`` (`ChoiceTrace`, in the policy's tokens); a
        greedy draw (an evaluation read, ``quote_temperature`` 0) has nothing to learn from and is not recorded."""
        if draw.temperature <= 0:
            return
        choice = choice_trace(draw, encode=self.rollout.encode)
        self.recorder.record(
            **_episode_fields(metadata),
            prompt_ids=[],
            response_ids=[],
            logprobs=None,
            finish_reason="quote",
            policy_version=self.rollout.policy_version,
            latency_s=0.0,
            text="\n".join(draw.candidates[i] for i in draw.choice.order),
            choice=choice,
        )

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
            **_episode_fields(metadata),
            prompt_ids=prompt_ids,
            response_ids=generation.response_ids,
            logprobs=generation.logprobs,
            finish_reason=generation.finish_reason,
            max_tokens=sampling.max_tokens,
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


def choice_trace(draw: Draw, *, encode: Callable[[str], list[int]]) -> ChoiceTrace:
    """``draw`` in the policy's tokens (``encode``: text to ids, no special tokens)."""
    return ChoiceTrace(
        query_ids=question_ids(encode, draw.query),
        empty_ids=passage_prompt_ids(encode, [""])[0],
        candidate_ids=passage_prompt_ids(encode, draw.candidates),
        order=list(draw.choice.order),
        stopped=draw.choice.stopped,
        stop_gain=draw.stop_gain,
        temperature=draw.temperature,
        logprob=draw.choice.logprob,
    )


def _episode_fields(metadata: Mapping[str, Any]) -> dict[str, str]:
    """The episode id, group id and graph node of a call, from its run's metadata."""
    return {
        "episode_id": str(metadata.get("episode_id", "unassigned")),
        "group_id": str(metadata.get("group_id", "unassigned")),
        "node": str(metadata.get("langgraph_node", "unknown")),
    }
