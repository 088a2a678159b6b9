"""`memagent mcp` driven by the MCP SDK's own client, over stdio and streamable HTTP: reads answer and cite, progress
arrives per chunk, a cancelled call stops its model calls, paths outside the root are refused, concurrent calls keep
to their own documents, and a LangGraph agent reads through the server's tools (langchain-mcp-adapters)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from helpers import ToolCallingModel, run_python
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from memagent_graph.documents.haystack import needle_document
from memagent_graph.integrations.child_processes import end_with_parent
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # subprocesses and loopback servers

SMALL = [
    "--chunk-tokens",
    "400",
    "--memory-tokens",
    "150",
    "--answer-tokens",
    "40",
]  # as tests/test_server.py reads these needles
EXAMPLE = Path(__file__).parent.parent / "examples" / "mcp_client.py"
DELAY_S = 0.05  # per model reply: a read of many chunks lasts long enough to cancel


@pytest.fixture(scope="module")
def endpoint(tokenizer) -> Iterator[SimulatedOpenAIServer]:
    with SimulatedOpenAIServer(tokenizer=tokenizer, delay_s=DELAY_S) as server:
        yield server


@pytest.fixture(scope="module")
def tasks(tokenizer):
    # depth 0.6: no needle of these seeds is cut by a chunk border (the rule model reads whole sentences only)
    return [needle_document(tokens=1600, tokenizer=tokenizer, seed=200 + i, depth=0.6) for i in range(8)]


@pytest.fixture(scope="module")
def root(tmp_path_factory, tasks, tokenizer) -> Path:
    """doc0.txt … doc7.txt and a long one under the root; a secret beside it, and a link inside it to the secret."""
    base = tmp_path_factory.mktemp("mcp")
    (base / "secret.txt").write_text("The secret is leaked-value.", encoding="utf-8")
    folder = base.resolve() / "documents"
    folder.mkdir()
    for index, task in enumerate(tasks):
        (folder / f"doc{index}.txt").write_text(task.text, encoding="utf-8")
    long = needle_document(tokens=24_000, tokenizer=tokenizer, seed=9, depth=0.95)  # 60 chunks: still reading at 1 s
    (folder / "long.txt").write_text(long.text, encoding="utf-8")
    (folder / "link.txt").symlink_to(base / "secret.txt")
    return folder


def _command(endpoint: SimulatedOpenAIServer, root: Path, *extra: str) -> list[str]:
    named = f"contract={root / 'doc0.txt'}"
    return ["-m", "memagent_graph.integrations.cli", "mcp", "--allowed-root", str(root), "--document", named,
            "--base-url", endpoint.base_url, *SMALL, *extra]  # fmt: skip


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MEMAGENT_", "OPENAI_"))}


@pytest.fixture(scope="module")
def http_url(endpoint, root, tmp_path_factory) -> Iterator[str]:
    """One `memagent mcp --http` for the module's HTTP tests."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("mcp-log") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, *_command(endpoint, root, "--http", str(port))],
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    watchdog = end_with_parent(process)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()
            try:
                httpx.get(url, timeout=1.0)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        watchdog.close()
        process.wait()


@asynccontextmanager
async def http_session(url: str):
    async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_a_read_over_stdio_answers_cites_and_writes_only_protocol_messages_to_stdout(endpoint, root, tasks):
    parameters = StdioServerParameters(command=sys.executable, args=_command(endpoint, root), env=_env())
    unparsed = []

    async def on_message(message: object) -> None:  # a stdout line that is not JSON-RPC arrives as an exception
        if isinstance(message, Exception):
            unparsed.append(message)

    async with (
        stdio_client(parameters) as (read, write),
        ClientSession(read, write, message_handler=on_message) as session,
    ):
        await session.initialize()
        result = await session.call_tool("read_document", {"question": tasks[1].question, "document": "doc1.txt"})
    assert unparsed == []
    assert not result.isError and _text(result) == tasks[1].answer
    output = result.structuredContent
    assert tasks[1].answer in output["memory"] and output["num_chunks"] > 1
    [citation, *_] = output["citations"]
    assert citation["document"] == str(root / "doc1.txt")
    assert tasks[1].answer in tasks[1].text[citation["start"] : citation["end"]]


async def test_progress_arrives_after_every_chunk(http_url, tasks):
    updates = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with http_session(http_url) as session:
        result = await session.call_tool(
            "read_document", {"question": tasks[2].question, "document": "doc2.txt"}, progress_callback=on_progress
        )
    chunks = result.structuredContent["num_chunks"]
    assert [(p, t) for p, t, _ in updates] == [(i, chunks) for i in range(1, chunks + 1)]
    assert updates[0][2].startswith(f"chunk 1 of {chunks}, ") and updates[0][2].endswith(" tokens/s")


async def test_a_cancelled_read_stops_its_model_calls_within_a_chunk(http_url, endpoint):
    started, chunks = asyncio.Event(), []
    question = "What is the gate code of the long document?"

    def calls() -> int:  # this read's model calls
        return sum("completions" in path and question in json.dumps(body) for path, body in endpoint.requests)

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        chunks.append(total)
        started.set()

    async with http_session(http_url) as session:
        call = asyncio.create_task(
            session.call_tool(
                "read_document",
                {"question": question, "document": "long.txt"},
                progress_callback=on_progress,
            )
        )
        await asyncio.wait_for(started.wait(), timeout=60)
        # the session's first request after initialize has id 1: the SDK client has no cancel of its own
        cancel = types.CancelledNotification(params=types.CancelledNotificationParams(requestId=1, reason="test"))
        await session.send_notification(types.ClientNotification(cancel))
        await asyncio.sleep(1.0)  # the chunk in flight ends
        at_cancel = calls()
        await asyncio.sleep(2.0)  # ~40 model replies' time: a read that went on would make many more calls
        call.cancel()
    assert calls() == at_cancel < chunks[0]  # it stopped, and before the end of the document


async def test_paths_leading_outside_the_root_are_refused_with_one_line(http_url, root):
    async with http_session(http_url) as session:
        for document in ("../secret.txt", str(root.parent / "secret.txt"), "link.txt"):
            result = await session.call_tool("read_document", {"question": "What is the secret?", "document": document})
            assert result.isError and "allowed folder" in _text(result), document
            assert "leaked" not in _text(result) and "Traceback" not in _text(result) and "\n" not in _text(result)


async def test_bad_input_is_a_tool_error_of_one_line(http_url, root):
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    async with http_session(http_url) as session:
        empty = await session.call_tool("read_document", {"question": "  ", "document": "doc0.txt"})
        missing = await session.call_tool("read_document", {"question": "What?", "document": "nope.txt"})
        binary = await session.call_tool("read_document", {"question": "What?", "document": "latin1.txt"})
    for result, expected in ((empty, "question is empty"), (missing, "nope.txt"), (binary, "UTF-8")):
        assert result.isError and expected in _text(result) and "\n" not in _text(result), _text(result)


async def test_eight_concurrent_calls_each_answer_their_own_document(http_url, root, tasks):
    async with http_session(http_url) as session:
        results = await asyncio.gather(
            *(
                session.call_tool("read_document", {"question": t.question, "document": f"doc{i}.txt"})
                for i, t in enumerate(tasks)
            )
        )
    assert [_text(result) for result in results] == [task.answer for task in tasks]
    for index, result in enumerate(results):  # no other call's evidence reached this one's citations
        assert {c["document"] for c in result.structuredContent["citations"]} == {str(root / f"doc{index}.txt")}


async def test_ask_many_answers_each_question_from_one_read(http_url, tasks):
    async with http_session(http_url) as session:
        result = await session.call_tool(
            "ask_many", {"questions": [tasks[0].question, "Who wrote it?"], "document": "contract"}
        )
    answers = [r["answer"] for r in result.structuredContent["results"]]
    assert len(answers) == 2 and answers[0] == tasks[0].answer


async def test_documents_are_listed_and_registered_ones_are_resources(http_url, root):
    async with http_session(http_url) as session:
        listed = (await session.call_tool("list_documents", {})).structuredContent["documents"]
        resources = (await session.list_resources()).resources
        metadata = await session.read_resource(resources[0].uri)
    assert {"name": "contract", "kind": "registered", "bytes": (root / "doc0.txt").stat().st_size} in listed
    assert {d["name"] for d in listed if d["kind"] == "file"} >= {"doc0.txt", "long.txt"}
    assert "link.txt" not in {d["name"] for d in listed}  # it leads outside the root
    assert [str(r.uri) for r in resources] == ["memagent://documents/contract"]
    assert json.loads(metadata.contents[0].text)["path"] == str(root / "doc0.txt")


async def test_a_langgraph_agent_answers_through_the_servers_tools(http_url, tasks):
    from langchain.agents import create_agent
    from langchain_core.messages import ToolMessage
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"memagent": {"url": http_url, "transport": "streamable_http"}})
    tools = await client.get_tools()
    assert {tool.name for tool in tools} == {"read_document", "ask_many", "list_documents"}
    model = ToolCallingModel(tool="read_document", args={"question": tasks[3].question, "document": "doc3.txt"})
    messages = (await create_agent(model, tools=tools).ainvoke({"messages": [("user", tasks[3].question)]}))["messages"]
    [reply] = [message for message in messages if isinstance(message, ToolMessage)]
    assert reply.name == "read_document" and reply.text == tasks[3].answer  # the adapter's text block: the answer


def test_without_a_root_or_a_document_the_command_says_what_to_name(memagent):
    result = memagent("mcp", "--base-url", "http://127.0.0.1:9")
    assert result.returncode == 1 and "--allowed-root DIR and/or --document NAME=PATH" in result.stderr


def test_the_documented_client_example_prints_the_answer_and_its_citation(http_url, root, tasks):
    done = run_python(EXAMPLE, http_url, "doc4.txt", tasks[4].question, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tools: " in done.stdout and f"answer: {tasks[4].answer}" in done.stdout
    assert f"read at {root / 'doc4.txt'}:" in done.stdout and "chunk 1 of " in done.stderr
