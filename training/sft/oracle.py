"""An oracle memory policy: it knows each task's answer and evidence, and acts out the MemAgent prompts with them.

Run through the same graph as the policy (`sft.teacher_traces`), it shows what a good reader writes: after
each chunk the memory holds exactly the evidence seen so far (the sentences that answer the question, under a
"Relevant facts:" line), and the final answer boxes the gold answers once all the evidence was kept. When the
chunking hides evidence (a sentence cut by a chunk boundary), it answers "unknown" and rejection sampling drops
the episode.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, PrivateAttr

from memagent_graph.errors import ConfigError
from memagent_graph.prompts import PromptSet
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.sft.teachers import ScriptedChatModel

NOTHING_YET = "No relevant information found yet."
NOTES_HEADING = "Relevant facts:"


def _template_pattern(template: str) -> re.Pattern[str]:
    """A regex that matches exactly the prompts rendered from ``template``."""
    parts = re.split(r"\{(?:question|memory|section)\}", template)
    return re.compile("(?s)" + "(.*)".join(re.escape(part) for part in parts))


class OracleMemoryModel(ScriptedChatModel):
    """The oracle for ``tasks`` under ``prompts`` (see module doc); a question it does not know is an error."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tasks: Sequence[Task]
    prompts: PromptSet = PromptSet()
    nothing: str = NOTHING_YET
    """The memory it writes before any evidence."""
    heading: str = NOTES_HEADING
    """The first line of a memory that holds evidence: whether a chunk holds a fact is then decided by one
    token that is the same for every task and wording ("Relevant" or "No"), not by a fact's first word."""
    _by_question: dict[str, Task] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any) -> None:
        self._by_question = {task.question: task for task in self.tasks}

    @property
    def _llm_type(self) -> str:
        return "memagent-oracle"

    def reply(self, prompt: str) -> str:
        """What the oracle writes for one rendered prompt."""
        task = next((t for question, t in self._by_question.items() if question in prompt), None)
        if task is None:
            raise ConfigError("the oracle was asked about a question that is not among its tasks")
        kept = [sentence for sentence in task.evidence if sentence in prompt]
        if _template_pattern(self.prompts.answer).fullmatch(prompt):
            answer = ", ".join(task.golds) if task.evidence and len(kept) == len(task.evidence) else "unknown"
            return f"The answer is \\boxed{{{answer}}}."
        return "\n".join([self.heading, *kept]) if kept else self.nothing

    def _reply(self, messages: list[BaseMessage], options: dict[str, Any]) -> str:
        return self.reply(str(messages[-1].content))
