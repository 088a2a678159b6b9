"""The ``realtext`` task family: `memagent eval --task realtext` reads held-out Genesis questions and reports
sub-EM and EM; `memagent train rl` trains on the training books and checks itself on Judges; bad names are
`ConfigError`s."""

from __future__ import annotations

import json

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memagent_graph.documents.tokenization import ApproximateTokenizer
from memagent_graph.errors import ConfigError
from memagent_graph.training.data.real_text import TRAIN_BOOKS
from memagent_graph.training.data.task_suite import generate_tasks, real_text_task, suite_task
from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.task_source import task_source

TOKENIZER = ApproximateTokenizer()


class ScriptedModel(BaseChatModel):
    """Replies with the scripted answer of the question its prompt holds (boxed), else "none"."""

    answers: dict[str, str]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        prompt = str(messages[-1].content)
        reply = next((f"\\boxed{{{a}}}" for q, a in self.answers.items() if q in prompt), "none")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(reply))])


def _books(tasks) -> set[str]:
    return {verse.book for task in tasks for verse in task.evidence_verses}


@pytest.mark.integration  # mines a split's books
def test_memagent_eval_task_realtext_reads_held_out_genesis_and_reports_sub_em_and_em(memagent, monkeypatch, tmp_path):
    from memagent_graph.integrations import model_choice

    first, second = generate_tasks("realtext", 2, tokens=4096, tokenizer=TOKENIZER)
    assert _books([first, second]) == {"Genesis"} and first.question != second.question
    answers = {first.question: first.golds[0], second.question: f"{second.golds[0]} it is"}  # sub-EM, not EM
    choice = model_choice.ModelChoice(ScriptedModel(answers=answers), TOKENIZER, "scripted")
    monkeypatch.setattr(model_choice, "choose_model", lambda **options: choice)
    out = tmp_path / "out"
    result = memagent("eval", "--task", "realtext", "--lengths", "4k", "--samples", "2", "--methods", "memagent,bm25",
                      "--memory-policy", "generate", "--output-dir", str(out), "--quiet")  # fmt: skip
    assert result.returncode == 0, result.stderr
    saved = json.loads((out / "results.json").read_text())
    assert sorted((r["sample"], r["method"], r["golds"][0]) for r in saved["records"]) == sorted(
        (i, method, task.golds[0]) for i, task in enumerate([first, second]) for method in ("memagent", "bm25")
    )
    for row in saved["summary"]:
        assert (row["task"], row["sub_em"], row["exact_match"], row["accuracy"]) == ("realtext", 1.0, 0.5, 1.0)
    assert "Sub-EM (%)" in result.stdout and "Exact match (%)" in result.stdout


@pytest.mark.integration  # mines a split's books
def test_training_draws_realtext_from_the_training_books_and_validates_on_judges(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text("task: {kind: realtext, tokens: 2048}\n", encoding="utf-8")
    source = task_source(RLConfig.from_yaml(path).task, tokenizer=TOKENIZER, chunk_tokens=512)
    train, position = source.take(0, 8)
    held_out = source.held_out_tasks(5)
    assert position == 8 and len({task.question for task in train}) == 8
    assert _books(train) <= set(TRAIN_BOOKS) and _books(source.warm_start_tasks(4)) <= set(TRAIN_BOOKS)
    assert _books(held_out) == {"Judges"} and len({task.question for task in held_out}) == 5
    assert all(":train" in task.template for task in [*train, *held_out])  # test wordings stay with Genesis


@pytest.mark.integration  # mines a split's books
def test_a_held_out_question_is_read_once_and_training_goes_round_again():
    genesis = generate_tasks("realtext", 3, tokens=2048, tokenizer=TOKENIZER)
    assert len({task.question for task in genesis}) == 3
    with pytest.raises(ConfigError, match="ask for at most"):
        real_text_task(10**7, tokens=2048, tokenizer=TOKENIZER, split="eval")
    again = real_text_task(10**7, tokens=2048, tokenizer=TOKENIZER, split="train")
    assert _books([again]) <= set(TRAIN_BOOKS)


@pytest.mark.parametrize("split", ["test", "dev", "Genesis"])
def test_an_unknown_split_is_a_config_error_naming_the_splits(split):
    with pytest.raises(ConfigError, match="train, validation, eval"):
        suite_task("realtext", 0, tokens=2048, tokenizer=TOKENIZER, split=split)


def test_an_unknown_family_in_a_training_config_is_a_config_error(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text("task: {kind: realtxt}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="realtext"):
        RLConfig.from_yaml(path)
