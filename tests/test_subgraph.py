"""MemAgent inside a parent graph with its own state keys (`memagent_node`, `examples/subgraph.py`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.errors import EmptyQuestionError, QuestionTooLongError
from memagent_graph.graph import recursion_limit_for
from memagent_graph.integrations.subgraph import memagent_node
from memagent_graph.state import PROGRESS_EVENT
from memagent_graph.testing import RuleMemoryModel
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

EXAMPLE = Path(__file__).parent.parent / "examples" / "subgraph.py"
_spec = importlib.util.spec_from_file_location("subgraph_example", EXAMPLE)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)


class FailOnce(RuleMemoryModel):
    """Raises on call number ``fail_at`` (once), as a crashed server would."""

    fail_at: int = -1

    def _reply(self, messages, options):
        if len(self.calls) == self.fail_at:
            self.fail_at = -1
            raise RuntimeError("the model server went away")
        return super()._reply(messages, options)


def _agent(tokenizer, model: RuleMemoryModel | None = None) -> MemAgent:
    config = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)
    return MemAgent(model or RuleMemoryModel(), tokenizer=tokenizer, config=config)


@pytest.fixture
def agent(tokenizer) -> MemAgent:
    return _agent(tokenizer)


@pytest.fixture
def ticket(agent, needle) -> dict[str, str]:
    return {"ticket": needle.question, "log_file": agent.documents.add(TextDocument(needle.text))}


def test_the_parent_keys_get_the_answer(agent, needle, ticket):
    state = example.build_parent_graph(agent).invoke(ticket)
    assert state["finding"] == needle.answer
    assert state["reply"].endswith(needle.answer)
    assert set(state) == {"ticket", "log_file", "finding", "reply"}  # no MemAgent key leaks into the parent


async def test_the_parent_graph_runs_with_ainvoke(agent, needle, ticket):
    state = await example.build_parent_graph(agent).ainvoke(ticket)
    assert state["finding"] == needle.answer


def test_progress_events_reach_the_parent_stream_only_with_subgraphs(agent, ticket):
    graph = example.build_parent_graph(agent)
    assert list(graph.stream(ticket, stream_mode="custom")) == []
    events = list(graph.stream(ticket, stream_mode="custom", subgraphs=True))
    assert len(events) == agent.chunk(ticket["log_file"]).num_chunks
    namespace, event = events[-1]
    assert namespace[0].startswith("investigate:") and event["type"] == PROGRESS_EVENT


def test_a_small_parent_recursion_limit_does_not_cut_the_inner_read(agent, needle, ticket):
    parent_limit = 4  # enough for the parent's own two nodes, far below what the inner read needs
    assert parent_limit < recursion_limit_for(agent.chunk(ticket["log_file"]).num_chunks)
    state = example.build_parent_graph(agent).invoke(ticket, {"recursion_limit": parent_limit})
    assert state["finding"] == needle.answer


def test_the_parent_context_does_not_reach_the_inner_nodes(agent, needle):
    @dataclass
    class ParentContext:
        team: str = "support"

    class State(TypedDict, total=False):
        question: str
        doc_id: str
        answer: str

    builder = StateGraph(State, context_schema=ParentContext)
    builder.add_node("read", memagent_node(agent))
    builder.add_edge(START, "read")
    builder.add_edge("read", END)
    inputs = {"question": needle.question, "doc_id": agent.documents.add(TextDocument(needle.text))}
    assert builder.compile().invoke(inputs, context=ParentContext())["answer"] == needle.answer


def test_the_memory_key_receives_the_memory(agent, needle):
    node = memagent_node(agent, answer_key="finding", memory_key="notes")
    update = node.invoke({"question": needle.question, "doc_id": agent.documents.add(TextDocument(needle.text))})
    assert update["finding"] == needle.answer
    assert needle.answer in update["notes"] and "sources" not in update


def test_the_citations_key_receives_where_the_answer_was_read(agent, needle):
    node = memagent_node(agent, answer_key="finding", citations_key="sources")
    update = node.invoke({"question": needle.question, "doc_id": agent.documents.add(TextDocument(needle.text))})
    [citation, *_] = update["sources"]
    assert needle.answer in needle.text[citation["start"] : citation["end"]]


def test_an_empty_question_is_refused(agent, ticket):
    with pytest.raises(EmptyQuestionError, match="ticket"):
        example.build_parent_graph(agent).invoke({**ticket, "ticket": "  "})


def test_a_question_longer_than_a_chunk_is_refused_before_any_model_call(tokenizer, needle):
    model = RuleMemoryModel()
    agent = _agent(tokenizer, model)
    ticket = {"ticket": "Which word? " + "candidate " * 400, "log_file": agent.documents.add(TextDocument(needle.text))}
    with pytest.raises(QuestionTooLongError, match="longer than a whole chunk"):
        example.build_parent_graph(agent).invoke(ticket)
    assert model.calls == []


def test_a_checkpointed_parent_resumes_the_read_at_the_failed_chunk(tokenizer, needle):
    model = FailOnce(fail_at=5)
    agent = _agent(tokenizer, model)
    graph = example.build_parent_graph(agent, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "ticket-1"}}
    ticket = {"ticket": needle.question, "log_file": agent.documents.add(TextDocument(needle.text))}
    with pytest.raises(RuntimeError, match="went away"):
        graph.invoke(ticket, config, durability="sync")
    assert graph.invoke(None, config, durability="sync")["finding"] == needle.answer
    # chunks 1-5 were not read again: one call per chunk plus the answer, in all
    assert len(model.calls) == agent.chunk(ticket["log_file"]).num_chunks + 1


@pytest.mark.integration
def test_the_example_prints_the_reply(tmp_path, needle):
    path = tmp_path / "app.log"
    path.write_text(needle.text)
    with SimulatedOpenAIServer() as server:
        result = subprocess.run(
            [sys.executable, str(EXAMPLE), str(path), needle.question],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "MEMAGENT_BASE_URL": server.base_url},
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Thanks for your ticket. What the log shows: {needle.answer}"
    assert "chunk 1/" in result.stderr
