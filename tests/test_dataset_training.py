"""Training from data files: `task: {dataset: ...}` in each format people bring, the stream's order and
positions (shuffle, epochs, resume at the same row), truncation and per-row rewards."""

from __future__ import annotations

import json
import random

import pytest
import yaml
from pydantic import ValidationError

from memagent_graph.errors import ConfigError
from memagent_graph.integrations.cli import main
from memagent_graph.testing import train_bpe_tokenizer
from memagent_graph.testing.dataset_files import FORMAT_WRITERS, QARow, write_format, write_generic_jsonl
from memagent_graph.training.data.dataset_tasks import DatasetTasks, RowFilter, buffer_shuffle, center_truncate
from memagent_graph.training.data.datasets import DatasetError
from memagent_graph.training.rl.config import RLConfig, TaskSettings
from memagent_graph.training.rl.tiny_policy import build_tiny_policy
from memagent_graph.training.rl.trainer import Trainer

FILLER = "The grass is green. The sky is blue. "


def _rows(count: int, *, filler: int = 3) -> list[QARow]:
    """Needle rows whose answers are known: row ``i`` answers ``value{i}``."""
    return [
        QARow(
            f"What is the code of item {i}?",
            (f"value{i}",),
            FILLER * filler + f"The code of item {i} is value{i}. " + FILLER * filler,
            (f"The code of item {i} is value{i}.",),
        )
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer([FILLER * 20, "The code of item 7 is value7."], vocab_size=300, name="test-bpe")


def _source(tmp_path, tokenizer, rows=None, **options) -> DatasetTasks:
    train = write_generic_jsonl(tmp_path / "train.jsonl", rows or _rows(5))
    held_out = write_generic_jsonl(tmp_path / "eval.jsonl", _rows(3))
    rules = RowFilter(tokenizer, options.pop("max_document_tokens", None), options.pop("truncation", "none"),
                      options.pop("on_bad_row", "error"))  # fmt: skip
    return DatasetTasks(str(train), eval_dataset=str(held_out), rules=rules, **options)


@pytest.mark.unit
def test_a_dataset_with_generated_task_settings_names_the_settings_to_drop():
    with pytest.raises(ValidationError, match=r"drop task\.kind, task\.tokens \(or drop task\.dataset\)"):
        TaskSettings(dataset="a.jsonl", eval_dataset="b.jsonl", kind="needle", tokens=300)


@pytest.mark.unit
def test_a_dataset_needs_a_held_out_file_and_file_settings_need_a_dataset():
    with pytest.raises(ValidationError, match="task.dataset needs task.eval_dataset"):
        TaskSettings(dataset="a.jsonl")
    with pytest.raises(ValidationError, match=r"task\.shuffle apply to task\.dataset"):
        TaskSettings(shuffle=True)
    with pytest.raises(ValidationError, match="center needs task.max_document_tokens"):
        TaskSettings(dataset="a.jsonl", eval_dataset="b.jsonl", truncation="center")


@pytest.mark.unit
def test_center_truncation_keeps_the_head_and_tail_halves(tokenizer):
    text = " ".join(f"w{i}" for i in range(200))
    ids = tokenizer.encode(text)
    cut = center_truncate(text, tokenizer=tokenizer, max_tokens=40)
    assert tokenizer.encode(cut) == ids[:20] + ids[-20:]
    assert center_truncate("short text", tokenizer=tokenizer, max_tokens=40) == "short text"


@pytest.mark.unit
def test_buffer_shuffle_is_a_seeded_permutation():
    rows = list(range(50))
    first = list(buffer_shuffle(iter(rows), size=8, rng=random.Random(3)))
    assert sorted(first) == rows and first != rows
    assert first == list(buffer_shuffle(iter(rows), size=8, rng=random.Random(3)))


@pytest.mark.unit
def test_taking_from_a_position_continues_the_stream_across_epochs(tmp_path, tokenizer):
    source = _source(tmp_path, tokenizer)
    first, position = source.take(0, 3)
    second, position = source.take(position, 4)  # 5 rows: the second epoch starts inside this take
    assert position == 7
    assert [t.row for t in first + second] == [0, 1, 2, 3, 4, 0, 1]
    assert first[0].golds == ["value0"] and first[0].evidence == ("The code of item 0 is value0.",)


@pytest.mark.unit
def test_a_fresh_stream_taken_from_a_saved_position_gives_the_same_rows(tmp_path, tokenizer):
    whole, _ = _source(tmp_path, tokenizer, shuffle=True, shuffle_buffer=3, seed=4).take(0, 8)
    _, position = _source(tmp_path, tokenizer, shuffle=True, shuffle_buffer=3, seed=4).take(0, 3)
    resumed, _ = _source(tmp_path, tokenizer, shuffle=True, shuffle_buffer=3, seed=4).take(position, 5)
    assert [t.row for t in resumed] == [t.row for t in whole[3:]]
    assert [t.row for t in whole[:5]] != [0, 1, 2, 3, 4]  # shuffled
    assert sorted(t.row for t in whole[:5]) == [0, 1, 2, 3, 4]  # one epoch holds every row once


@pytest.mark.unit
def test_a_row_over_the_token_limit_is_one_clear_error_or_skipped_when_asked(tmp_path, tokenizer):
    rows = _rows(3)
    rows[1] = QARow(rows[1].question, rows[1].answers, rows[1].document * 20, rows[1].evidence)
    with pytest.raises(DatasetError, match=r"train\.jsonl: row 1, column `document`: \d+ tokens, over"):
        _source(tmp_path, tokenizer, rows=rows, max_document_tokens=100).take(0, 3)
    tasks, position = _source(tmp_path, tokenizer, rows=rows, max_document_tokens=100, on_bad_row="skip").take(0, 2)
    assert [t.row for t in tasks] == [0, 2] and position == 3
    cut, _ = _source(tmp_path, tokenizer, rows=rows, max_document_tokens=100, truncation="center").take(0, 3)
    assert tokenizer.count(cut[1].document) <= 101 and cut[1].document.startswith(FILLER)


@pytest.mark.unit
def test_rows_from_hotpotqa_are_scored_by_memagents_verifier(tmp_path, tokenizer):
    from memagent_graph.training.data.datasets import open_dataset

    path = write_format(tmp_path, "memagent-train.parquet", _rows(2))
    rules = RowFilter(tokenizer)
    source = DatasetTasks(str(path), eval_dataset=str(path), rules=rules)
    assert {task.reward for task in source.take(0, 2)[0]} == {"memagent_verifier"}
    assert next(open_dataset(path).rows()).data_source == "hotpotqa"
    generic, _ = _source(tmp_path, tokenizer).take(0, 1)
    assert generic[0].reward is None  # the run's `reward`


@pytest.mark.unit
def test_a_warm_start_on_rows_without_evidence_names_the_missing_column(tmp_path, tokenizer):
    path = write_format(tmp_path, "longbench.jsonl", _rows(2))
    source = DatasetTasks(str(path), eval_dataset=str(path), rules=RowFilter(tokenizer))
    with pytest.raises(DatasetError, match=r"row 0, column `evidence`: none.*add an `evidence` column"):
        source.warm_start_tasks(2)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("policy"), seed=0, hidden_size=32)


def _write_config(tmp_path, policy, train, held_out, **changes) -> str:
    settings = {
        "policy": str(policy), "prompts": "tiny", "chunk_tokens": 128, "memory_tokens": 12, "answer_tokens": 8,
        "group_size": 2, "questions_per_step": 2, "steps": 2, "ray": False, "dynamic_sampling": False,
        "task": {"dataset": str(train), "eval_dataset": str(held_out), "eval_samples": 2},
        "output_dir": str(tmp_path / "run"), **changes,
    }  # fmt: skip
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


@pytest.mark.integration
@pytest.mark.usefixtures("restore_logging")  # `main` configures the loggers
@pytest.mark.parametrize("name", list(FORMAT_WRITERS))
def test_each_format_trains_two_rl_steps_from_the_cli(name, policy, tmp_path, capsys):
    (tmp_path / "data").mkdir()
    path = write_format(tmp_path / "data", name, _rows(4))
    assert main(["train", "rl", "--config", _write_config(tmp_path, policy, path, path)]) == 0
    steps = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if "reward" in s] == [0, 1]
    assert json.loads((tmp_path / "run" / "checkpoint" / "position.json").read_text())["data_position"] == 4
    assert f"rows of {path}" in capsys.readouterr().out


@pytest.mark.integration
def test_a_resumed_run_continues_at_the_row_the_checkpoint_reached(policy, tmp_path):
    path = write_generic_jsonl(tmp_path / "train.jsonl", _rows(7))
    settings = {"shuffle": True, "shuffle_buffer": 3, "seed": 2}
    config = RLConfig.from_yaml(_write_config(tmp_path, policy, path, path, checkpoint_every=1))
    config = config.model_copy(update={"task": config.task.model_copy(update=settings), "steps": 1})
    trainer = Trainer(config)
    trainer.fit()
    trainer.close()
    resumed = Trainer(config.model_copy(update={"steps": 2}))
    resumed.restore(tmp_path / "run" / "checkpoint")
    expected, _ = resumed.source.take(0, 4)
    assert resumed.position == 2
    assert [t.row for t in resumed.source.take(resumed.position, 2)[0]] == [t.row for t in expected[2:]]
    resumed.close()


@pytest.mark.integration
def test_a_bad_data_file_fails_before_any_worker_starts(policy, tmp_path, monkeypatch):
    path = tmp_path / "train.jsonl"
    path.write_text('{"question": "q?", "answers": [], "document": "d"}\n', encoding="utf-8")
    monkeypatch.setattr(Trainer, "_local_learner", lambda *a: pytest.fail("a learner was built"))
    with pytest.raises(ConfigError, match=r"train\.jsonl: row 0, column `answers`"):
        Trainer(RLConfig.from_yaml(_write_config(tmp_path, policy, path, path)))
