"""Helpers shared by several test modules (``from helpers import ...``; pytest puts tests/ on ``sys.path``):
a scripted tool-calling chat model, Python scripts run as a shell runs them, and a read recorded on a policy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.state import MemAgentResult, RunSettings

if TYPE_CHECKING:  # training imports torch: only the tests that record a read load it
    from memagent_graph.training.rollout.traces import TraceRecorder


class ToolCallingModel(BaseChatModel):
    """An agent's chat model: calls ``tool`` (default: the first tool it is bound to) once with ``args``, then
    answers with the content of the tool's reply."""

    tool: str = ""
    args: dict[str, str] = {}

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(self, tools: Any, **kwargs: Any) -> BaseChatModel:
        return self if self.tool else self.model_copy(update={"tool": tools[0].name})

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **_: Any) -> ChatResult:
        replies = [m for m in messages if isinstance(m, ToolMessage)]
        if replies:
            message = AIMessage(f"The document says: {replies[-1].content}")
        else:
            message = AIMessage("", tool_calls=[{"name": self.tool, "args": self.args, "id": "call-1"}])
        return ChatResult(generations=[ChatGeneration(message=message)])


def run_python(
    *args: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    timeout: float = 120,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a child process (this interpreter), its output captured as text."""
    return subprocess.run(
        [sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd
    )


def recorded_read(
    rollout: Any, policy_dir: Path, *, config: MemAgentConfig, tokens: int, settings: RunSettings | None = None
) -> tuple[TraceRecorder, MemAgentResult]:
    """One read of a needle document (``tokens`` long, in the policy's tokens) by a `RecordingChatModel` over
    ``rollout``, as episode ``episode-1`` of group ``question-9``: the recorder holding its calls, and the result."""
    from memagent_graph.training.rollout.recording import RecordingChatModel
    from memagent_graph.training.rollout.traces import TraceRecorder

    recorder = TraceRecorder()
    tokenizer = HuggingFaceTokenizer(policy_dir / "tokenizer.json")
    task = needle_document(tokens=tokens, tokenizer=tokenizer, seed=4)
    agent = MemAgent(RecordingChatModel(rollout=rollout, recorder=recorder), config=config, tokenizer=tokenizer)
    metadata = {"episode_id": "episode-1", "group_id": "question-9"}
    result = agent.invoke(task.question, TextDocument(task.text), settings=settings, config={"metadata": metadata})
    return recorder, result
