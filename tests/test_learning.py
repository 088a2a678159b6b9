"""Learning itself: README's training command, on two Ray rollout actors, learns to read the documents, and RL keeps
that and raises the sampled reward where there is room (seeded; measured on CPUs with and without native bf16)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memagent_graph.documents.tokenization import HuggingFaceTokenizer
from memagent_graph.training.rl.config import RLConfig

pytestmark = [pytest.mark.slow, pytest.mark.ray]  # the README training command runs its workers on Ray

EXAMPLE = Path(__file__).parent.parent / "examples" / "train_tiny.yaml"


def _best_constant_answer(run: Path, config: RLConfig) -> float:
    """The held-out reward of always giving the evaluation tasks' most common answer: what a policy that
    never reads the document can reach."""
    tokenizer = HuggingFaceTokenizer(run / "base-policy" / "tokenizer.json")
    tasks = config.task.tasks(
        0, config.task.eval_samples, tokenizer=tokenizer, chunk_tokens=config.chunk_tokens, evaluation=True
    )
    return Counter(task.golds[0] for task in tasks).most_common(1)[0][1] / len(tasks)


def test_the_readme_training_command_learns_to_read_and_rl_keeps_it(tmp_path):
    command = [sys.executable, "-m", "memagent_graph.integrations.cli",
"train", "rl", "--config", str(EXAMPLE),
               "--output-dir", str(tmp_path)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rewards = [step["reward"] for step in steps if "reward" in step]
    evals = [step["eval_reward"] for step in steps if "eval_reward" in step]
    assert len(rewards) == 10 and "step  10  reward" in done.stdout and len(evals) == 3
    assert (tmp_path / "reward.png").stat().st_size > 10_000  # the curves, drawn at the end
    # greedy reward on 100 held-out tasks after the warm start and after RL steps 5 and 10 (README, Training, has the
    # runs on CPUs with and without native bf16, seeds 0 and 1)
    constant = _best_constant_answer(tmp_path, RLConfig.from_yaml(EXAMPLE))
    assert evals[0] >= 0.6 and evals[0] >= 3 * constant, (evals, constant)  # the warm-started policy reads
    assert all(later >= evals[0] - 0.05 for later in evals[1:]), evals  # RL never loses it
    assert all(late >= 0.75 for late in evals[1:]), evals
    # RL raises the sampled reward (T=0.7, each step on new tasks) where there is room: the last 5 steps' mean
    # over the first 5's
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    assert last >= min(first + 0.05, 0.95), rewards
