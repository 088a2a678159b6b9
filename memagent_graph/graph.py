"""The MemAgent graph: ``read_chunk -> update_memory -> (more chunks? read_chunk : final_answer)``.

`build_memagent_graph` returns the uncompiled `StateGraph` (choose your own checkpointer, store, name);
`create_memagent` compiles it. The model, tokenizer, prompts and documents are fixed at build time;
per-run overrides travel in the JSON-only context (`RunSettings`).
"""

from __future__ import annotations

from typing import Literal

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from memagent_graph.config import MemAgentConfig
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.documents.tokenization import ApproximateTokenizer, Tokenizer
from memagent_graph.nodes import final_answer, read_chunk, update_memory
from memagent_graph.nodes.read_checks import ReadChecks, recursion_limit_for
from memagent_graph.state import InputState, MemAgentState, OutputState, RunSettings

__all__ = ["build_memagent_graph", "create_memagent", "recursion_limit_for"]


def _more_chunks(state: MemAgentState) -> Literal["read_chunk", "final_answer"]:
    return "read_chunk" if state["cursor"] < state["num_chunks"] else "final_answer"


def build_memagent_graph(
    model: BaseChatModel,
    *,
    documents: DocumentRegistry,
    tokenizer: Tokenizer | None = None,
    config: MemAgentConfig | None = None,
    answer_model: BaseChatModel | None = None,
) -> StateGraph:
    """The uncompiled MemAgent graph over the documents in ``documents`` (input: ``question``, ``doc_id``)."""
    config = config or MemAgentConfig()
    tokenizer = tokenizer or ApproximateTokenizer()
    builder = StateGraph(MemAgentState, context_schema=RunSettings, input_schema=InputState, output_schema=OutputState)
    checks = ReadChecks(config, tokenizer)
    builder.add_node("read_chunk", read_chunk(documents, tokenizer, chunk_tokens=config.chunk_tokens, checks=checks))
    builder.add_node("update_memory", update_memory(model, documents, tokenizer, memagent_config=config))
    builder.add_node("final_answer", final_answer(answer_model or model, tokenizer, memagent_config=config))
    builder.add_edge(START, "read_chunk")
    builder.add_edge("read_chunk", "update_memory")
    builder.add_conditional_edges("update_memory", _more_chunks, ["read_chunk", "final_answer"])
    builder.add_edge("final_answer", END)
    return builder


def create_memagent(
    model: BaseChatModel,
    *,
    documents: DocumentRegistry,
    tokenizer: Tokenizer | None = None,
    config: MemAgentConfig | None = None,
    answer_model: BaseChatModel | None = None,
    checkpointer: BaseCheckpointSaver | bool | None = None,
    name: str = "memagent",
) -> CompiledStateGraph:
    """The compiled MemAgent graph. A run needs a ``recursion_limit`` of ``recursion_limit_for(num_chunks)``
    (LangGraph's default, 25, covers 11 chunks; a LangGraph server's, 10011, about 5,000); a lower one is
    refused before the first model call."""
    builder = build_memagent_graph(
        model, documents=documents, tokenizer=tokenizer, config=config, answer_model=answer_model
    )
    return builder.compile(checkpointer=checkpointer, name=name)
