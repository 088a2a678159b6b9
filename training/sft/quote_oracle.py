"""The quote policy's oracle: the draws that keep exactly a task's evidence, the targets of its listwise warm
start.

At each chunk the candidates are the quote policy's own (`quote_candidates`: the oracle's notes so far and the
chunk's sentences the first stage passes); the oracle draws the evidence sentences among them (the notes it
holds first, so a second hop is drawn *given* its first), then stops; at the end it draws the first evidence
note as the answering note. A warm start maximises the log-probability of these draws under the policy
(`TorchLearner.sft_update`): the evidence rises above the stop value, everything else falls below it.
"""

from __future__ import annotations

from collections.abc import Sequence

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.chunking import chunk_document
from memagent_graph.documents.sources import TextDocument
from memagent_graph.documents.tokenization import Tokenizer
from memagent_graph.nodes.quote.choice import Choice, Draw
from memagent_graph.nodes.quote.memory import quote_candidates
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rollout.backends import ChatTokens
from memagent_graph.training.rollout.recording import RecordingChatModel
from memagent_graph.training.rollout.traces import TraceCall, TraceRecorder


def oracle_draws(task: Task, *, tokenizer: Tokenizer, reading: MemAgentConfig, temperature: float) -> list[Draw]:
    """The oracle's draws on ``task`` read with ``reading`` (chunk size, first stage, stop value) at
    ``temperature``: one per chunk, then the answer's when it kept any evidence."""
    chunked = chunk_document(TextDocument(task.document), tokenizer, reading.chunk_tokens)
    sections = [chunked.chunk_text(i) for i in range(chunked.num_chunks)]
    draws, notes = [], []
    for index, section in enumerate(sections):
        following = sections[index + 1] if index + 1 < len(sections) else ""
        candidates = quote_candidates(
            task.question, "\n".join(notes), section, following=following, prefilter_keep=reading.quote_prefilter
        )
        order = tuple(i for i, candidate in enumerate(candidates) if _is_evidence(candidate, task.evidence))
        draws.append(
            Draw(task.question, tuple(candidates), Choice(order, True, 0.0), reading.quote_min_gain, temperature)
        )
        notes = [candidates[i] for i in order]
    if notes:
        draws.append(Draw(task.question, tuple(notes), Choice((0,), False, 0.0), None, temperature))
    return draws


def oracle_traces(
    tasks: Sequence[Task], *, policy_tokens: ChatTokens, tokenizer: Tokenizer, reading: MemAgentConfig
) -> list[TraceCall]:
    """Every task's oracle draws as calls in the policy's tokens (one episode per task), at the reading's
    ``quote_temperature``."""
    recorder = TraceRecorder()
    model = RecordingChatModel(rollout=policy_tokens, recorder=recorder)
    for number, task in enumerate(tasks):
        for draw in oracle_draws(task, tokenizer=tokenizer, reading=reading, temperature=reading.quote_temperature):
            node = "update_memory" if draw.stop_gain is not None else "final_answer"
            metadata = {"episode_id": f"oracle-{number}", "group_id": f"task-{number}", "langgraph_node": node}
            model.record_choice(draw, metadata=metadata)
    return recorder.calls


def _is_evidence(candidate: str, evidence: Sequence[str]) -> bool:
    return any(sentence.strip() and sentence.strip() in candidate for sentence in evidence)
