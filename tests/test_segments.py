"""Parallel segments: P contiguous segments read at once, each with its own memory, merged by one more pass of
the same memory update before the answer; checkpointed per round, evidence kept through the merge."""

from __future__ import annotations

import asyncio

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from test_agent import FailAt  # a model that fails once, at its N-th call

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.registry import DocumentRegistry
from memagent_graph.errors import ConfigError, ModelError
from memagent_graph.graph import create_memagent
from memagent_graph.nodes.segments import MERGE, merge_sections, split_segments
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50, segments=4)


@pytest.fixture
def long_needle(tokenizer):
    return needle_document(tokens=6000, tokenizer=tokenizer, seed=7, depth=0.4)


ONE_EMPTY_MEMORY = {"memory": "", "evidence": []}


def test_segments_split_the_chunks_into_contiguous_parts_of_nearly_equal_length():
    segments = split_segments(10, 4, empty=ONE_EMPTY_MEMORY)
    assert [(s["start"], s["end"]) for s in segments] == [(0, 2), (2, 5), (5, 7), (7, 10)]
    assert all(s["cursor"] == s["start"] and s["memory"] == "" for s in segments)


def test_never_more_segments_than_chunks():
    assert [(s["start"], s["end"]) for s in split_segments(2, 8, empty=ONE_EMPTY_MEMORY)] == [(0, 1), (1, 2)]


def test_merge_sections_pack_whole_memories_in_order_within_a_chunk(tokenizer):
    memories = ["alpha beta gamma", "", "delta epsilon", "zeta eta theta iota"]
    sections = merge_sections(memories, tokenizer, chunk_tokens=tokenizer.count("alpha beta gamma") + 8)
    assert "\n".join(sections).split("\n") == ["alpha beta gamma", "delta epsilon", "zeta eta theta iota"]
    assert all(tokenizer.count(section) <= tokenizer.count("alpha beta gamma") + 8 for section in sections)


@pytest.mark.parametrize("depth", [0.05, 0.4, 0.7])
def test_a_segmented_read_answers_like_the_sequential_one(tokenizer, depth):
    needle = needle_document(tokens=6000, tokenizer=tokenizer, seed=7, depth=depth)
    answers = {}
    for segments in (1, 4):
        config = CONFIG.model_copy(update={"segments": segments})
        agent = MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer)
        answers[segments] = agent.invoke(needle.question, TextDocument(needle.text)).answer
    assert answers[4] == answers[1] == needle.answer


def test_each_chunk_is_read_once_then_the_merge_and_the_answer(tokenizer, long_needle):
    model = RuleMemoryModel()
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer)
    events = list(agent.stream(long_needle.question, TextDocument(long_needle.text), progress=True))
    progress = [e for e in events if isinstance(e, dict) and e.get("type") == "memagent.progress"]
    result = events[-1]
    read = [(e["segment"], e["chunk"]) for e in progress if e["segment"] != MERGE]
    assert sorted(chunk for _, chunk in read) == list(range(1, result.num_chunks + 1))
    assert {segment for segment, _ in read} == {0, 1, 2, 3}
    merges = [e for e in progress if e["segment"] == MERGE]
    assert merges and all(e["chunk"] == e["total"] == result.num_chunks for e in merges)
    assert len(model.calls) == result.num_chunks + len(merges) + 1 == result.usage["calls"]
    assert len(result.steps) == len(model.calls)


def test_the_answer_cites_the_document_through_the_merge(tokenizer, long_needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    result = agent.invoke(long_needle.question, TextDocument(long_needle.text))
    assert result.citations
    cited = result.citations[0]
    assert long_needle.answer in long_needle.text[cited["start"] : cited["end"]]


@pytest.mark.integration
def test_the_segments_are_read_all_at_once(tokenizer, long_needle):
    from memagent_graph.integrations import openai_compatible
    from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

    config = CONFIG.model_copy(update={"segments": 8})  # more than LangGraph's default pool of threads here
    with SimulatedOpenAIServer(tokenizer=tokenizer, delay_s=0.1) as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer)
        result = MemAgent(model, config=config, tokenizer=tokenizer).invoke(
            long_needle.question, TextDocument(long_needle.text)
        )
    assert result.answer == long_needle.answer and server.max_in_flight == 8


@pytest.mark.integration
def test_max_concurrency_bounds_the_segments_read_at_once(tokenizer, long_needle):
    from memagent_graph.integrations import openai_compatible
    from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

    with SimulatedOpenAIServer(tokenizer=tokenizer, delay_s=0.05) as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer)
        documents = DocumentRegistry({"doc": TextDocument(long_needle.text)})
        graph = create_memagent(model, documents=documents, tokenizer=tokenizer, config=CONFIG)
        out = graph.invoke(
            {"question": long_needle.question, "doc_id": "doc"}, {"max_concurrency": 2, "recursion_limit": 100}
        )
    assert out["answer"] == long_needle.answer and server.max_in_flight == 2


def test_a_failed_segmented_read_resumes_every_segment_without_resending_a_chunk(tokenizer, long_needle):
    model = FailAt(fail_at=10, wait_s=0.5)  # the other segments' calls of that step answer first
    agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=InMemorySaver())
    with pytest.raises(ModelError):
        agent.invoke(long_needle.question, TextDocument(long_needle.text), thread_id="job")
    sent_before = [c["prompt"] for c in model.calls]
    pending = agent.unfinished("job")
    assert pending is not None and 8 <= pending.chunks_done < pending.num_chunks
    result = agent.invoke(long_needle.question, TextDocument(long_needle.text), thread_id="job")
    resent = [c["prompt"] for c in model.calls[len(sent_before) :]]
    assert result.answer == long_needle.answer
    assert not set(resent) & set(sent_before)
    assert len(set(sent_before) | set(resent)) == result.usage["calls"] == len(sent_before) + len(resent)


def test_lockstep_reading_with_segments_answers_like_the_sequential_lockstep(tokenizer, long_needle):
    questions = [long_needle.question, "What is the special magic number?"]
    results = {}
    for segments in (1, 4):
        model = RuleMemoryModel()
        config = CONFIG.model_copy(update={"segments": segments})
        agent = MemAgent(model, config=config, tokenizer=tokenizer)
        results[segments] = agent.ask_many(questions, TextDocument(long_needle.text))
    assert [r.answer for r in results[4]] == [r.answer for r in results[1]] == [long_needle.answer] * 2
    for result in results[4]:
        assert long_needle.answer in long_needle.text[result.citations[0]["start"] : result.citations[0]["end"]]
        assert len(result.steps) == result.usage["calls"] > result.num_chunks  # its chunks, merge and answer


def test_a_killed_merge_resumes_at_its_next_round_without_resending_a_merge_call(tokenizer, long_needle):
    config = CONFIG.model_copy(update={"memory_tokens": 200})
    document = TextDocument(long_needle.text)
    # 90 filler words a memory: two segments' memories fill a 300-token section, so the merge takes 2 rounds
    whole = MemAgent(RuleMemoryModel(pad_words=90), config=config, tokenizer=tokenizer).invoke("Q?", document)
    model = FailAt(fail_at=whole.num_chunks + 1, pad_words=90)  # the second merge round's call fails
    agent = MemAgent(model, config=config, tokenizer=tokenizer, checkpointer=InMemorySaver())
    with pytest.raises(ModelError):
        agent.invoke("Q?", document, thread_id="job")
    sent_before = len(model.calls)
    resumed = agent.invoke("Q?", document, thread_id="job")
    assert whole.usage["calls"] >= whole.num_chunks + 3  # chunks, two merge rounds or more, the answer
    assert sent_before == whole.num_chunks + 1  # every chunk and the merge's first round
    assert (resumed.memory, resumed.answer) == (whole.memory, whole.answer)
    assert len(model.calls) == resumed.usage["calls"] == whole.usage["calls"]  # nothing sent twice


def test_segments_below_one_are_refused():
    with pytest.raises(ConfigError, match="segments"):
        MemAgentConfig.build(segments=0)


def test_the_sync_and_async_reads_agree_under_a_running_loop(tokenizer, long_needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    sync = agent.invoke(long_needle.question, TextDocument(long_needle.text))
    asynchronous = asyncio.run(agent.ainvoke(long_needle.question, TextDocument(long_needle.text)))
    assert (sync.answer, sync.memory) == (asynchronous.answer, asynchronous.memory)


@pytest.mark.engine
@pytest.mark.slow
def test_quote_memory_reads_segments_on_the_embedded_engine_and_cites_the_answer():
    from memagent_graph.integrations.model_choice import EMBEDDED_READING
    from memagent_graph.integrations.models.embedded_chat import embedded_chat_model
    from memagent_graph.training.data.task_suite import suite_task

    engine = embedded_chat_model()
    tokenizer = engine.tokenizer()
    task = suite_task("niah_multikey_1", 3, tokens=8192, tokenizer=tokenizer, split="eval")
    config = MemAgentConfig(**EMBEDDED_READING, segments=2)
    result = MemAgent(engine, config=config, tokenizer=tokenizer).invoke(task.question, TextDocument(task.document))
    assert result.answer in task.golds and result.num_chunks >= 4
    assert any(task.golds[0] in task.document[c["start"] : c["end"]] for c in result.citations)
