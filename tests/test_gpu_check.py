"""The prepared device check runs everywhere: `benchmarks/gpu_check.py --device cpu --quick` trains, steps a
1-rank FSDP2 group like the single learner and measures throughput, into one JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "gpu_check.py"


def test_the_device_check_on_the_cpu_writes_every_part_and_its_fsdp_steps_match(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "gpu_check.json").read_text())
    assert result["device"] == "cpu" and result["machine"]["gpu"] is None
    assert len(result["training_example"]["eval_rewards"]) == 2
    assert [step["param_dtype"] for step in result["fsdp_step"]] == ["float32", "bfloat16"]
    assert all(step["equal"] for step in result["fsdp_step"])
    assert result["fsdp_step"][0]["relative_update_gap"] < 1e-5
    assert result["throughput"]["cpu"]["learner_tokens_per_s"] > 0


def test_the_device_check_asking_for_cuda_without_a_gpu_says_so_in_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("gpu_check: --device is cuda, but torch sees no GPU")
    assert len(done.stderr.strip().splitlines()) == 1
