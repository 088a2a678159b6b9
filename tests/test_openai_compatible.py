"""The graph through `openai_compatible` against a real HTTP server on loopback."""

import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.config import RetrySettings
from memagent_graph.documents.haystack import needle_document
from memagent_graph.documents.tokenization import VLLMServerTokenizer
from memagent_graph.errors import (
    ConfigError,
    EndpointUnreachableError,
    ModelAuthenticationError,
    ModelError,
    ModelNotFoundError,
)
from memagent_graph.integrations import chat_model_from_env, openai_compatible
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: loopback HTTP servers and timeouts

CONFIG = MemAgentConfig(chunk_tokens=400, memory_tokens=150, answer_tokens=40)


def test_graph_answers_through_an_openai_compatible_server(tokenizer, needle):
    with SimulatedOpenAIServer() as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, max_retries=0)
        result = MemAgent(model, config=CONFIG, tokenizer=tokenizer).invoke(needle.question, TextDocument(needle.text))
    assert result.answer == needle.answer
    assert len(server.chat_requests()) == result.num_chunks + 1


def test_token_limit_and_sampling_reach_the_server(tokenizer, needle):
    with SimulatedOpenAIServer() as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, max_retries=0)
        MemAgent(model, config=CONFIG, tokenizer=tokenizer).invoke(needle.question, TextDocument(needle.text))
    bodies = server.chat_requests()
    limits = [body.get("max_completion_tokens", body.get("max_tokens")) for body in bodies]
    assert limits == [150] * (len(bodies) - 1) + [40]
    assert {(b["temperature"], b["top_p"]) for b in bodies} == {(0.7, 0.95)}


def test_server_usage_is_reported_in_steps(tokenizer, needle):
    with SimulatedOpenAIServer() as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, max_retries=0)
        result = MemAgent(model, config=CONFIG, tokenizer=tokenizer).invoke(needle.question, TextDocument(needle.text))
    assert {(s["prompt_tokens"], s["completion_tokens"], s["finish_reason"]) for s in result.steps} == {(11, 7, "stop")}


def test_model_defaults_to_the_servers_only_model():
    with SimulatedOpenAIServer(model_name="smol") as server:
        assert openai_compatible(server.base_url).model_name == "smol"


def _ask(model, tokenizer, config=CONFIG):
    return MemAgent(model, config=config, tokenizer=tokenizer).invoke("q?", TextDocument("Some text."))


def test_unknown_model_fails_fast_with_http_404(tokenizer):
    with SimulatedOpenAIServer() as server:
        model = openai_compatible(server.base_url, "no-such-model", tokenizer=tokenizer, max_retries=2)
        with pytest.raises(ModelNotFoundError, match="HTTP 404"):
            _ask(model, tokenizer)
        assert len(server.chat_requests()) == 1


def test_rejected_key_fails_fast_with_http_401(tokenizer):
    with SimulatedOpenAIServer(status=401) as server:
        model = openai_compatible(server.base_url, "m", api_key="sk-wrong", tokenizer=tokenizer, max_retries=2)
        with pytest.raises(ModelAuthenticationError, match="`api_key`"):
            _ask(model, tokenizer)
        assert len(server.chat_requests()) == 1


def test_server_errors_are_retried_in_one_layer_only(tokenizer):
    config = CONFIG.model_copy(update={"retries": RetrySettings(max_attempts=3, initial_backoff_s=0.01)})
    with SimulatedOpenAIServer(status=500) as server:
        model = openai_compatible(server.base_url, "m", tokenizer=tokenizer)
        with pytest.raises(ModelError, match="HTTP 500"):
            MemAgent(model, config=config, tokenizer=tokenizer).invoke("q?", TextDocument("Some text."))
        assert len(server.chat_requests()) == 3  # the graph's 3 tries, none from the client


def test_unreachable_endpoint_is_a_clear_error(tokenizer):
    model = openai_compatible("http://127.0.0.1:9/v1", "m", tokenizer=tokenizer, max_retries=0)
    one_try = CONFIG.model_copy(update={"retries": RetrySettings(max_attempts=1)})  # retries are tested elsewhere
    with pytest.raises(EndpointUnreachableError, match="cannot reach the model endpoint at http://127.0.0.1:9/v1"):
        _ask(model, tokenizer, one_try)


def test_chat_model_from_env_prefers_memagent_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("MEMAGENT_BASE_URL", "http://127.0.0.1:2/v1")
    monkeypatch.setenv("MEMAGENT_MODEL", "served")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fallback")
    model = chat_model_from_env()
    assert (model.openai_api_base, model.model_name) == ("http://127.0.0.1:2/v1", "served")
    assert model.openai_api_key.get_secret_value() == "sk-fallback"


def test_chat_model_from_env_without_an_endpoint_says_what_to_set(monkeypatch):
    for name in ("MEMAGENT_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError, match="MEMAGENT_BASE_URL"):
        chat_model_from_env()


async def test_max_concurrency_caps_the_requests_in_flight(tokenizer, needle):
    with SimulatedOpenAIServer(delay_s=0.05) as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, max_concurrency=2)
        agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer)
        await agent.abatch([needle.question] * 6, TextDocument(needle.text), max_concurrency=6)
    assert server.max_in_flight == 2


async def test_without_a_cap_requests_run_concurrently(tokenizer, needle):
    with SimulatedOpenAIServer(delay_s=0.05) as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer)
        agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer)
        await agent.abatch([needle.question] * 6, TextDocument(needle.text), max_concurrency=6)
    assert server.max_in_flight > 2


async def test_abatch_of_sixteen_documents_reads_them_at_once_each_answering_its_own(tokenizer):
    # depth 0.6: no needle of these seeds is cut by a chunk border (the rule model reads whole sentences only)
    tasks = [needle_document(tokens=1600, tokenizer=tokenizer, seed=200 + i, depth=0.6) for i in range(16)]
    documents = [TextDocument(task.text, doc_id=f"doc{i}") for i, task in enumerate(tasks)]
    # 0.2 s a completion: the reads overlap even when the client's own work is slowed by a busy machine
    with SimulatedOpenAIServer(tokenizer=tokenizer, delay_s=0.2) as server:
        remote = VLLMServerTokenizer(server.base_url, server.model_name)  # every tokenizer call is seen
        model = openai_compatible(server.base_url, server.model_name, tokenizer=remote)
        agent = MemAgent(model, config=CONFIG, tokenizer=remote)
        results = await agent.abatch([t.question for t in tasks], documents, max_concurrency=16)
    assert [r.answer for r in results] == [t.answer for t in tasks]
    assert [{c["doc_id"] for c in r.citations} for r in results] == [{f"doc{i}"} for i in range(16)]
    assert server.max_in_flight >= 8
    prompts = [body["prompt"] for path, body in server.requests if path == "/tokenize"]
    for task in tasks:  # each document is tokenized for its chunks once and read back once
        assert sum(task.answer in p and len(p) > 1000 for p in prompts) <= 2, task.answer


def test_requests_per_second_paces_the_calls(tokenizer):
    import time

    with SimulatedOpenAIServer() as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, requests_per_second=20)
        started = time.perf_counter()
        for _ in range(6):
            model.invoke("hello")
        elapsed = time.perf_counter() - started
    assert elapsed >= 5 / 20 * 0.9
