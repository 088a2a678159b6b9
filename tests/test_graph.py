"""The graph's behaviour with a deterministic rule-following model."""

import re

import pytest

from memagent_graph import DocumentRegistry, MemAgentConfig, TextDocument, build_memagent_graph, create_memagent
from memagent_graph.config import RetrySettings
from memagent_graph.errors import ConfigError, FingerprintMismatchError
from memagent_graph.graph import recursion_limit_for
from memagent_graph.nodes.provenance import MAX_CITATIONS, MAX_SOURCES, MIN_SPAN_CHARS
from memagent_graph.nodes.read_checks import minimum_recursion_limit
from memagent_graph.testing import RuleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)


def _graph(model, tokenizer, text, config=CONFIG, **options):
    documents = DocumentRegistry({"doc": TextDocument(text)})
    graph = create_memagent(model, documents=documents, tokenizer=tokenizer, config=config, **options)
    chunked = documents.chunked("doc", tokenizer, config.chunk_tokens)
    return graph, chunked


def _run(graph, chunked, question="What is the special magic city?", **config):
    return graph.invoke(
        {"question": question, "doc_id": "doc"},
        {"recursion_limit": recursion_limit_for(chunked.num_chunks), **config},
    )


def _stream(graph, chunked, question, mode):
    return list(
        graph.stream(
            {"question": question, "doc_id": "doc"},
            {"recursion_limit": recursion_limit_for(chunked.num_chunks)},
            stream_mode=mode,
        )
    )


def _memory_updates(graph, chunked, question):
    return [u["update_memory"] for u in _stream(graph, chunked, question, "updates") if "update_memory" in u]


def _section(prompt):
    return re.search(r"<section>\n(.*?)\n</section>", prompt, re.DOTALL).group(1)


def test_build_returns_an_uncompiled_graph_with_the_three_nodes(model, tokenizer):
    builder = build_memagent_graph(model, documents=DocumentRegistry(), tokenizer=tokenizer)
    assert {"read_chunk", "update_memory", "final_answer"} <= set(builder.nodes)
    assert not hasattr(builder, "invoke")


def test_each_chunk_is_one_graph_step_and_one_traced_node_run(model, tokenizer, needle):
    from langchain_core.callbacks import BaseCallbackHandler

    class NodeRuns(BaseCallbackHandler):
        def __init__(self):
            self.names = []

        def on_chain_start(self, serialized, inputs, **kwargs):
            self.names.append(kwargs.get("name"))

    graph, chunked = _graph(model, tokenizer, needle.text)
    runs = NodeRuns()
    steps = _stream(graph, chunked, needle.question, "updates")
    _run(graph, chunked, needle.question, callbacks=[runs])
    assert [next(iter(step)) for step in steps] == ["read_chunk"] + ["update_memory"] * chunked.num_chunks + [
        "final_answer"
    ]
    assert runs.names.count("update_memory") == chunked.num_chunks  # no nested run of the same node
    assert runs.names.count("read_chunk") == runs.names.count("final_answer") == 1


async def test_prompts_carry_each_chunk_in_order(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    await graph.ainvoke(
        {"question": needle.question, "doc_id": "doc"}, {"recursion_limit": recursion_limit_for(chunked.num_chunks)}
    )
    updates = [call["prompt"] for call in model.calls[:-1]]
    assert [_section(p) for p in updates] == [chunked.chunk_text(i) for i in range(chunked.num_chunks)]


def test_memory_passes_from_each_step_to_the_next(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    memories = [update["memory"] for update in _memory_updates(graph, chunked, needle.question)]
    prompts = [call["prompt"] for call in model.calls]
    assert "No previous notes." in prompts[0]
    for memory, prompt in zip(memories, prompts[1:], strict=True):
        assert f"<previous_notes>\n{memory}\n</previous_notes>" in prompt or f"<notes>\n{memory}\n</notes>" in prompt


def test_answer_comes_from_the_memory_boxed(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    result = _run(graph, chunked, needle.question)
    assert (result["answer"], result["answer_source"]) == (needle.answer, "boxed")
    assert "<section>" not in model.calls[-1]["prompt"]


def test_output_reports_chunks_and_usage(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    result = _run(graph, chunked, needle.question)
    assert result["num_chunks"] == chunked.num_chunks > 3
    assert result["usage"]["calls"] == chunked.num_chunks + 1
    assert result["usage"]["prompt_tokens"] > chunked.num_tokens


def test_token_limits_and_sampling_reach_the_model(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    _run(graph, chunked, needle.question)
    assert {(c["max_tokens"], c["temperature"], c["top_p"]) for c in model.calls[:-1]} == {(120, 0.7, 0.95)}
    assert model.calls[-1]["max_tokens"] == 50


def test_run_settings_override_the_config_per_run(model, tokenizer, needle):
    from memagent_graph.state import RunSettings

    graph, chunked = _graph(model, tokenizer, needle.text)
    graph.invoke(
        {"question": needle.question, "doc_id": "doc"},
        {"recursion_limit": recursion_limit_for(chunked.num_chunks)},
        context=RunSettings(memory_tokens=60, temperature=0.0),
    )
    assert {(c["max_tokens"], c["temperature"]) for c in model.calls[:-1]} == {(60, 0.0)}


def test_memory_budget_is_enforced_and_flagged(tokenizer, needle):
    graph, chunked = _graph(RuleMemoryModel(pad_words=500), tokenizer, needle.text)
    steps = [update["last_step"] for update in _memory_updates(graph, chunked, needle.question)]
    assert all(s["truncated"] and s["memory_tokens"] <= 120 for s in steps)


def test_empty_completion_is_retried_and_the_retry_is_kept(tokenizer, needle):
    model = RuleMemoryModel(empty_replies_at=frozenset({2}))
    config = CONFIG.model_copy(update={"retries": RetrySettings(initial_backoff_s=0.0)})
    graph, chunked = _graph(model, tokenizer, needle.text, config)
    memories = _memory_updates(graph, chunked, needle.question)
    assert (memories[2]["last_step"]["empty"], memories[2]["last_step"]["retries"]) == (False, 1)
    assert needle.answer in memories[2]["memory"]


def test_completion_empty_on_every_try_keeps_the_previous_memory(tokenizer, needle):
    model = RuleMemoryModel(empty_replies_at=frozenset({2, 3}))
    config = CONFIG.model_copy(update={"retries": RetrySettings(max_attempts=2, initial_backoff_s=0.0)})
    graph, chunked = _graph(model, tokenizer, needle.text, config)
    memories = _memory_updates(graph, chunked, needle.question)
    assert (memories[2]["last_step"]["empty"], memories[2]["last_step"]["retries"]) == (True, 1)
    assert memories[2]["memory"] == memories[1]["memory"]


def test_progress_events_count_chunks(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    events = _stream(graph, chunked, needle.question, "custom")
    assert [(e["chunk"], e["total"]) for e in events] == [
        (i + 1, chunked.num_chunks) for i in range(chunked.num_chunks)
    ]
    assert all(e["type"] == "memagent.progress" and e["elapsed_s"] >= 0 for e in events)


def test_the_minimum_recursion_limit_completes_a_read(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    exact = minimum_recursion_limit(chunked.num_chunks)
    assert exact == recursion_limit_for(chunked.num_chunks) - 8  # the slack
    assert graph.invoke({"question": needle.question, "doc_id": "doc"}, {"recursion_limit": exact})["answer"]


def test_a_recursion_limit_one_below_the_minimum_is_refused_before_any_model_call(model, tokenizer, needle):
    graph, chunked = _graph(model, tokenizer, needle.text)
    too_low = minimum_recursion_limit(chunked.num_chunks) - 1
    with pytest.raises(ConfigError, match=f"recursion_limit.*{recursion_limit_for(chunked.num_chunks)}"):
        graph.invoke({"question": needle.question, "doc_id": "doc"}, {"recursion_limit": too_low})
    assert model.calls == []


def test_state_holds_no_document_text_and_no_growing_lists(model, tokenizer, needle):
    from langgraph.checkpoint.memory import InMemorySaver

    graph, chunked = _graph(model, tokenizer, needle.text, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    _run(graph, chunked, needle.question, **config)
    values = graph.get_state(config).values
    assert set(values) <= {
        "question",
        "doc_id",
        "fingerprint",
        "num_chunks",
        "cursor",
        "finished",
        "chunk",
        "memory",
        "started_at",
        "last_step",
        "usage",
        "answer",
        "answer_source",
        "evidence",
        "citations",
        "unsupported",
        "segments",
    }
    assert values.get("segments", []) == []  # parallel segments only (one entry per segment: a fixed number)
    bounded = {"evidence", "citations", "unsupported", "segments"}  # the memory's spans, the answer's sources
    assert not any(isinstance(v, list) for k, v in values.items() if k not in bounded)
    assert len(values["evidence"]) <= len(values["memory"]) // MIN_SPAN_CHARS  # each span is memory text
    assert all(len(span["sources"]) <= MAX_SOURCES for span in values["evidence"])
    assert len(values["citations"]) <= MAX_CITATIONS
    assert chunked.chunk_text(0)[:200] not in str(values)


def test_resuming_a_thread_on_another_document_is_refused(model, tokenizer, needle):
    from langgraph.checkpoint.memory import InMemorySaver

    documents = DocumentRegistry({"doc": TextDocument(needle.text)})
    graph = create_memagent(
        model, documents=documents, tokenizer=tokenizer, config=CONFIG, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    graph.invoke({"question": needle.question, "doc_id": "doc"}, config, interrupt_after=["update_memory"])
    assert graph.get_state(config).values["cursor"] == 1  # stopped after its first chunk
    documents.add(TextDocument(needle.text + " changed"), doc_id="doc")
    with pytest.raises(FingerprintMismatchError, match="different document"):
        graph.invoke(None, config)


@pytest.mark.integration
def test_checkpoint_database_of_a_200_chunk_run_stays_small(tokenizer, tmp_path):
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    text = " ".join(f"Sentence {i} of the long report, with some ordinary filler words." for i in range(4000))
    path = tmp_path / "checkpoints.db"
    connection = sqlite3.connect(path, check_same_thread=False)
    config = MemAgentConfig(chunk_tokens=300, memory_tokens=200)
    graph, chunked = _graph(
        RuleMemoryModel(pad_words=150), tokenizer, text, config=config, checkpointer=SqliteSaver(connection)
    )
    assert chunked.num_chunks >= 200
    graph.invoke(
        {"question": "q", "doc_id": "doc"},
        {"configurable": {"thread_id": "t"}, "recursion_limit": recursion_limit_for(chunked.num_chunks)},
        durability="sync",
    )
    connection.close()
    size = path.stat().st_size
    # Measured ~11 KB per chunk (two checkpoints of a ~1 KB memory plus SQLite overhead). Document or chunk text
    # in state would add the whole text to every one of the ~2 checkpoints per chunk (hundreds of MB here).
    assert size < chunked.num_chunks * 16_000, size
