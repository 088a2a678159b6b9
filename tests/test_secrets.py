"""An API key never leaks: not in output, logs (even --debug), error messages, or checkpoint files."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memagent_graph.documents.haystack import needle_document
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: CLI subprocesses against a loopback server

KEY = "sk-PLANTED-a1b2c3d4e5f6g7h8i9j0"


@pytest.fixture
def files(tokenizer, tmp_path):
    tokenizer.save(tmp_path / "tokenizer.json")
    task = needle_document(tokens=1200, tokenizer=tokenizer, seed=2, depth=0.0)
    (tmp_path / "doc.txt").write_text(task.text)
    return tmp_path, task


def _ask(folder, task, base_url, *extra):
    command = [
        sys.executable, "-m", "memagent_graph.integrations.cli",
"--debug", "ask", str(folder / "doc.txt"), task.question,
        "--base-url", base_url, "--model", "rule-model", "--api-key", KEY,
        "--tokenizer", str(folder / "tokenizer.json"),
        "--chunk-tokens", "300", "--memory-tokens", "100", "--answer-tokens", "30", "--json", *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_a_successful_checkpointed_run_never_writes_the_key(files):
    folder, task = files
    with SimulatedOpenAIServer() as server:
        done = _ask(folder, task, server.base_url, "--checkpoint-db", str(folder / "run.db"))
    assert done.returncode == 0 and task.answer in done.stdout
    assert "DEBUG" in done.stderr  # the debug logs were on, and were scanned
    assert KEY not in done.stdout + done.stderr
    for path in (path for path in folder.rglob("*") if path.is_file()):  # the chunk index folder too
        assert KEY.encode() not in path.read_bytes(), path.name


def test_a_rejected_key_is_not_echoed(files):
    folder, task = files
    with SimulatedOpenAIServer(status=401) as server:
        done = _ask(folder, task, server.base_url)
    assert done.returncode == 1 and "rejected the API key" in done.stderr
    assert KEY not in done.stdout + done.stderr
