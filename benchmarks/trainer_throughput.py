"""Trainer throughput on CPU: rollout episodes/s with 1 vs 2 Ray rollout actors, learner tokens/s, step time split.

Same tiny policy, tasks and step shape in both runs (one thread per actor; the learner uses the driver's
threads); every episode's calls are trained (dynamic sampling off) so the learner always works.

    python benchmarks/trainer_throughput.py [--steps 4] [--questions 8] [--group 8]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

import ray
from common import save

from memagent_graph.training.rl.config import RLConfig
from memagent_graph.training.rl.trainer import Trainer


def run(workers: int, args: argparse.Namespace, folder: str) -> dict[str, float]:
    config = RLConfig.from_yaml("examples/train_tiny.yaml").model_copy(
        update={
            "rollout_workers": workers,
            "steps": args.steps,
            "questions_per_step": args.questions,
            "group_size": args.group,
            "warm_start": None,
            "dynamic_sampling": False,
            "output_dir": f"{folder}/w{workers}",
        }
    )
    trainer = Trainer(config)
    try:
        trainer.step()  # warm-up: actor start, first batches
        steps = [trainer.step() for _ in range(args.steps)]
    finally:
        trainer.close()
    episodes = config.questions_per_step * config.group_size

    def mean(key: str) -> float:
        return statistics.mean(step[key] for step in steps)

    return {
        "rollout_workers": workers,
        "episodes_per_step": episodes,
        "rollout_s": mean("rollout_s"),
        "episodes_per_s": episodes / mean("rollout_s"),
        "rollout_tokens_per_s": mean("rollout_tokens_per_s"),
        "learn_s": mean("learn_s"),
        "learner_tokens_per_s": mean("learner_tokens_per_s"),
        "sync_s": mean("sync_s"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    args = parser.parse_args()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as folder:
        rows = [run(1, args, folder), run(2, args, folder)]
    for row in rows:
        print(
            f"{row['rollout_workers']} actor(s): {row['episodes_per_s']:.1f} episodes/s "
            f"({row['rollout_tokens_per_s']:.0f} sampled tokens/s), rollout {row['rollout_s']:.2f} s, "
            f"learn {row['learn_s']:.2f} s ({row['learner_tokens_per_s']:.0f} tokens/s), sync {row['sync_s']:.3f} s"
        )
    speedup = rows[1]["episodes_per_s"] / rows[0]["episodes_per_s"]
    print(f"2 actors vs 1: {speedup:.2f}x rollout throughput")
    save("trainer_throughput", {"args": vars(args), "runs": rows, "rollout_speedup_2_vs_1": speedup})


if __name__ == "__main__":
    main()
