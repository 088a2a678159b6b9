"""MemAgent as one step of a larger LangGraph workflow: a support ticket is checked against a long log file.

The parent graph has its own state (``ticket``, ``log_file``, ``finding``, ``reply``); `memagent_node` maps
those keys to the MemAgent graph and back. Uses the endpoint in MEMAGENT_BASE_URL when set, else the
embedded SmolLM2 engine.

    python examples/subgraph.py big.log "Which host failed first?"
"""

from __future__ import annotations

import sys

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from memagent_graph import FileDocument, MemAgent, MemAgentConfig
from memagent_graph.integrations.model_choice import choose_model
from memagent_graph.integrations.subgraph import memagent_node


class TicketState(TypedDict, total=False):
    ticket: str
    log_file: str
    """The id of the log in the agent's document registry (never the text)."""
    finding: str
    reply: str


def draft_reply(state: TicketState) -> TicketState:
    return {"reply": f"Thanks for your ticket. What the log shows: {state['finding']}"}


def build_parent_graph(agent: MemAgent, *, checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    """``investigate`` (MemAgent reads the log for the ticket) then ``reply``."""
    builder = StateGraph(TicketState)
    builder.add_node(
        "investigate", memagent_node(agent, question_key="ticket", document_key="log_file", answer_key="finding")
    )
    builder.add_node("reply", draft_reply)
    builder.add_edge(START, "investigate")
    builder.add_edge("investigate", "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def main(path: str, ticket: str) -> None:
    choice = choose_model()  # MEMAGENT_BASE_URL's model if set, else the embedded engine
    agent = MemAgent(
        choice.model, tokenizer=choice.tokenizer, config=MemAgentConfig(chunk_tokens=2000, memory_tokens=256)
    )
    graph = build_parent_graph(agent)
    inputs: TicketState = {"ticket": ticket, "log_file": agent.documents.add(FileDocument(path))}
    # the inner graph's progress events reach the parent's stream only with subgraphs=True
    for namespace, mode, data in graph.stream(inputs, stream_mode=["custom", "values"], subgraphs=True):
        if mode == "custom":
            print(f"chunk {data['chunk']}/{data['total']}: memory {data['memory_tokens']} tokens", file=sys.stderr)
        elif not namespace:
            state = data
    print(state["reply"])


if __name__ == "__main__":
    main(*sys.argv[1:3])
