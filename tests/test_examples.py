"""Every example runs (against the loopback OpenAI-compatible server)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: runs the example scripts

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_ask_a_file_prints_the_answer(tmp_path, needle):
    path = tmp_path / "doc.txt"
    path.write_text(needle.text)
    with SimulatedOpenAIServer() as server:
        env = {**os.environ, "MEMAGENT_BASE_URL": server.base_url}
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "ask_a_file.py"), str(path), needle.question],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert "chunk 1/" in result.stderr


def test_a_custom_memory_policy_registers_and_reads(tmp_path, needle):
    path = tmp_path / "doc.txt"
    path.write_text(needle.text)
    with SimulatedOpenAIServer() as server:
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "custom_memory_policy.py"), str(path), needle.question],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "MEMAGENT_BASE_URL": server.base_url},
        )
        update_calls = [r for r in server.chat_requests() if "<section>" in r["messages"][-1]["content"]]
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert update_calls == []  # the policy wrote every memory; the model only answered
