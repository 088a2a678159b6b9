"""A training run's curves as a PNG: sampled reward per step and the greedy held-out reward, from metrics.jsonl."""

from __future__ import annotations

import json
from pathlib import Path


def plot_training(metrics: str | Path, output: str | Path, *, title: str = "RL training") -> Path:
    """Draw reward per step (and its 5-step running mean) and the evaluations of ``metrics`` into ``output``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in Path(metrics).read_text(encoding="utf-8").splitlines() if line.strip()]
    steps = [(row["step"] + 1, row["reward"]) for row in rows if "reward" in row]
    evals = [(row["step"], row["eval_reward"]) for row in rows if "eval_reward" in row]
    figure, axes = plt.subplots(figsize=(7, 4))
    if steps:
        x, y = zip(*steps, strict=True)
        axes.plot(x, y, ".", color="tab:blue", alpha=0.5, label="reward per step (sampled)")
        running = [sum(y[max(0, i - 4) : i + 1]) / len(y[max(0, i - 4) : i + 1]) for i in range(len(y))]
        axes.plot(x, running, "-", color="tab:blue", label="5-step running mean")
    if evals:
        x, y = zip(*evals, strict=True)
        axes.plot(x, y, "s--", color="tab:orange", label="held-out reward (greedy)")
    values = [reward for _, reward in steps + evals]
    if values:  # the whole 0-1 range of a verifiable reward, so a flat run does not look like a fall
        axes.set_ylim(min(0.0, *values) - 0.02, max(1.0, *values) + 0.02)
    axes.set_xlabel("RL step")
    axes.set_ylabel("reward")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(output, dpi=100)
    plt.close(figure)
    return Path(output)
