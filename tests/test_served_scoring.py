"""Quote memory over a served model: passages scored from a vLLM server's prompt log-probabilities, equal to
the embedded engine's on the same weights; a server that cannot score is refused before the first chunk."""

from __future__ import annotations

import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import needle_document
from memagent_graph.errors import ConfigError
from memagent_graph.integrations import openai_compatible
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

QUESTION = "What is the special magic number for gentle-river?"
PASSAGES = [
    "One of the special magic numbers for gentle-river is: 4412093.",
    "Rivers run to the sea, and the hills keep the rain.",
    "",
]


def test_scoring_needs_the_served_models_tokenizer():
    with pytest.raises(ConfigError, match="tokenizer="):
        openai_compatible("http://127.0.0.1:9/v1", model="m", scores_passages=True)


def test_a_server_that_does_not_score_prompts_is_refused_with_the_fix(tokenizer):
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        with pytest.raises(ConfigError, match="prompt_logprobs.*memagent vllm serve"):
            openai_compatible(server.base_url, tokenizer=tokenizer, scores_passages=True)


@pytest.mark.vllm
@pytest.mark.slow
def test_served_scores_equal_the_embedded_engines_on_the_same_weights_and_dtype(vllm_server, embedded_tokenizer):
    from memagent_graph.integrations.models.embedded_chat import LocalChatModel

    served = openai_compatible(vllm_server.base_url, tokenizer=embedded_tokenizer, scores_passages=True)
    local = LocalChatModel(dtype="bfloat16")  # the server's dtype
    tokens = len(embedded_tokenizer.encode(QUESTION))
    for by_server, by_engine in zip(
        served.score_passages(QUESTION, PASSAGES), local.score_passages(QUESTION, PASSAGES), strict=True
    ):
        assert abs(by_server - by_engine) / tokens < 0.05


@pytest.mark.vllm
@pytest.mark.slow
def test_a_quote_read_through_vllm_answers_with_the_needle_and_cites_it(vllm_server, embedded_tokenizer):
    task = needle_document(tokens=1500, tokenizer=embedded_tokenizer, seed=3)
    model = openai_compatible(vllm_server.base_url, tokenizer=embedded_tokenizer, scores_passages=True)
    config = MemAgentConfig(chunk_tokens=600, memory_tokens=64, answer_tokens=16, memory_policy="quote")
    result = MemAgent(model, config=config, tokenizer=embedded_tokenizer).invoke(task.question, TextDocument(task.text))
    assert result.answer == task.answer
    assert any(task.answer in task.text[source["start"] : source["end"]] for source in result.citations)
