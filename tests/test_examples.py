"""Every example runs (against the loopback OpenAI-compatible server)."""

import os
from pathlib import Path

import pytest
from helpers import run_python

from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: runs the example scripts

EXAMPLES = Path(__file__).parent.parent / "examples"


def _run_example(script: str, *args: object, server: SimulatedOpenAIServer):
    """``python examples/SCRIPT ARGS`` with its model at ``server``."""
    return run_python(EXAMPLES / script, *args, env={**os.environ, "MEMAGENT_BASE_URL": server.base_url})


def test_ask_a_file_prints_the_answer(doc, needle):
    with SimulatedOpenAIServer() as server:
        result = _run_example("ask_a_file.py", doc, needle.question, server=server)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert "chunk 1/" in result.stderr


def test_a_custom_memory_policy_registers_and_reads(doc, needle):
    with SimulatedOpenAIServer() as server:
        result = _run_example("custom_memory_policy.py", doc, needle.question, server=server)
        update_calls = [r for r in server.chat_requests() if "<section>" in r["messages"][-1]["content"]]
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert update_calls == []  # the policy wrote every memory; the model only answered


def test_the_shipped_data_files_are_what_the_export_script_writes(tmp_path):
    result = run_python(EXAMPLES / "export_needle_tasks.py", tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    for name in ("needles_train.jsonl", "needles_eval.jsonl"):
        assert (tmp_path / name).read_bytes() == (EXAMPLES / "data" / name).read_bytes()


def test_the_train_from_file_example_trains_two_steps_on_its_data(tmp_path):
    from memagent_graph.training.rl.config import RLConfig

    config = RLConfig.from_yaml(EXAMPLES / "train_from_file.yaml")
    quick = {"steps": 2, "questions_per_step": 2, "group_size": 2, "ray": False, "rollout_workers": 1,
             "warm_start": {"tasks": 4, "steps": 2, "batch_size": 4}, "output_dir": str(tmp_path / "run"),
             "task": {**config.task.model_dump(exclude_defaults=True), "eval_samples": 4}}  # fmt: skip
    path = tmp_path / "quick.yaml"
    path.write_text(__import__("yaml").safe_dump({**config.model_dump(exclude_defaults=True), **quick}))
    command = ["-m", "memagent_graph.integrations.cli", "train", "rl", "--config", str(path)]
    result = run_python(*command, timeout=600, cwd=EXAMPLES.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on rows of examples/data/needles_train.jsonl" in result.stdout
    assert "eval after step 2" in result.stdout
