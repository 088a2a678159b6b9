"""Learner throughput with 1 vs 2 ranks on CPU: learner tokens/s and the step time split (rollout / learn /
sync) for the in-process learner and for FSDP2 and DDP groups of Ray actors over gloo.

Same tiny policy, tasks and step shape in every run; rollouts run in this process (one transformers backend)
so that only the learner changes; every episode's calls are trained (dynamic sampling off).

    python benchmarks/learner_ranks.py [--steps 3] [--questions 8] [--group 8]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import ray
from common import save

from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.trainer import Trainer

SETUPS = [("single", 1), ("fsdp", 1), ("fsdp", 2), ("ddp", 2)]


def run(strategy: str, workers: int, args: argparse.Namespace, folder: str) -> dict[str, float | str]:
    base = RLConfig.from_yaml("examples/train_tiny.yaml")
    learner = base.learner.model_copy(update={"strategy": strategy, "workers": workers, "cpus_per_worker": 0.5})
    config = base.model_copy(
        update={
            "learner": learner,
            "ray": False,
            "steps": args.steps,
            "questions_per_step": args.questions,
            "group_size": args.group,
            "warm_start": None,
            "dynamic_sampling": False,
            "output_dir": f"{folder}/{strategy}-{workers}",
        }
    )
    trainer = Trainer(config)
    try:
        trainer.step()  # warm-up: first batches, first all-gathers
        steps = [trainer.step() for _ in range(args.steps)]
    finally:
        trainer.close()

    def mean(key: str) -> float:
        return statistics.mean(step[key] for step in steps)

    return {
        "strategy": strategy,
        "ranks": workers,
        "rollout_s": mean("rollout_s"),
        "learn_s": mean("learn_s"),
        "sync_s": mean("sync_s"),
        "learner_tokens_per_s": mean("learner_tokens_per_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as folder:
        rows = [run(strategy, workers, args, folder) for strategy, workers in SETUPS]
    for row in rows:
        print(
            f"{row['strategy']} x{row['ranks']}: learn {row['learn_s']:.2f} s ({row['learner_tokens_per_s']:.0f} "
            f"tokens/s), rollout {row['rollout_s']:.2f} s, sync {row['sync_s']:.3f} s"
        )
    single = rows[0]["learner_tokens_per_s"]
    ratios = {f"{row['strategy']}x{row['ranks']}": row["learner_tokens_per_s"] / single for row in rows}
    print("learner tokens/s vs the in-process learner: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    save("learner_ranks", {"args": vars(args), "runs": rows, "tokens_per_s_vs_single": ratios})


if __name__ == "__main__":
    main()
