"""How a graph's state holds its questions: one (keys ``question``, ``memory``, ``answer``; today's graph and
every public interface) or many read in lockstep (``questions``, ``memories``, ``answers``: each chunk is read
once for all of them). The nodes work on lists of questions and memories and use one of these to read and
write the state, so single and lockstep reads run through the same node bodies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memagent_graph.nodes.memory_budget import BudgetedMemory
from memagent_graph.state import StepRecord


class Questions(Protocol):
    """The state keys of a graph's questions, memories and answers."""

    def questions(self, state: Mapping[str, Any]) -> list[str]:
        """The questions of the read, in order."""
        ...

    def memories(self, state: Mapping[str, Any]) -> list[str]:
        """The current memory of each question."""
        ...

    def fresh(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The state update that starts a read: empty memories, no answers."""
        ...

    def memory_update(self, memories: Sequence[BudgetedMemory], steps: Sequence[StepRecord]) -> dict[str, Any]:
        """The state update after a memory update (one memory and step record per question)."""
        ...

    def progress(self, memories: Sequence[BudgetedMemory]) -> dict[str, Any]:
        """The memory fields of the progress event."""
        ...

    def answer_update(self, answers: Sequence[tuple[str, str]], steps: Sequence[StepRecord]) -> dict[str, Any]:
        """The state update after the answer call ((answer, source) and a step record per question)."""
        ...


@dataclass(frozen=True)
class OneQuestion:
    """One question: scalar keys (``question``, ``memory``, ``answer``, ``answer_source``, ``last_step``)."""

    def questions(self, state: Mapping[str, Any]) -> list[str]:
        return [state["question"]]

    def memories(self, state: Mapping[str, Any]) -> list[str]:
        return [state.get("memory", "")]

    def fresh(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return {"memory": "", "answer": ""}

    def memory_update(self, memories: Sequence[BudgetedMemory], steps: Sequence[StepRecord]) -> dict[str, Any]:
        [memory], [step] = memories, steps
        return {"memory": memory.text, "last_step": step}

    def progress(self, memories: Sequence[BudgetedMemory]) -> dict[str, Any]:
        [memory] = memories
        return {"memory_tokens": memory.tokens, "memory": memory.text}

    def answer_update(self, answers: Sequence[tuple[str, str]], steps: Sequence[StepRecord]) -> dict[str, Any]:
        [(answer, source)], [step] = answers, steps
        return {"answer": answer, "answer_source": source, "last_step": step}


@dataclass(frozen=True)
class ManyQuestions:
    """Q questions in lockstep: list keys of length Q (``questions``, ``memories``, ``answers``,
    ``answer_sources``, ``last_steps``), replaced at each step, never growing."""

    def questions(self, state: Mapping[str, Any]) -> list[str]:
        return list(state["questions"])

    def memories(self, state: Mapping[str, Any]) -> list[str]:
        return list(state["memories"])

    def fresh(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return {"memories": [""] * len(state["questions"]), "answers": [], "answer_sources": []}

    def memory_update(self, memories: Sequence[BudgetedMemory], steps: Sequence[StepRecord]) -> dict[str, Any]:
        return {"memories": [m.text for m in memories], "last_steps": list(steps)}

    def progress(self, memories: Sequence[BudgetedMemory]) -> dict[str, Any]:
        return {"memory_tokens": [m.tokens for m in memories], "memory": [m.text for m in memories]}

    def answer_update(self, answers: Sequence[tuple[str, str]], steps: Sequence[StepRecord]) -> dict[str, Any]:
        return {
            "answers": [answer for answer, _ in answers],
            "answer_sources": [source for _, source in answers],
            "last_steps": list(steps),
        }


ONE_QUESTION = OneQuestion()
MANY_QUESTIONS = ManyQuestions()
