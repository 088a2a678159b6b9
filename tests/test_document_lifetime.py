"""Documents have a lifetime: one-off documents are released at the registry's bound (an agent or a rollout
worker reading 1,000 of them stays flat), registered ones stay until forgotten, and a result's citations stay
readable after its document is released (`MemAgent.passage`, the retriever, the CLI's Evidence block)."""

from __future__ import annotations

import gc
import weakref

import psutil
import pytest
from langchain_core.documents import Document

from memagent_graph import DocumentRegistry, FileDocument, MemAgent, MemAgentConfig, TextDocument
from memagent_graph.config import RetrySettings
from memagent_graph.documents.haystack import haystack_paragraphs
from memagent_graph.errors import DocumentNotFoundError
from memagent_graph.integrations.cli.evidence import evidence_lines
from memagent_graph.integrations.retriever import MemAgentCompressor, MemAgentRetriever
from memagent_graph.testing import RuleMemoryModel
from memagent_graph.training.data.tasks import Task
from memagent_graph.training.rollout import worker as worker_module
from memagent_graph.training.rollout.backends import Generation
from memagent_graph.training.rollout.worker import Episode, RolloutWorker

CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=120, answer_tokens=50)
ONE_CHUNK = MemAgentConfig(chunk_tokens=1200, memory_tokens=64, answer_tokens=16)
"""Each one-off document in one chunk: a read is two model calls."""
READS = 1000
RSS_SLACK = 3 * 2**20
"""RSS may grow this much over the second half of the reads (allocator noise, not documents: they are counted)."""
FILLER = " ".join(haystack_paragraphs())[:1000]


def _one_off(index: int) -> TextDocument:
    """A distinct document of ~2 KB: a fact between two runs of filler."""
    return TextDocument(f"{FILLER}\nThe special magic number is n-{index}.\n{FILLER}")


LEAK_CHECK = pytest.mark.integration  # a thousand reads (~10 s each): the full run, not the unit tier


def _rss_after_gc() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


@LEAK_CHECK
def test_a_thousand_one_off_reads_through_one_agent_stay_at_the_bound(tokenizer):
    agent = MemAgent(RuleMemoryModel(), config=ONE_CHUNK, tokenizer=tokenizer)
    handed, rss = [], {}
    for index in range(READS):
        document = _one_off(index)
        handed.append(weakref.ref(document))
        assert agent.invoke("What is the special magic number?", document).answer == f"n-{index}"
        if index + 1 in (READS // 2, READS):
            rss[index + 1] = _rss_after_gc()
    del document
    alive = sum(ref() is not None for ref in handed)
    assert len(agent.documents) == alive == 32  # the default max_one_off: the most recent ones, for reuse
    assert _one_off(READS - 1).doc_id in agent.documents and _one_off(0).doc_id not in agent.documents
    assert rss[READS] - rss[READS // 2] < RSS_SLACK, rss


class _NoteTaker:
    """A rollout backend without a model: every call replies with the same short note (cheap episodes)."""

    policy_version = 0
    sampled_calls = 0

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return [0, 1, 2]

    def generate(self, prompts, sampling) -> list[Generation]:
        return [Generation([7], [0.0], "stop") for _ in prompts]

    def decode(self, ids) -> str:
        return "\\boxed{n}"


@LEAK_CHECK
def test_a_thousand_one_off_episodes_through_one_rollout_worker_stay_at_the_bound(tokenizer, tmp_path, monkeypatch):
    tokenizer.save(tmp_path / "tokenizer.json")  # the worker reads the policy folder's tokenizer
    monkeypatch.setattr(worker_module, "_backend", lambda *args, **options: _NoteTaker())
    reading = ONE_CHUNK.model_copy(update={"top_p": 1.0, "retries": RetrySettings(max_attempts=1)})
    worker = RolloutWorker(tmp_path, reading=reading, seed=0)
    batch, rss = 50, {}
    for start in range(0, READS, batch):
        tasks = [Task("What is the number?", _one_off(i).text, ["n"]) for i in range(start, start + batch)]
        episodes = [Episode(f"e{start + i}", f"g{start + i}", task) for i, task in enumerate(tasks)]
        assert all(rollout.calls[-1].node == "final_answer" for rollout in worker.run(episodes))
        if start + batch in (READS // 2, READS):
            rss[start + batch] = _rss_after_gc()
    assert len(worker.agent.documents) == 32
    assert rss[READS] - rss[READS // 2] < RSS_SLACK, rss


def _fact(needle) -> str:
    return next(line for line in needle.text.split("\n\n") if line.startswith("The special magic"))


def test_forget_releases_a_document_and_its_citations_stay_readable(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    document = TextDocument(needle.text)
    result = agent.invoke(needle.question, document)
    agent.forget(document.doc_id)
    assert document.doc_id not in agent.documents and len(agent.documents) == 0
    with pytest.raises(DocumentNotFoundError, match="no document registered"):
        agent.invoke(needle.question, document.doc_id)
    text, start = agent.passage(result.citations[0], context_chars=20)
    assert _fact(needle) in text and needle.text[start : start + len(text)] == text


def test_citations_stay_readable_after_newer_one_offs_push_their_document_out(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer, documents=DocumentRegistry(max_one_off=1))
    first = agent.invoke(needle.question, TextDocument(needle.text))
    agent.invoke("What is the special magic number?", _one_off(0))
    assert TextDocument(needle.text).doc_id not in agent.documents
    text, start = agent.passage(first.citations[0])
    assert text == _fact(needle) and needle.text[start : start + len(text)] == text


def test_registered_documents_are_never_pushed_out_by_one_offs(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer, documents=DocumentRegistry(max_one_off=1))
    agent.documents.add(TextDocument(needle.text), doc_id="report")
    for index in range(3):
        agent.invoke("What is the special magic number?", _one_off(index))
    assert sorted(agent.documents) == sorted(["report", _one_off(2).doc_id])
    assert agent.invoke(needle.question, "report").answer == needle.answer


def test_the_retriever_and_compressor_cite_passages_of_documents_the_registry_does_not_keep(tokenizer, needle):
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer, documents=DocumentRegistry(max_one_off=0))
    [passage, _] = MemAgentRetriever(agent=agent, document=TextDocument(needle.text), context_chars=30).invoke(
        needle.question
    )
    start = passage.metadata["start_index"]
    assert _fact(needle) in passage.page_content
    assert needle.text[start : start + len(passage.page_content)] == passage.page_content
    pages = [Document(FILLER, metadata={"source": "page-0"}), Document(_fact(needle), metadata={"source": "page-1"})]
    [passage, memory] = MemAgentCompressor(agent=agent).compress_documents(pages, needle.question)
    assert passage.page_content == _fact(needle) and passage.metadata["source"] == "page-1"
    assert memory.metadata["answer"] == needle.answer
    assert len(agent.documents) == 0  # nothing kept: every read was a one-off


def test_the_evidence_block_quotes_a_released_file(tokenizer, needle, tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text(needle.text, encoding="utf-8")
    agent = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer)
    result = agent.invoke(needle.question, FileDocument(path))
    agent.forget(str(path))
    [header, line] = evidence_lines(agent, result)
    assert header == "Evidence:" and line.startswith(f"  {path}:") and _fact(needle) in line


def test_a_released_one_off_is_still_found_while_a_read_holds_it(tokenizer, needle):
    registry = DocumentRegistry(max_one_off=0)  # released as soon as it is registered
    held = registry.chunked_one_off(TextDocument(needle.text), tokenizer, 300)
    assert held.doc_id not in registry
    assert registry.chunked(held.doc_id, tokenizer, 300) is held  # what the graph's nodes look up mid-read
    del held
    with pytest.raises(DocumentNotFoundError):
        registry.chunked(TextDocument(needle.text).doc_id, tokenizer, 300)


def test_an_equal_one_off_keeps_the_chunk_index_and_another_document_under_its_id_replaces_it(tokenizer, needle):
    registry = DocumentRegistry()
    first = registry.chunked_one_off(TextDocument(needle.text, doc_id="d"), tokenizer, 300)
    assert registry.chunked_one_off(TextDocument(needle.text, doc_id="d"), tokenizer, 300) is first
    other = registry.chunked_one_off(TextDocument(needle.text + " more", doc_id="d"), tokenizer, 300)
    assert other.fingerprint != first.fingerprint and registry.chunked("d", tokenizer, 300) is other
