"""Memory policies are a registry: a policy turns (question, memory, chunk) into the next memory, the graph's
node runs read -> policy -> budget -> trace for any of them, and a new one registers from outside `nodes/`."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.errors import ConfigError
from memagent_graph.nodes import (
    MemoryPolicy,
    MemoryRequest,
    memory_policy_names,
    policy_registry,
    register_memory_policy,
)
from memagent_graph.nodes.model_call import CallOptions, Completion
from memagent_graph.nodes.quote.memory import quote_update
from memagent_graph.nodes.quote.scoring import GainCache
from memagent_graph.nodes.quote.selection import QuoteSettings
from memagent_graph.testing import RuleMemoryModel

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = " ".join(f"Line {i} tells of rivers and hills." for i in range(40)) + " The gate code is 7731."


@pytest.fixture
def registry(monkeypatch):
    """The registry as it is, restored after the test."""
    monkeypatch.setattr(policy_registry, "_POLICIES", dict(policy_registry._POLICIES))
    return policy_registry


def last_sentence_policy(model, tokenizer, config) -> MemoryPolicy:
    """A third-party policy: the memory is the chunk's last sentence, whatever the question."""

    def write(requests: Sequence[MemoryRequest], options: CallOptions, run) -> list[Completion]:
        return [Completion(request.section.rsplit(". ", 1)[-1], 0, 0, 0.0, "last-sentence") for request in requests]

    return MemoryPolicy(write, uses_update_prompt=False)


def test_the_built_in_policies_are_registered():
    assert memory_policy_names()[:2] == ["generate", "quote"]


def test_a_registered_policy_reads_through_the_unchanged_graph(registry, tokenizer):
    register_memory_policy("last-sentence")(last_sentence_policy)
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="last-sentence")
    agent = MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer)
    result = agent.invoke("What is the gate code?", TextDocument(DOCUMENT))
    updates = [step for step in result.steps if step["node"] == "update_memory"]
    assert {step["finish_reason"] for step in updates} == {"last-sentence"}
    assert result.memory == "The gate code is 7731."


def test_the_async_path_runs_a_policy_without_awrite_in_a_thread(registry, tokenizer):
    register_memory_policy("last-sentence")(last_sentence_policy)
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="last-sentence")
    agent = MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer)
    sync = agent.invoke("What is the gate code?", TextDocument(DOCUMENT))
    assert asyncio.run(agent.ainvoke("What is the gate code?", TextDocument(DOCUMENT))).memory == sync.memory


def test_a_taken_name_is_refused(registry):
    with pytest.raises(ConfigError, match="registered already"):
        register_memory_policy("quote")(last_sentence_policy)


def test_an_unknown_policy_names_the_registered_ones(tokenizer):
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="summarise")
    with pytest.raises(ConfigError, match="choose from generate, quote"):
        MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer)


def test_the_policy_memory_still_meets_the_budget(registry, tokenizer):
    def verbose(model, tokenizer_, config) -> MemoryPolicy:
        return MemoryPolicy(
            lambda requests, options, run: [Completion("word " * 500, 0, 0, 0.0, "stop")] * len(requests),
            uses_update_prompt=False,
        )

    register_memory_policy("verbose")(verbose)
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="verbose")
    result = MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer).invoke("Code?", TextDocument(DOCUMENT))
    assert all(step["truncated"] and step["memory_tokens"] <= 40 for step in result.steps[:-1])


class CountingTokenizer:
    """A tokenizer that counts how often each text is tokenized."""

    def __init__(self, inner) -> None:
        self.inner, self.seen = inner, {}

    def count(self, text: str) -> int:
        self.seen[text] = self.seen.get(text, 0) + 1
        return self.inner.count(text)


class LengthScorer:
    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        return [float(len(passage)) for passage in passages]


def test_a_quote_update_tokenizes_each_candidate_once(tokenizer):
    counting = CountingTokenizer(tokenizer)
    section = "The gate code is 7731. The river is wide. The hills are green."
    quote_update(
        GainCache(LengthScorer()),
        question="Code?",
        previous="Old note.",
        section=section,
        tokenizer=counting,
        budget=30,
        settings=QuoteSettings(min_gain=1, hop_min_share=0.5, prefilter=0),
    )
    assert counting.seen and set(counting.seen.values()) == {1}


class ScoresButCannotQuote(RuleMemoryModel):
    accepts_quote_from: bool = False

    def score_passages(self, question, passages):
        return [0.0] * len(passages)


def test_the_quote_policys_copy_answer_needs_calls_that_accept_quote_from(tokenizer):
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_answer="copy")
    with pytest.raises(ConfigError, match="accepts_quote_from"):
        MemAgent(ScoresButCannotQuote(), config=config, tokenizer=tokenizer)


def test_the_quote_policy_answering_from_its_notes_needs_only_a_scorer(tokenizer):
    config = MemAgentConfig(chunk_tokens=120, memory_tokens=40, memory_policy="quote", quote_answer="span")
    assert MemAgent(ScoresButCannotQuote(), config=config, tokenizer=tokenizer) is not None


LONG_FUNCTION_LINES = 60


def test_no_function_in_the_nodes_the_facade_or_the_cli_is_over_60_lines():
    files = [
        *(ROOT / "nodes").glob("*.py"),
        ROOT / "memagent_graph" / "agent.py",
        *(ROOT / "integrations" / "cli").glob("*.py"),
    ]
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > LONG_FUNCTION_LINES
    ]
    assert not long, "split these functions: " + "; ".join(long)
