"""The oracle memory policy: through the real graph it keeps exactly the evidence and boxes the gold answer."""

from __future__ import annotations

import pytest

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.task_suite import generate_tasks
from memagent_graph.training.rewards import ruler_match_all
from memagent_graph.training.sft.oracle import NOTES_HEADING, NOTHING_YET, OracleMemoryModel

CONFIG = MemAgentConfig(chunk_tokens=1024, memory_tokens=128, answer_tokens=64, temperature=0.0)


@pytest.mark.parametrize("name", ["niah_single_2", "niah_multivalue", "two_hop", "vt"])
def test_the_oracle_keeps_the_evidence_in_memory_and_answers_the_golds(name, embedded_tokenizer):
    tasks = generate_tasks(name, 2, tokens=3000, tokenizer=embedded_tokenizer, split="train")
    agent = MemAgent(OracleMemoryModel(tasks=tasks), config=CONFIG, tokenizer=embedded_tokenizer)
    for task in tasks:
        result = agent.invoke(task.question, TextDocument(task.document))
        assert result.memory.split("\n") == [NOTES_HEADING, *task.evidence]
        assert ruler_match_all(result.answer, task.golds) == 1.0


def test_before_any_evidence_the_oracle_says_so(embedded_tokenizer):
    [task] = generate_tasks("niah_single_2", 1, tokens=1000, tokenizer=embedded_tokenizer)
    oracle = OracleMemoryModel(tasks=[task])
    assert oracle.reply(f"{task.question} and a section without the needle") == NOTHING_YET


def test_an_episode_that_lost_its_evidence_is_answered_unknown(embedded_tokenizer):
    [task] = generate_tasks("two_hop", 1, tokens=3000, tokenizer=embedded_tokenizer)
    tiny_memory = CONFIG.model_copy(update={"memory_tokens": 8})  # the memory budget cuts the evidence off
    agent = MemAgent(OracleMemoryModel(tasks=[task]), config=tiny_memory, tokenizer=embedded_tokenizer)
    assert agent.invoke(task.question, TextDocument(task.document)).answer == "unknown"


def test_a_question_outside_its_tasks_is_an_error(embedded_tokenizer):
    [task] = generate_tasks("niah_single_2", 1, tokens=1000, tokenizer=embedded_tokenizer)
    with pytest.raises(ConfigError, match="not among its tasks"):
        OracleMemoryModel(tasks=[task]).reply("What is the capital of France?")
