"""The `MemAgent` facade: results, streaming, batching, resuming a checkpointed thread."""

import asyncio
import time

import pytest
from langchain_core.documents import Document
from langgraph.checkpoint.memory import InMemorySaver

from memagent_graph import LangChainDocuments, MemAgent, MemAgentConfig, MemAgentResult, TextDocument
from memagent_graph.errors import EmptyQuestionError, FingerprintMismatchError, ModelError
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)


@pytest.fixture
def agent(model, tokenizer):
    return MemAgent(model, config=CONFIG, tokenizer=tokenizer)


def test_invoke_returns_a_result_with_answer_memory_steps_and_usage(agent, needle):
    result = agent.invoke(needle.question, TextDocument(needle.text))
    assert result.answer == needle.answer
    assert needle.answer in result.memory
    assert len(result.steps) == result.num_chunks + 1 == result.usage["calls"]
    assert [s["node"] for s in result.steps][-2:] == ["update_memory", "final_answer"]
    assert result.elapsed_s > 0 and result.thread_id


async def test_ainvoke_equals_invoke(agent, needle):
    document = TextDocument(needle.text)
    first = await agent.ainvoke(needle.question, document)
    assert first.answer == agent.invoke(needle.question, document).answer


def test_invoke_works_inside_a_running_event_loop(agent, needle):
    async def caller():
        return agent.invoke(needle.question, TextDocument(needle.text))

    assert asyncio.run(caller()).answer == needle.answer


def test_stream_yields_progress_then_the_result(agent, needle):
    items = list(agent.stream(needle.question, TextDocument(needle.text)))
    *events, result = items
    assert isinstance(result, MemAgentResult)
    assert [e["chunk"] for e in events] == list(range(1, result.num_chunks + 1))


def test_the_recursion_limit_is_computed_and_passed(agent, needle, monkeypatch):
    seen = {}
    original = agent.graph.stream

    def spy(graph_input, config, **kwargs):
        seen.update(config)
        return original(graph_input, config, **kwargs)

    monkeypatch.setattr(agent.graph, "stream", spy)
    result = agent.invoke(needle.question, TextDocument(needle.text))
    assert seen["recursion_limit"] == result.num_chunks + 11


def test_batch_answers_each_question_in_order(agent, tokenizer):
    from memagent_graph.documents.haystack import needle_document

    tasks = [needle_document(tokens=1200, tokenizer=tokenizer, seed=s) for s in range(4)]
    results = agent.batch([t.question for t in tasks], [TextDocument(t.text) for t in tasks], max_concurrency=2)
    assert [r.answer for r in results] == [t.answer for t in tasks]
    assert len({r.thread_id for r in results}) == 4


async def test_abatch_with_one_document_for_many_questions(agent, needle):
    results = await agent.abatch([needle.question, "What is the special magic planet?"], TextDocument(needle.text))
    assert results[0].answer == needle.answer and results[1].answer == needle.answer  # the rule model boxes any fact


async def test_abatch_can_return_exceptions_per_question(agent, needle):
    results = await agent.abatch([needle.question, ""], TextDocument(needle.text), return_exceptions=True)
    assert results[0].answer == needle.answer and isinstance(results[1], EmptyQuestionError)


def test_documents_can_be_named_by_registry_id(agent, needle):
    doc_id = agent.documents.add(TextDocument(needle.text), doc_id="report")
    assert agent.invoke(needle.question, doc_id).answer == needle.answer


def test_langchain_documents_are_read_in_order(agent, tokenizer):
    documents = [
        Document("The special magic city is lyon-1111.", metadata={"p": 1}),
        Document("The special magic city is oslo-2222.", metadata={"p": 2}),
    ]
    assert agent.invoke("What is the special magic city?", LangChainDocuments(documents)).answer == "oslo-2222"


def test_empty_question_is_refused_before_any_model_call(agent, model, needle):
    with pytest.raises(EmptyQuestionError):
        agent.invoke("  ", TextDocument(needle.text))
    assert model.calls == []


class FailAt(RuleMemoryModel):
    """Fails once, at call ``fail_at``, after ``wait_s`` seconds (a wait lets the calls in flight beside it answer
    first: LangGraph stops waiting for a step's other tasks when one fails, and sends them again on resume)."""

    fail_at: int = -1
    wait_s: float = 0.0

    def _reply(self, messages, options):
        if len(self.calls) == self.fail_at:  # decided as the call comes in: others may be recorded while it waits
            self.fail_at = -1
            time.sleep(self.wait_s)
            raise ModelError("simulated outage")
        return super()._reply(messages, options)


@pytest.fixture(params=["memory", "sqlite"])
def checkpointer(request, tmp_path):
    if request.param == "memory":
        yield InMemorySaver()
        return
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    connection = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    yield SqliteSaver(connection)
    connection.close()


def test_a_failed_checkpointed_run_resumes_without_resending_completed_chunks(tokenizer, needle, checkpointer):
    model = FailAt(fail_at=3)
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=checkpointer)
    with pytest.raises(ModelError):
        agent.invoke(needle.question, TextDocument(needle.text), thread_id="job")
    sent_before = [c["prompt"] for c in model.calls]
    result = agent.invoke(needle.question, TextDocument(needle.text), thread_id="job")
    resent = [c["prompt"] for c in model.calls[len(sent_before) :]]
    assert result.answer == needle.answer
    assert not set(resent) & set(sent_before)
    assert len(sent_before) + len(resent) == result.num_chunks + 1


class StopAt(RuleMemoryModel):
    """Sets ``stop`` while its ``stop_at``-th call (1-based) is in flight."""

    stop_at: int = -1
    stop: object = None

    def _reply(self, messages, options):
        if len(self.calls) + 1 == self.stop_at:
            self.stop.set()
        return super()._reply(messages, options)


@pytest.mark.parametrize("progress", [False, True])
def test_a_stopped_read_ends_after_the_current_chunk_and_resumes_without_resending_it(
    tokenizer, needle, checkpointer, progress
):
    import threading

    from memagent_graph.errors import ReadStopped

    model = StopAt(stop_at=3, stop=threading.Event())
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=checkpointer)
    document = TextDocument(needle.text)
    with pytest.raises(ReadStopped) as stopped:
        list(agent.stream(needle.question, document, thread_id="job", stop=model.stop, progress=progress))
    assert (stopped.value.chunks_done, len(model.calls)) == (3, 3)
    assert agent.unfinished("job").chunks_done == 3
    result = agent.invoke(needle.question, document, thread_id="job")
    assert result.answer == needle.answer
    assert len(model.calls) == result.num_chunks + 1  # chunk 3 was not sent again


async def test_async_runs_resume_with_an_async_sqlite_checkpointer(tokenizer, needle, tmp_path):
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    model = FailAt(fail_at=2)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "async.db")) as saver:
        agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=saver)
        with pytest.raises(ModelError):
            await agent.ainvoke(needle.question, TextDocument(needle.text), thread_id="job")
        result = await agent.ainvoke(needle.question, TextDocument(needle.text), thread_id="job")
    assert result.answer == needle.answer
    assert len(model.calls) == result.num_chunks + 1


def test_resuming_a_thread_with_another_question_is_refused(tokenizer, needle):
    agent = MemAgent(FailAt(fail_at=2), config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver())
    with pytest.raises(ModelError):
        agent.invoke(needle.question, TextDocument(needle.text), thread_id="job")
    with pytest.raises(FingerprintMismatchError, match="unfinished read of a different question"):
        agent.invoke("Another question?", TextDocument(needle.text), thread_id="job")


def test_a_finished_thread_can_run_a_new_read(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver())
    agent.invoke(needle.question, TextDocument(needle.text), thread_id="job")
    other = TextDocument("The special magic city is rome-3333.")
    result = agent.invoke("What is the special magic city?", other, thread_id="job")
    assert (result.answer, result.num_chunks) == ("rome-3333", 1)
