"""Every example runs (against the loopback OpenAI-compatible server)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: runs the example scripts

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_ask_a_file_prints_the_answer(tmp_path, needle):
    path = tmp_path / "doc.txt"
    path.write_text(needle.text)
    with SimulatedOpenAIServer() as server:
        env = {**os.environ, "MEMAGENT_BASE_URL": server.base_url}
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "ask_a_file.py"), str(path), needle.question],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert "chunk 1/" in result.stderr


def test_a_custom_memory_policy_registers_and_reads(tmp_path, needle):
    path = tmp_path / "doc.txt"
    path.write_text(needle.text)
    with SimulatedOpenAIServer() as server:
        result = subprocess.run(
            [sys.executable, str(EXAMPLES / "custom_memory_policy.py"), str(path), needle.question],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "MEMAGENT_BASE_URL": server.base_url},
        )
        update_calls = [r for r in server.chat_requests() if "<section>" in r["messages"][-1]["content"]]
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert update_calls == []  # the policy wrote every memory; the model only answered


def test_the_shipped_data_files_are_what_the_export_script_writes(tmp_path):
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "export_needle_tasks.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
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
    command = [sys.executable, "-m", "memagent_graph.integrations.cli", "train", "rl", "--config", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=EXAMPLES.parent)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on rows of examples/data/needles_train.jsonl" in result.stdout
    assert "eval after step 2" in result.stdout
