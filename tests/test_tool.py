"""`create_memagent_tool`: the schema the model sees, content and artifact, confinement to the allowed folder,
clear tool errors, and the tool inside a real LangChain agent (progress on the agent's custom stream)."""

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from helpers import ToolCallingModel
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from memagent_graph import DocumentRegistry, MemAgent, MemAgentConfig, TextDocument
from memagent_graph.errors import ConfigError
from memagent_graph.integrations.tool import create_memagent_tool
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)
EXAMPLE = Path(__file__).parent.parent / "examples" / "agent_tool.py"


@pytest.fixture
def memagent(model, tokenizer):
    return MemAgent(model, config=CONFIG, tokenizer=tokenizer)


@pytest.fixture
def tool(memagent, needle):
    return create_memagent_tool(memagent, {"report": TextDocument(needle.text)})


@pytest.fixture
def folder(tmp_path, needle):
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "doc.txt").write_text(needle.text)
    (tmp_path / "secret.txt").write_text("The special magic secret is leaked-0000.")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    return root


def call(tool, question: str, document: str) -> ToolMessage:
    return tool.invoke(
        {"type": "tool_call", "id": "1", "name": tool.name, "args": {"question": question, "document": document}}
    )


def agent_for(tool, needle, **options: Any):
    model = ToolCallingModel(tool=tool.name, args={"question": needle.question, "document": "report"})
    return create_agent(model, tools=[tool], **options)


def test_the_model_sees_only_question_and_document(tool):
    schema = tool.tool_call_schema.model_json_schema()
    assert set(schema["properties"]) == set(schema["required"]) == {"question", "document"}
    assert all(field["description"] for field in schema["properties"].values())


def test_invoke_returns_the_answer_as_content_and_the_memory_as_artifact(tool, needle):
    message = call(tool, needle.question, "report")
    assert message.content == needle.answer and message.status == "success"
    assert set(message.artifact) == {
        "memory", "num_chunks", "usage", "thread_id", "answer_source", "citations", "unsupported"
    }  # fmt: skip
    assert needle.answer in message.artifact["memory"] and message.artifact["num_chunks"] > 1
    [citation, *_] = message.artifact["citations"]
    assert needle.answer in needle.text[citation["start"] : citation["end"]]


async def test_ainvoke_returns_the_same_content_and_artifact(tool, needle):
    message = await tool.ainvoke(
        {"type": "tool_call", "id": "1", "name": tool.name, "args": {"question": needle.question, "document": "report"}}
    )
    assert message.content == needle.answer and message.artifact["answer_source"] == "boxed"


def test_without_documents_the_tool_reads_the_agents_registry(model, tokenizer, needle):
    agent = MemAgent(
        model, config=CONFIG, tokenizer=tokenizer, documents=DocumentRegistry({"report": TextDocument(needle.text)})
    )
    assert call(create_memagent_tool(agent), needle.question, "report").content == needle.answer


def test_a_path_under_the_allowed_root_is_read(memagent, folder, needle):
    tool = create_memagent_tool(memagent, allowed_root=folder)
    assert call(tool, needle.question, "sub/doc.txt").content == needle.answer


@pytest.mark.parametrize("document", ["../secret.txt", "{outside}/secret.txt", "link.txt"])
def test_a_path_leading_outside_the_allowed_root_is_refused(memagent, folder, document):
    tool = create_memagent_tool(memagent, allowed_root=folder)
    message = call(tool, "What is the special magic secret?", document.format(outside=folder.parent))
    assert message.status == "error" and "allowed folder" in message.content
    assert "leaked" not in message.content and "Traceback" not in message.content


def test_an_unknown_id_is_a_clear_error_naming_the_known_ones(tool):
    message = call(tool, "Anything?", "nope")
    assert message.status == "error"
    assert "no document registered as 'nope'" in message.content and "report" in message.content


def test_a_failed_read_is_a_tool_error_not_an_exception(memagent):
    message = call(create_memagent_tool(memagent, {"blank": TextDocument("   \n ")}), "Anything?", "blank")
    assert message.status == "error" and "empty" in message.content.lower()


def test_a_registry_and_a_separate_allowed_root_are_refused(memagent, folder):
    with pytest.raises(ConfigError, match="allowed_root"):
        create_memagent_tool(memagent, DocumentRegistry(), allowed_root=folder)


def test_an_agent_calls_the_tool_and_answers_from_it(tool, needle):
    messages = agent_for(tool, needle).invoke({"messages": [("user", needle.question)]})["messages"]
    assert messages[1].tool_calls[0]["args"] == {"question": needle.question, "document": "report"}
    tool_message = next(m for m in messages if isinstance(m, ToolMessage))
    assert tool_message.name == tool.name and tool_message.artifact["num_chunks"] > 1
    assert messages[-1].content == f"The document says: {needle.answer}"


async def test_progress_reaches_the_agents_custom_stream_once_per_chunk(tool, needle):
    events = [
        e
        async for e in agent_for(tool, needle).astream({"messages": [("user", needle.question)]}, stream_mode="custom")
    ]
    total = events[0]["total"]
    assert [e["chunk"] for e in events] == list(range(1, total + 1)) and total > 1
    assert {e["type"] for e in events} == {"memagent.progress"}


def test_the_inner_read_keeps_its_own_recursion_limit(tool, needle):
    # the agent needs 4 steps, the read 2 per chunk: a leaked parent limit would stop the read
    result = agent_for(tool, needle).invoke({"messages": [("user", needle.question)]}, {"recursion_limit": 6})
    assert result["messages"][-1].content.endswith(needle.answer)


def test_the_inner_read_does_not_checkpoint_into_the_agents_saver(tool, needle):
    saver = InMemorySaver()
    agent = agent_for(tool, needle, checkpointer=saver)
    agent.invoke({"messages": [("user", needle.question)]}, {"configurable": {"thread_id": "chat"}})
    assert {c.config["configurable"]["thread_id"] for c in saver.list(None)} == {"chat"}
    assert {c.config["configurable"]["checkpoint_ns"] for c in saver.list(None)} == {""}


def test_the_example_agent_reads_a_file_in_its_folder(folder, tokenizer, needle, capsys):
    spec = importlib.util.spec_from_file_location("agent_tool_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    model = ToolCallingModel(tool="read_long_document", args={"question": needle.question, "document": "sub/doc.txt"})
    agent = example.build_agent(model, folder=folder, reader=RuleMemoryModel(), tokenizer=tokenizer)
    assert example.ask(agent, needle.question) == f"The document says: {needle.answer}"
    assert "chunk 1/" in capsys.readouterr().err
