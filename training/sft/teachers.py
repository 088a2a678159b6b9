"""Chat models that play the memory policy by rule: teachers for warm starts and rejection-sampled SFT, and
deterministic, zero-cost models for tests, examples and benchmarks.

`ScriptedChatModel` is the one LangChain shell (sync and async generate, optional latency, usage, finish
reason); a subclass only says what it replies to a prompt (`RuleMemoryModel` here, `OracleMemoryModel` in
`oracle`).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import deque
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from memagent_graph.prompts import NO_MEMORY


class ScriptedChatModel(BaseChatModel):
    """A chat model whose reply is a Python function of the prompt (`_reply`); nothing is sampled."""

    latency_s: float = 0.0
    """Seconds each call waits before replying (a stand-in for a server's latency)."""
    report_usage: bool = False
    """Report whitespace-word counts as usage, as a server reports its token counts (saves re-counting)."""

    def _reply(self, messages: list[BaseMessage], options: dict[str, Any]) -> str:
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._result(messages, self._reply(messages, kwargs))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._result(messages, self._reply(messages, kwargs))

    def _result(self, messages: list[BaseMessage], text: str) -> ChatResult:
        usage = None
        if self.report_usage:
            prompt, reply = len(str(messages[-1].content).split()), len(text.split())
            usage = {"input_tokens": prompt, "output_tokens": reply, "total_tokens": prompt + reply}
        message = AIMessage(content=text, usage_metadata=usage, response_metadata={"finish_reason": "stop"})
        return ChatResult(generations=[ChatGeneration(message=message)])


FACT_PATTERN = r"The special magic [\w ]+? is [\w-]+\."
_NOTES = re.compile(r"<previous_notes>\n(.*?)\n</previous_notes>", re.DOTALL)
_SECTION = re.compile(r"<section>\n(.*?)\n</section>", re.DOTALL)
_ANSWER_NOTES = re.compile(r"<notes>\n(.*?)\n</notes>", re.DOTALL)


class RuleMemoryModel(ScriptedChatModel):
    """A chat model that acts out the MemAgent prompts by rule, deterministically.

    On an update prompt it replies with the previous notes plus every sentence of the section matching
    ``fact_pattern`` (and ``pad_words`` filler words, to test budgets), or ``nothing`` when there are none; on
    an answer prompt it fills ``answer_template`` with the value of the last fact in the notes ("unknown" when
    there is none). The latest ``kept_calls`` prompts and call options are recorded in ``calls`` (a teacher
    that reads for a long time does not keep every document it was shown).
    """

    fact_pattern: str = FACT_PATTERN
    nothing: str = "Nothing relevant yet."
    answer_template: str = "From my notes, the answer is \\boxed{{{value}}}."
    pad_words: int = 0
    empty_replies_at: frozenset[int] = frozenset()
    """Indexes of the calls (0 = the first) that get an empty reply."""
    kept_calls: int = 1000
    _calls: deque[dict[str, Any]] = PrivateAttr(default_factory=deque)
    _replies: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "rule-memory"

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The latest ``kept_calls`` calls' prompt text and options, in order."""
        return list(self._calls)

    def _reply(self, messages: list[BaseMessage], options: dict[str, Any]) -> str:
        prompt = str(messages[-1].content)
        self._calls.append({"prompt": prompt, **options})
        while len(self._calls) > self.kept_calls:
            self._calls.popleft()
        index, self._replies = self._replies, self._replies + 1
        if index in self.empty_replies_at:
            return ""
        section = _SECTION.search(prompt)
        if section is None:
            notes = _ANSWER_NOTES.search(prompt)
            facts = re.findall(self.fact_pattern, notes.group(1) if notes else "")
            value = facts[-1].rsplit(" is ", 1)[1].rstrip(".") if facts else "unknown"
            return self.answer_template.format(value=value)
        notes_match = _NOTES.search(prompt)
        previous = notes_match.group(1) if notes_match else ""
        lines = [] if previous in ("", NO_MEMORY, self.nothing) else [previous]
        lines += re.findall(self.fact_pattern, section.group(1))
        lines += ["filler"] * self.pad_words
        return "\n".join(lines) or self.nothing
