"""Transient faults from a real (loopback) OpenAI-compatible server: retried in one layer, answers unchanged."""

from __future__ import annotations

import random

import httpx
import openai
import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.config import RetrySettings
from memagent_graph.documents.haystack import needle_document
from memagent_graph.errors import ModelRequestError
from memagent_graph.integrations import openai_compatible
from memagent_graph.nodes.retry import backoff_s, is_transient
from memagent_graph.testing.simulated_server import FAULTS, FaultPlan, SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: real backoff and timeouts against a loopback server

RETRIES = RetrySettings(max_attempts=8, initial_backoff_s=0.01, max_backoff_s=0.05)
CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=80, answer_tokens=30, retries=RETRIES)
TIMEOUT_S = 0.5  # the client's; a "hang" fault answers after 1 s


def _read(tokenizer, document, question, *, faults=None, **server_options):
    with SimulatedOpenAIServer(faults=faults, **server_options) as server:
        model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, timeout=TIMEOUT_S)
        result = MemAgent(model, config=CONFIG, tokenizer=tokenizer).invoke(question, document)
    return result, server


@pytest.fixture(scope="module")
def long_needle(tokenizer):
    return needle_document(tokens=100 * 300 - 150, tokenizer=tokenizer, seed=11, depth=0.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_a_100_chunk_run_with_20_percent_faults_gives_the_clean_answer(tokenizer, long_needle, seed):
    document = TextDocument(long_needle.text)
    clean, clean_server = _read(tokenizer, document, long_needle.question)
    faulty, server = _read(tokenizer, document, long_needle.question, faults=FaultPlan(rate=0.2, seed=seed, hang_s=1.0))
    assert clean.num_chunks >= 100
    assert (faulty.answer, faulty.memory) == (clean.answer, clean.memory) == (long_needle.answer, clean.memory)
    faults = sum(server.injected.values())
    assert faults >= 15 and len(server.injected) >= 6  # several kinds mixed in one run
    # one layer of retries: exactly one extra request per injected fault, never more
    assert len(server.chat_requests()) == len(clean_server.chat_requests()) + faults
    assert sum(step["retries"] for step in faulty.steps) == faults


@pytest.mark.parametrize("kind", FAULTS)
def test_each_fault_kind_is_retried_and_recovered(tokenizer, needle, kind):
    document = TextDocument(needle.text)
    result, server = _read(
        tokenizer, document, needle.question, faults=FaultPlan(rate=0.4, kinds=(kind,), seed=3, hang_s=1.0)
    )
    assert result.answer == needle.answer
    assert server.injected[kind] > 0
    assert len(server.chat_requests()) == result.num_chunks + 1 + server.injected[kind]


def test_context_too_long_fails_fast_and_the_checkpoint_resumes(tokenizer, needle, tmp_path):
    document = TextDocument(needle.text)
    with SqliteSaver.from_conn_string(str(tmp_path / "run.db")) as saver:
        with SimulatedOpenAIServer() as server:
            server.on_completion = lambda index: setattr(server, "status", 400 if index == 2 else 200)
            model = openai_compatible(server.base_url, server.model_name, tokenizer=tokenizer, timeout=TIMEOUT_S)
            agent = MemAgent(model, config=CONFIG, tokenizer=tokenizer, checkpointer=saver)
            with pytest.raises(ModelRequestError, match="HTTP 400"):
                agent.invoke(needle.question, document, thread_id="t")
            assert len(server.chat_requests()) == 3  # no retry of a permanent error
            result = agent.invoke(needle.question, document, thread_id="t")
        sent_again = server.chat_requests()[3:]
    assert result.answer == needle.answer
    assert len(sent_again) == result.num_chunks + 1 - 2  # the two chunks done before the failure are not re-sent


def _rate_limited(headers: dict[str, str]) -> openai.RateLimitError:
    response = httpx.Response(429, headers=headers, request=httpx.Request("POST", "http://x/v1/chat/completions"))
    return openai.RateLimitError("rate limited", response=response, body=None)


def test_retry_after_seconds_is_honoured_and_capped():
    settings = RetrySettings(max_retry_after_s=5.0)
    assert backoff_s(settings, 1, _rate_limited({"retry-after": "3"})) == 3.0
    assert backoff_s(settings, 1, _rate_limited({"retry-after-ms": "250"})) == 0.25
    assert backoff_s(settings, 1, _rate_limited({"retry-after": "600"})) == 5.0


def test_retry_after_as_an_http_date_is_honoured():
    wait = backoff_s(RetrySettings(), 1, _rate_limited({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"}))
    assert wait == RetrySettings().max_retry_after_s


def test_backoff_is_jittered_exponential_and_capped():
    random.seed(0)
    settings = RetrySettings(initial_backoff_s=1.0, max_backoff_s=8.0)
    waits = {attempt: [backoff_s(settings, attempt, None) for _ in range(200)] for attempt in (1, 3, 6)}
    assert max(waits[1]) <= 1.0 and max(waits[3]) <= 4.0 and max(waits[6]) <= 8.0
    assert max(waits[6]) > 4.0 and len(set(waits[3])) == 200  # grows, and no two waits alike


def test_permanent_errors_are_not_transient():
    request = httpx.Request("POST", "http://x")
    for status, error in (
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
    ):
        assert not is_transient(error("no", response=httpx.Response(status, request=request), body=None))
    assert is_transient(_rate_limited({}))
