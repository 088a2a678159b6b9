"""Lockstep mode: Q questions over one document, each chunk read once, one batched call per chunk."""

import re

import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.errors import EmptyQuestionError
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)
QUESTIONS = ["What is the special magic colour?", "Which colour is special?", "Name the magic colour."]


class CountingBatches(RuleMemoryModel):
    batches: int = 0

    def batch(self, inputs, config=None, **kwargs):
        self.batches += 1
        return super().batch(inputs, config, **kwargs)


def _section(prompt):
    return re.search(r"<section>\n(.*?)\n</section>", prompt, re.DOTALL).group(1)


def test_each_chunk_is_read_once_with_one_batched_call(tokenizer, needle):
    model = CountingBatches()
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer)
    results = agent.ask_many(QUESTIONS, TextDocument(needle.text))
    num_chunks = results[0].num_chunks
    assert model.batches == num_chunks + 1  # one per chunk, one for the answers
    updates = [call["prompt"] for call in model.calls[: len(QUESTIONS) * num_chunks]]
    for chunk in range(num_chunks):
        group = updates[chunk * len(QUESTIONS) : (chunk + 1) * len(QUESTIONS)]
        assert {_section(p) for p in group} == {agent.chunk(TextDocument(needle.text)).chunk_text(chunk)}


def test_each_question_gets_its_own_result_equal_to_a_single_read(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    document = TextDocument(needle.text)
    lockstep = agent.ask_many(QUESTIONS, document)
    singles = [agent.invoke(q, document) for q in QUESTIONS]
    assert [r.answer for r in lockstep] == [r.answer for r in singles] == [needle.answer] * 3
    assert [r.memory for r in lockstep] == [r.memory for r in singles]
    assert all(len(r.steps) == r.num_chunks + 1 == r.usage["calls"] for r in lockstep)
    assert [r.citations for r in lockstep] == [r.citations for r in singles] and lockstep[0].citations


def test_a_lockstep_read_of_one_question_records_the_steps_of_a_single_read(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(report_usage=True), config=CONFIG, tokenizer=tokenizer)
    document = TextDocument(needle.text)
    [lockstep], single = agent.ask_many(QUESTIONS[:1], document), agent.invoke(QUESTIONS[0], document)

    def without_latency(steps):
        return [{k: v for k, v in step.items() if k != "latency_s"} for step in steps]

    assert without_latency(lockstep.steps) == without_latency(single.steps)
    assert (lockstep.answer, lockstep.memory, lockstep.usage) == (single.answer, single.memory, single.usage)


def test_each_question_keeps_its_own_memory(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    model = agent._model
    agent.ask_many(["First question?", "Second question?"], TextDocument(needle.text))
    second_round = model.calls[2:4]
    assert "First question?" in second_round[0]["prompt"] and "Second question?" in second_round[1]["prompt"]


def test_an_empty_question_is_refused(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    with pytest.raises(EmptyQuestionError):
        agent.ask_many(["ok?", " "], TextDocument(needle.text))


def test_progress_events_report_every_memory(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    chunked = agent.chunk(TextDocument(needle.text))
    graph_input = {"questions": QUESTIONS[:2], "doc_id": chunked.doc_id}
    events = list(agent.lockstep_graph.stream(graph_input, {"recursion_limit": 100}, stream_mode="custom"))
    assert [e["chunk"] for e in events] == list(range(1, chunked.num_chunks + 1))
    assert all(len(e["memory_tokens"]) == 2 for e in events)


@pytest.mark.engine
@pytest.mark.slow
def test_the_embedded_engine_runs_each_lockstep_call_as_one_generate():
    from memagent_graph.integrations.models.embedded_chat import embedded_chat_model

    engine = embedded_chat_model(batch_wait_s=0.05)
    config = MemAgentConfig(chunk_tokens=256, memory_tokens=24, answer_tokens=12, temperature=0.0)
    agent = MemAgent(engine, config=config, tokenizer=engine.tokenizer())
    results = agent.ask_many(
        ["What is the magic number?", "Which number is magic?"],
        TextDocument("A short note. The magic number is 4711. End of note."),
    )
    assert len(results) == 2 and results[0].num_chunks == 1
    assert engine.generate_calls == 2  # one for both memory updates, one for both answers
