"""How a graph's state holds its questions: one (keys ``question``, ``memory``, ``answer``; today's graph and
every public interface) or many read in lockstep (``questions``, ``memories``, ``answers``: each chunk is read
once for all of them). The nodes work on lists of questions and memories and use one of these to read and
write the state, so single and lockstep reads run through the same node bodies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memagent_graph.nodes.memory_budget import BudgetedMemory
from memagent_graph.state import MemorySpan, Source, StepRecord

Citations = tuple[list[Source], list[str]]
"""An answer's citations and its memory's unsupported spans (`provenance.cite`)."""
Evidence = Sequence[list[MemorySpan]]
"""The spans of each question's memory, with their sources (`provenance`)."""
Steps = Sequence[StepRecord | None]
"""Each question's latest step record (None: no call for that question in this step)."""


class Questions(Protocol):
    """The state keys of a graph's questions, memories and answers."""

    def questions(self, state: Mapping[str, Any]) -> list[str]:
        """The questions of the read, in order."""
        ...

    def memories(self, state: Mapping[str, Any]) -> list[str]:
        """The current memory of each question."""
        ...

    def evidence(self, state: Mapping[str, Any]) -> list[list[MemorySpan]]:
        """The spans of each question's current memory, with their sources (`provenance`)."""
        ...

    def fresh(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The state update that starts a read: empty memories, no answers."""
        ...

    def memory_state(self, memories: Sequence[str], evidence: Evidence, steps: Steps | None = None) -> dict[str, Any]:
        """The state keys holding these memories and their spans (one per question), and with ``steps`` each
        question's latest step record (None: no call for that question in this step)."""
        ...

    def steps(self, update: Mapping[str, Any]) -> list[StepRecord | None]:
        """The latest step record of each question in a state update."""
        ...

    def progress(self, memories: Sequence[BudgetedMemory]) -> dict[str, Any]:
        """The memory fields of the progress event."""
        ...

    def answer_update(
        self, answers: Sequence[tuple[str, str]], steps: Sequence[StepRecord], citations: Sequence[Citations]
    ) -> dict[str, Any]:
        """The state update after the answer call ((answer, source), a step record and citations per question)."""
        ...


@dataclass(frozen=True)
class OneQuestion:
    """One question: scalar keys (``question``, ``memory``, ``answer``, ``answer_source``, ``last_step``)."""

    def questions(self, state: Mapping[str, Any]) -> list[str]:
        return [state["question"]]

    def memories(self, state: Mapping[str, Any]) -> list[str]:
        return [state.get("memory", "")]

    def evidence(self, state: Mapping[str, Any]) -> list[list[MemorySpan]]:
        return [state.get("evidence", [])]

    def fresh(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return {"memory": "", "evidence": [], "answer": "", "citations": [], "unsupported": []}

    def memory_state(self, memories: Sequence[str], evidence: Evidence, steps: Steps | None = None) -> dict[str, Any]:
        [memory], [spans] = memories, evidence
        step = {"last_step": steps[0]} if steps and steps[0] is not None else {}
        return {"memory": memory, "evidence": spans, **step}

    def steps(self, update: Mapping[str, Any]) -> list[StepRecord | None]:
        return [update.get("last_step")]

    def progress(self, memories: Sequence[BudgetedMemory]) -> dict[str, Any]:
        [memory] = memories
        return {"memory_tokens": memory.tokens, "memory": memory.text}

    def answer_update(
        self, answers: Sequence[tuple[str, str]], steps: Sequence[StepRecord], citations: Sequence[Citations]
    ) -> dict[str, Any]:
        [(answer, source)], [step], [(cited, unsupported)] = answers, steps, citations
        return {
            "answer": answer,
            "answer_source": source,
            "last_step": step,
            "citations": cited,
            "unsupported": unsupported,
        }


@dataclass(frozen=True)
class ManyQuestions:
    """Q questions in lockstep: list keys of length Q (``questions``, ``memories``, ``answers``,
    ``answer_sources``, ``last_steps``), replaced at each step, never growing; a lockstep merge of parallel
    segments leaves None in ``last_steps`` for a question it made no call for in that step."""

    def questions(self, state: Mapping[str, Any]) -> list[str]:
        return list(state["questions"])

    def memories(self, state: Mapping[str, Any]) -> list[str]:
        return list(state["memories"])

    def evidence(self, state: Mapping[str, Any]) -> list[list[MemorySpan]]:
        return list(state.get("evidences") or [[] for _ in state["questions"]])

    def fresh(self, state: Mapping[str, Any]) -> dict[str, Any]:
        count = len(state["questions"])
        return {
            "memories": [""] * count,
            "evidences": [[] for _ in range(count)],
            "answers": [],
            "answer_sources": [],
            "citations": [],
            "unsupported": [],
        }

    def memory_state(self, memories: Sequence[str], evidence: Evidence, steps: Steps | None = None) -> dict[str, Any]:
        return {
            "memories": list(memories),
            "evidences": list(evidence),
            **({"last_steps": list(steps)} if steps is not None else {}),
        }

    def steps(self, update: Mapping[str, Any]) -> list[StepRecord | None]:
        return list(update.get("last_steps") or [None] * len(update["memories"]))

    def progress(self, memories: Sequence[BudgetedMemory]) -> dict[str, Any]:
        return {"memory_tokens": [m.tokens for m in memories], "memory": [m.text for m in memories]}

    def answer_update(
        self, answers: Sequence[tuple[str, str]], steps: Sequence[StepRecord], citations: Sequence[Citations]
    ) -> dict[str, Any]:
        return {
            "answers": [answer for answer, _ in answers],
            "answer_sources": [source for _, source in answers],
            "last_steps": list(steps),
            "citations": [cited for cited, _ in citations],
            "unsupported": [unsupported for _, unsupported in citations],
        }


ONE_QUESTION = OneQuestion()
MANY_QUESTIONS = ManyQuestions()
