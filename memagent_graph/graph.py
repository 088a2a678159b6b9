"""The MemAgent graph: ``read_chunk -> update_memory -> (more chunks? update_memory : final_answer)``, for one
question or for many read in lockstep (the same nodes; `memagent_graph.nodes.questions`).

`read_chunk` opens a read (or continues a stopped one) once per run; `update_memory` reads chunk ``cursor`` and
rewrites the memory, one superstep (one checkpoint) per chunk.

With ``MemAgentConfig(segments=P)`` (P > 1) the read is split into P parallel segments, merged by one more
pass before the answer: ``read_chunk -> read_segment x P -> join_segments -> ... -> merge_segments -> ... ->
final_answer`` (`memagent_graph.nodes.segments`), for one question or in lockstep.

`build_memagent_graph` returns the uncompiled `StateGraph` (choose your own checkpointer, store, name);
`create_memagent` compiles it. The model, tokenizer, prompts and documents are fixed at build time;
per-run overrides travel in the JSON-only context (`RunSettings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict, Unpack

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.tokenization import ApproximateTokenizer, Tokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.nodes import final_answer, read_chunk, update_memory
from memagent_graph.nodes.memory_policy import MemoryPolicy
from memagent_graph.nodes.policy_registry import build_memory_policy
from memagent_graph.nodes.questions import MANY_QUESTIONS, ONE_QUESTION, Questions
from memagent_graph.nodes.read_checks import ReadChecks, recursion_limit_for
from memagent_graph.nodes.segments import merge_left, read_segment, segment_sends
from memagent_graph.nodes.update_memory import merge_segments
from memagent_graph.state import InputState, LockstepInput, LockstepState, MemAgentState, OutputState, RunSettings

__all__ = [
    "AnswerInput",
    "GraphOptions",
    "build_memagent_graph",
    "create_answer_graph",
    "create_memagent",
    "recursion_limit_for",
]


def _more_chunks(state: MemAgentState) -> Literal["update_memory", "final_answer"]:
    return "update_memory" if state["cursor"] < state["num_chunks"] else "final_answer"


def build_memagent_graph(
    model: BaseChatModel,
    *,
    documents: DocumentRegistry,
    tokenizer: Tokenizer | None = None,
    config: MemAgentConfig | None = None,
    answer_model: BaseChatModel | None = None,
    many_questions: bool = False,
    policy: MemoryPolicy | None = None,
) -> StateGraph:
    """The uncompiled MemAgent graph over the documents in ``documents`` (input: ``question``, ``doc_id``);
    ``policy`` (default: the memory policy ``config`` names) writes each memory.

    With ``many_questions`` it reads in lockstep (input: ``questions``, ``doc_id``): each chunk is read once
    and every question's memory is updated by one batched model call (`LockstepState`).
    """
    config = config or MemAgentConfig()
    tokenizer = tokenizer or ApproximateTokenizer()
    policy = policy or build_memory_policy(model, tokenizer, config)
    if many_questions and not policy.lockstep:
        raise ConfigError(
            f"lockstep reading cannot use `memory_policy` {config.memory_policy!r}: it reads one question at a "
            "time; ask the questions one at a time (MemAgent.batch) or use `memory_policy` 'generate'"
        )
    if many_questions:
        questions = MANY_QUESTIONS
        builder = StateGraph(LockstepState, context_schema=RunSettings, input_schema=LockstepInput)
    else:
        questions = ONE_QUESTION
        builder = StateGraph(
            MemAgentState, context_schema=RunSettings, input_schema=InputState, output_schema=OutputState
        )
    checks = ReadChecks(config, tokenizer, uses_update_prompt=policy.uses_update_prompt)
    builder.add_node(
        "read_chunk",
        read_chunk(
            documents,
            tokenizer,
            chunk_tokens=config.chunk_tokens,
            checks=checks,
            questions=questions,
            segments=config.segments,
        ),
    )
    update = update_memory(model, documents, tokenizer, memagent_config=config, policy=policy, questions=questions)
    builder.add_node("final_answer", _answer_node(answer_model or model, tokenizer, config, policy, questions))
    builder.add_edge(START, "read_chunk")
    builder.add_edge("final_answer", END)
    if config.segments > 1:
        merge = merge_segments(documents, tokenizer, memagent_config=config, policy=policy, questions=questions)
        builder.add_node("read_segment", read_segment(update, questions))
        builder.add_node("join_segments", _end_of_round)
        builder.add_node("merge_segments", merge)
        builder.add_conditional_edges("read_chunk", segment_sends, ["read_segment", "merge_segments"])
        builder.add_edge("read_segment", "join_segments")
        builder.add_conditional_edges("join_segments", segment_sends, ["read_segment", "merge_segments"])
        builder.add_conditional_edges("merge_segments", merge_left, ["merge_segments", "final_answer"])
        return builder
    builder.add_node("update_memory", update)
    builder.add_conditional_edges("read_chunk", _more_chunks, ["update_memory", "final_answer"])
    builder.add_conditional_edges("update_memory", _more_chunks, ["update_memory", "final_answer"])
    return builder


def _answer_node(
    model: BaseChatModel, tokenizer: Tokenizer, config: MemAgentConfig, policy: MemoryPolicy, questions: Questions
) -> Any:
    """The answer step of ``policy`` (its own answer, or a model call that may have to quote the memory)."""
    return final_answer(
        model,
        tokenizer,
        memagent_config=config,
        quotes_answer=policy.quotes_answer,
        policy_answer=policy.answer,
        questions=questions,
    )


def _end_of_round(state: Mapping[str, Any]) -> dict[str, Any]:
    """A round of segment reads is over (its own superstep: the next round is sent once, not once per segment).
    Typed as a plain mapping: LangGraph would read a state class here as this node's input schema, and its
    router would see only that class's keys (a lockstep read's ``questions`` would be dropped)."""
    return {}


class _Documents(TypedDict):
    documents: DocumentRegistry


class GraphOptions(_Documents, total=False):
    """The keyword options of `build_memagent_graph`, for `create_memagent` to pass on (``documents`` is
    required; the defaults are `build_memagent_graph`'s)."""

    tokenizer: Tokenizer | None
    config: MemAgentConfig | None
    answer_model: BaseChatModel | None
    many_questions: bool
    policy: MemoryPolicy | None


def create_memagent(
    model: BaseChatModel,
    *,
    checkpointer: BaseCheckpointSaver | bool | None = None,
    name: str = "memagent",
    **options: Unpack[GraphOptions],
) -> CompiledStateGraph:
    """The compiled MemAgent graph (``options`` as in `build_memagent_graph`). A run needs a ``recursion_limit``
    of ``recursion_limit_for(num_chunks)`` (LangGraph's default, 25, covers 22 chunks; a LangGraph server's,
    10011, 10,008); a lower one is refused before the first model call."""
    return build_memagent_graph(model, **options).compile(checkpointer=checkpointer, name=name)


class AnswerInput(TypedDict):
    """The input of `create_answer_graph`: a question and the memory (notes, one a line) to answer it from."""

    question: str
    memory: str


def create_answer_graph(
    model: BaseChatModel,
    *,
    tokenizer: Tokenizer | None = None,
    config: MemAgentConfig | None = None,
    name: str = "memagent-answer",
) -> CompiledStateGraph:
    """The MemAgent graph's answer step alone: ``invoke({"question": ..., "memory": ...})`` answers from that
    memory exactly as a read's last step would (``config``'s memory policy and prompts; output as a read's).
    For notes made elsewhere, and for comparing readers on one answer step (`memagent eval`'s fair baselines)."""
    config = config or MemAgentConfig()
    tokenizer = tokenizer or ApproximateTokenizer()
    policy = build_memory_policy(model, tokenizer, config)
    builder = StateGraph(MemAgentState, context_schema=RunSettings, input_schema=AnswerInput, output_schema=OutputState)
    builder.add_node("set_up", lambda state: {"num_chunks": 0, "evidence": []})
    builder.add_node("final_answer", _answer_node(model, tokenizer, config, policy, ONE_QUESTION))
    builder.add_edge(START, "set_up")
    builder.add_edge("set_up", "final_answer")
    builder.add_edge("final_answer", END)
    return builder.compile(name=name)
