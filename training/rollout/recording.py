"""The recording policy: a LangChain chat model over a rollout backend that records every call as a `TraceCall`.

It renders the chat template once, generates from those token ids, and records the prompt ids, response ids
(EOS included when generated), their rollout log-probabilities and the call's token limit, so the learner
trains on exactly the tokens that were sampled; text is never re-tokenized. Episode and group ids come from
the run's metadata:

    agent.invoke(question, document, config={"metadata": {"episode_id": "e1", "group_id": "q7"}})

Training samples with top-p and top-k off: the learner's log-probabilities are those of the full softmax at
the same temperature (`learner.token_logprobs`). The backends are in `backends` and `vllm_backend`.
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from memagent_graph.errors import ConfigError
from memagent_graph.training.rollout.backends import Sampling
from memagent_graph.training.rollout.traces import TraceRecorder


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
