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
