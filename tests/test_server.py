"""The server entry under the real ``langgraph dev``: the repository's langgraph.json, the SDK, a loopback model."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from memagent_graph import TextDocument
from memagent_graph.documents import chunk_document
from memagent_graph.documents.haystack import NeedleTask, needle_document
from memagent_graph.documents.tokenization import ApproximateTokenizer, VLLMServerTokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.graph import recursion_limit_for
from memagent_graph.integrations import server as entry
from memagent_graph.integrations.child_processes import end_with_parent
from memagent_graph.integrations.model_choice import choose_model
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
BUDGETS = {"MEMAGENT_CHUNK_TOKENS": "400", "MEMAGENT_MEMORY_TOKENS": "150", "MEMAGENT_ANSWER_TOKENS": "40"}
STARTUP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class DevServer:
    url: str
    log: Path
    pid: int


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]


def _wait_until_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"langgraph dev exited with {process.returncode}:\n{_tail(log)}")
        try:
            if httpx.get(f"{url}/ok", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    pytest.fail(f"langgraph dev did not answer /ok in {STARTUP_TIMEOUT_S:.0f} s:\n{_tail(log)}")


@contextmanager
def langgraph_dev(workdir: Path, *, jobs: int | None = None, **env: str) -> Iterator[DevServer]:
    """Serve the repository's langgraph.json from ``workdir`` (its .langgraph_api/ and log stay there), running
    ``jobs`` runs at once (``--n-jobs-per-worker``)."""
    shutil.copy(REPO / "langgraph.json", workdir / "langgraph.json")
    port, log = _free_port(), workdir / "server.log"
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("MEMAGENT_", "OPENAI_"))}
    quiet = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload"]
    command += ["--n-jobs-per-worker", str(jobs)] if jobs is not None else []
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir,
            env={**inherited, **quiet, **BUDGETS, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    watchdog = end_with_parent(process)  # no server outlives a killed test run
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_ready(url, process, log)
        yield DevServer(url, log, process.pid)
    finally:
        watchdog.close()  # SIGTERM to the server's group, SIGKILL after 10 s
        process.wait()


@pytest.fixture(scope="module")
def task(tokenizer) -> NeedleTask:
    return needle_document(tokens=3000, tokenizer=tokenizer, seed=7, depth=0.0)


@pytest.fixture(scope="module")
def num_chunks(task, tokenizer) -> int:
    return chunk_document(TextDocument(task.text), tokenizer, int(BUDGETS["MEMAGENT_CHUNK_TOKENS"])).num_chunks


@pytest.fixture(scope="module")
def endpoint(tokenizer) -> Iterator[SimulatedOpenAIServer]:
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        yield server


@pytest.fixture(scope="module")
def documents(tmp_path_factory, task) -> Path:
    """A folder holding needle.txt, next to a secret.txt that lies outside it."""
    folder = tmp_path_factory.mktemp("served") / "documents"
    folder.mkdir()
    (folder / "needle.txt").write_text(task.text, encoding="utf-8")
    (folder.parent / "secret.txt").write_text("The special magic colour is not this.", encoding="utf-8")
    return folder


@pytest.fixture
def clean_env(monkeypatch) -> pytest.MonkeyPatch:
    for name in [k for k in os.environ if k.startswith(("MEMAGENT_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_bad_budgets_and_folders_in_the_environment_are_refused(clean_env, tmp_path):
    clean_env.setenv("MEMAGENT_CHUNK_TOKENS", "lots")
    with pytest.raises(ConfigError, match="MEMAGENT_CHUNK_TOKENS='lots' is not valid"):
        entry.config_from_env()
    clean_env.setenv("MEMAGENT_DOCUMENTS_DIR", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="is not a folder"):
        entry.documents_from_env()
    clean_env.setenv("MEMAGENT_DOCUMENTS_DIR", str(tmp_path))
    clean_env.setenv("N_JOBS_PER_WORKER", "lots")
    with pytest.raises(ConfigError, match="N_JOBS_PER_WORKER='lots' is not a whole number"):
        entry.documents_from_env()


@pytest.mark.parametrize("serves_tokenize", [True, False])
def test_the_tokenizer_is_the_endpoints_when_it_serves_tokenize(clean_env, tokenizer, serves_tokenize):
    with SimulatedOpenAIServer(tokenizer=tokenizer if serves_tokenize else None) as endpoint:
        clean_env.setenv("MEMAGENT_BASE_URL", endpoint.base_url)
        chosen = choose_model().tokenizer
    assert isinstance(chosen, VLLMServerTokenizer if serves_tokenize else ApproximateTokenizer)


async def test_the_factory_builds_one_graph_without_a_checkpointer(clean_env, endpoint, documents):
    clean_env.setattr(entry, "_built", None)
    clean_env.setenv("MEMAGENT_BASE_URL", endpoint.base_url)
    clean_env.setenv("MEMAGENT_DOCUMENTS_DIR", str(documents))
    first, second = await entry.graph(), await entry.graph()
    assert first is second and first.checkpointer is None and first.name == "memagent"


@pytest.fixture(scope="module")
def server(tmp_path_factory, tokenizer, endpoint, documents) -> Iterator[DevServer]:
    """The server with the model's tokenizer as a local folder (MEMAGENT_TOKENIZER)."""
    tokenizer_dir = tmp_path_factory.mktemp("tokenizer")
    tokenizer._backend.save(str(tokenizer_dir / "tokenizer.json"))
    env = {
        "MEMAGENT_BASE_URL": endpoint.base_url,
        "MEMAGENT_DOCUMENTS_DIR": str(documents),
        "MEMAGENT_TOKENIZER": str(tokenizer_dir),
    }
    with langgraph_dev(tmp_path_factory.mktemp("server"), jobs=16, **env) as dev:  # its default runs one at a time
        yield dev


@pytest.fixture(scope="module")
def client(server) -> SyncLangGraphClient:
    return get_sync_client(url=server.url)


def test_a_waited_run_answers_from_the_served_document(client, task, num_chunks, endpoint):
    output = client.runs.wait(
        None,
        "memagent",
        input={"question": task.question, "doc_id": "needle.txt"},
    )  # no recursion_limit: the server's default covers about 5,000 chunks
    assert output["answer"] == task.answer and output["answer_source"] == "boxed"
    assert output["num_chunks"] == num_chunks and output["usage"]["calls"] == num_chunks + 1
    limits = {body.get("max_completion_tokens", body.get("max_tokens")) for body in endpoint.chat_requests()}
    assert limits == {150, 40}  # the MEMAGENT_*_TOKENS budgets reached the model


def test_a_run_cites_where_in_the_served_file_its_answer_was_read(client, task, documents):
    output = client.runs.wait(None, "memagent", input={"question": task.question, "doc_id": "needle.txt"})
    [citation, *_] = output["citations"]
    cited = (documents / "needle.txt").read_bytes()[citation["byte_start"] : citation["byte_end"]].decode()
    assert task.answer in cited and citation["source"] == str(documents / "needle.txt")
    assert output["unsupported"] == []


def test_a_streamed_run_reports_every_chunk_then_the_answer(client, task, num_chunks):
    parts = list(
        client.runs.stream(
            None,
            "memagent",
            input={"question": task.question, "doc_id": "needle.txt"},
            stream_mode=["custom", "updates"],
        )
    )
    progress = [p.data for p in parts if p.event == "custom"]
    assert [event["chunk"] for event in progress] == list(range(1, num_chunks + 1))
    assert {(event["type"], event["total"], event["doc_id"]) for event in progress} == {
        ("memagent.progress", num_chunks, "needle.txt")
    }
    last = parts[-1]
    assert last.event == "updates" and last.data["final_answer"]["answer"] == task.answer


@pytest.mark.parametrize("path", ["relative", "absolute"])
def test_a_document_outside_the_folder_is_refused(client, server, documents, path):
    doc_id = "../secret.txt" if path == "relative" else str(documents.parent / "secret.txt")
    output = client.runs.wait(
        None, "memagent", input={"question": "What is the colour?", "doc_id": doc_id}, raise_error=False
    )
    assert output["__error__"]["error"] == "DocumentAccessError"
    assert "allowed folder" in output["__error__"]["message"]  # our errors are ValueErrors: the server passes them on


def test_a_question_longer_than_a_chunk_is_refused_as_the_cli_refuses_it(client, endpoint):
    before = len(endpoint.chat_requests())
    question = "Which of these words is the magic one? " + "candidate " * 500
    output = client.runs.wait(None, "memagent", input={"question": question, "doc_id": "needle.txt"}, raise_error=False)
    assert output["__error__"]["error"] == "QuestionTooLongError"
    assert "longer than a whole chunk (400 tokens)" in output["__error__"]["message"]
    assert len(endpoint.chat_requests()) == before  # refused before any model call


def test_a_recursion_limit_too_low_for_the_document_is_refused_with_the_one_to_pass(client, endpoint, num_chunks):
    before = len(endpoint.chat_requests())
    output = client.runs.wait(
        None,
        "memagent",
        input={"question": "What is the magic number?", "doc_id": "needle.txt"},
        config={"recursion_limit": 5},
        raise_error=False,
    )
    assert output["__error__"]["error"] == "ConfigError"
    assert f'"recursion_limit": {recursion_limit_for(num_chunks)}' in output["__error__"]["message"]
    assert len(endpoint.chat_requests()) == before


def test_the_endpoints_tokenize_route_serves_without_blocking(tmp_path, endpoint, documents, task, num_chunks):
    env = {"MEMAGENT_BASE_URL": endpoint.base_url, "MEMAGENT_DOCUMENTS_DIR": str(documents)}
    with langgraph_dev(tmp_path, **env) as dev:
        output = get_sync_client(url=dev.url).runs.wait(
            None,
            "memagent",
            input={"question": task.question, "doc_id": "needle.txt"},
            raise_error=False,
        )
    assert output.get("answer") == task.answer, output


def test_sixteen_concurrent_runs_on_sixteen_documents_each_answer_their_own_needle(tmp_path, tokenizer, documents):
    import asyncio

    from langgraph_sdk import get_client

    # depth 0.6: no needle of these seeds is cut by a chunk border (the rule model reads whole sentences only)
    tasks = [needle_document(tokens=1600, tokenizer=tokenizer, seed=200 + i, depth=0.6) for i in range(16)]
    for index, task in enumerate(tasks):
        (documents / f"concurrent{index}.txt").write_text(task.text, encoding="utf-8")

    async def read_all(url: str) -> list[dict]:
        client = get_client(url=url)
        return await asyncio.gather(
            *(
                client.runs.wait(None, "memagent", input={"question": t.question, "doc_id": f"concurrent{i}.txt"})
                for i, t in enumerate(tasks)
            )
        )

    # the model's own /tokenize: every tokenizer call of the server is seen
    with SimulatedOpenAIServer(tokenizer=tokenizer, delay_s=0.05) as model:
        env = {"MEMAGENT_BASE_URL": model.base_url, "MEMAGENT_DOCUMENTS_DIR": str(documents)}
        with langgraph_dev(tmp_path, jobs=16, **env) as dev:
            outputs = asyncio.run(read_all(dev.url))
    assert [output["answer"] for output in outputs] == [task.answer for task in tasks]
    for index, output in enumerate(outputs):  # no other thread's evidence reached this one's citations
        assert {c["source"] for c in output["citations"]} == {str(documents / f"concurrent{index}.txt")}
    # the reads ran at once, not one after another (one at a time would keep 1 call in flight; how many overlap
    # depends on the machine's load: 7 to 16 on a busy 2-core machine)
    assert model.max_in_flight >= 4
    for task in tasks:  # each document is tokenized for its chunks once and read back once, not again per step
        prompts = [body["prompt"] for path, body in model.requests if path == "/tokenize"]
        assert sum(task.answer in p and len(p) > 1000 for p in prompts) <= 2, task.answer


def test_a_stalled_model_call_does_not_hold_up_another_run(client, endpoint, documents, tokenizer):
    import threading

    slow, fast = (needle_document(tokens=1600, tokenizer=tokenizer, seed=seed, depth=0.6) for seed in (200, 202))
    (documents / "stalled.txt").write_text(slow.text, encoding="utf-8")
    (documents / "quick.txt").write_text(fast.text, encoding="utf-8")
    stalled, release = threading.Event(), threading.Event()

    def stall_the_first_call(index: int) -> None:  # the slow run's first call: held until the quick run is done
        if not stalled.is_set():
            stalled.set()
            release.wait(timeout=30)

    endpoint.on_completion = stall_the_first_call
    try:
        thread = client.threads.create()
        run = client.runs.create(
            thread["thread_id"], "memagent", input={"question": slow.question, "doc_id": "stalled.txt"}
        )
        assert stalled.wait(timeout=30)
        quick = client.runs.wait(None, "memagent", input={"question": fast.question, "doc_id": "quick.txt"})
        status = client.runs.get(thread["thread_id"], run["run_id"])["status"]
    finally:
        release.set()
        endpoint.on_completion = None
    assert quick["answer"] == fast.answer and status == "running"
    assert client.runs.join(thread["thread_id"], run["run_id"])["answer"] == slow.answer


def test_a_cancelled_run_stops_calling_the_model_within_one_chunk(tmp_path, tokenizer, documents, task):
    slow_document = needle_document(tokens=40 * 400, tokenizer=tokenizer, seed=11, depth=0.9)
    (documents / "slow.txt").write_text(slow_document.text, encoding="utf-8")
    with SimulatedOpenAIServer(tokenizer=tokenizer, delay_s=0.2) as slow:
        env = {"MEMAGENT_BASE_URL": slow.base_url, "MEMAGENT_DOCUMENTS_DIR": str(documents)}
        with langgraph_dev(tmp_path, **env) as dev:
            client = get_sync_client(url=dev.url)
            thread = client.threads.create()
            run = client.runs.create(
                thread["thread_id"], "memagent", input={"question": slow_document.question, "doc_id": "slow.txt"}
            )
            deadline = time.monotonic() + 60
            while len(slow.chat_requests()) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            client.runs.cancel(thread["thread_id"], run["run_id"], wait=True)
            at_cancel = len(slow.chat_requests())
            time.sleep(1.0)  # five more calls' time
            after = len(slow.chat_requests())
    assert 3 <= at_cancel < 40 and after - at_cancel <= 1


def test_the_servers_memory_stays_bounded_over_two_hundred_stateless_runs(server, documents, tokenizer):
    import asyncio

    import psutil
    from langgraph_sdk import get_client

    small = needle_document(tokens=700, tokenizer=tokenizer, seed=5, depth=0.5)
    for index in range(200):  # a new document each run: documents and graphs must be let go
        (documents / f"small{index}.txt").write_text(small.text, encoding="utf-8")
    process = psutil.Process(server.pid)

    async def read(runs: range) -> list[str]:
        """Runs ``runs``, 16 in flight at a time (the server's slots): one after another, most of a run's time
        is the server's wait for its next queued run."""
        client, slots = get_client(url=server.url), asyncio.Semaphore(16)

        async def one(index: int) -> str:
            async with slots:
                inputs = {"question": small.question, "doc_id": f"small{index}.txt"}
                return (await client.runs.wait(None, "memagent", input=inputs))["answer"]

        return await asyncio.gather(*(one(index) for index in runs))

    assert asyncio.run(read(range(20))) == [small.answer] * 20
    settled = process.memory_info().rss
    assert asyncio.run(read(range(20, 200))) == [small.answer] * 180
    assert process.memory_info().rss - settled < 64 * 2**20, (settled, process.memory_info().rss)
