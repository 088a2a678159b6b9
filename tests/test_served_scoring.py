"""Quote memory over a served model: passages scored from a vLLM server's prompt log-probabilities, equal to
the embedded engine's on the same weights; a server that cannot score is refused before the first chunk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.integration
def test_a_copied_answer_is_asked_for_as_a_structured_outputs_choice_of_the_memory_lines(tokenizer):
    from memagent_graph.integrations.models.served_scoring import ScoringChatOpenAI

    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        model = ScoringChatOpenAI(
            base_url=server.base_url, model=server.model_name, api_key="none", scoring_tokenizer=tokenizer
        )
        model.invoke("Which line answers?", quote_from="The gate code is 7731.\n\nThe river is wide.\n")
        body = server.chat_requests()[-1]
    assert body["structured_outputs"] == {"choice": ["The gate code is 7731.", "The river is wide."]}
    assert "quote_from" not in body


@pytest.mark.vllm
@pytest.mark.slow
def test_a_copied_quote_answer_through_vllm_is_a_line_of_the_memory(vllm_server, embedded_tokenizer):
    from memagent_graph import MemAgent, MemAgentConfig, TextDocument

    served = openai_compatible(vllm_server.base_url, tokenizer=embedded_tokenizer, scores_passages=True)
    task = needle_document(tokens=900, tokenizer=embedded_tokenizer, seed=5)  # two chunks
    config = MemAgentConfig(
        memory_policy="quote", quote_answer="copy", chunk_tokens=512, memory_tokens=128, answer_tokens=64,
        temperature=0.0,
    )  # fmt: skip
    result = MemAgent(served, config=config, tokenizer=embedded_tokenizer).invoke(
        task.question, TextDocument(task.text)
    )
    assert result.answer in result.memory.splitlines() and task.answer in result.answer


@pytest.mark.vllm
@pytest.mark.slow
def test_served_passage_and_span_scores_equal_the_embedded_engines_on_the_same_weights_and_dtype(
    vllm_server, embedded_tokenizer
):
    from memagent_graph.integrations.models.embedded_chat import LocalChatModel

    served = openai_compatible(vllm_server.base_url, tokenizer=embedded_tokenizer, scores_passages=True)
    local = LocalChatModel(dtype="bfloat16")  # the server's dtype
    tokens = len(embedded_tokenizer.encode(QUESTION))
    for by_server, by_engine in zip(
        served.score_passages(QUESTION, PASSAGES), local.score_passages(QUESTION, PASSAGES), strict=True
    ):
        assert abs(by_server - by_engine) / tokens < 0.05
    prompt, spans = "Passage: The gate code is 7731.\nShort answer:", [" 7731\n", " The gate\n", " code is 7731\n"]
    for span, by_server, by_engine in zip(
        spans, served.score_continuations(prompt, spans), local.score_continuations(prompt, spans), strict=True
    ):  # the extract answer's span scores: a few tokens each, so bf16's rounding weighs more per token
        assert abs(by_server - by_engine) / len(embedded_tokenizer.encode(span)) < 0.15


@pytest.mark.vllm
@pytest.mark.slow
def test_the_example_reads_with_quote_memory_through_vllm_and_cites(vllm_server, embedded_tokenizer, tmp_path):
    task = needle_document(tokens=1500, tokenizer=embedded_tokenizer, seed=3)
    path = tmp_path / "document.txt"
    path.write_text(task.text, encoding="utf-8")
    example = Path(__file__).parent.parent / "examples" / "quote_on_vllm.py"
    command = [sys.executable, str(example), vllm_server.base_url, str(path), task.question]
    out = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True).stdout
    assert f"answer: {task.answer}\n" in out
    assert any(task.answer in line for line in out.splitlines() if line.startswith("cited"))
