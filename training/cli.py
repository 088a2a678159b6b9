"""`memagent train rl --config FILE`, `memagent train sft --traces FILE` and `memagent train export`: the trainer
from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path

from memagent_graph.errors import ConfigError


def add_train_commands(commands: argparse._SubParsersAction) -> None:
    """Add ``train rl`` and ``train sft`` to the ``memagent`` parser."""
    train = commands.add_parser("train", help="train the memory policy (RL from verifiable rewards, or SFT)")
    kinds = train.add_subparsers(dest="train_command", required=True)
    rl = kinds.add_parser("rl", help="RL (GRPO/DAPO) on generated tasks or a data file, rollouts on Ray actors")
    rl.add_argument("--config", required=True, help="YAML file of RLConfig settings (see examples/train_tiny.yaml)")
    rl.add_argument("--resume", action="store_true", help="continue from OUTPUT_DIR/checkpoint")
    rl.add_argument("--output-dir", help="write the run here instead of the config's output_dir")
    export = kinds.add_parser("export", help="write a training checkpoint's policy as a Hugging Face folder")
    export.add_argument("--checkpoint", required=True, help="a run's checkpoint folder (OUTPUT_DIR/checkpoint)")
    export.add_argument("--output", required=True, help="folder for the model (safetensors, config, tokenizer)")
    export.add_argument("--policy", help="the model folder the run started from (default: from the checkpoint)")
    sft = kinds.add_parser("sft", help="supervised fine-tuning on rewarded traces (rejection sampling)")
    sft.add_argument("--traces", required=True, help="scored traces (.jsonl or .parquet), e.g. from save_traces")
    sft.add_argument("--policy", required=True, help="the Hugging Face model folder the traces were tokenized for")
    sft.add_argument("--output", required=True, help="folder for the fine-tuned model")
    sft.add_argument("--min-reward", type=float, default=1.0, help="keep episodes with at least this reward")
    sft.add_argument("--steps", type=int, default=100)
    sft.add_argument("--batch-size", type=int, default=16)
    sft.add_argument("--lr", type=float, default=1e-4)
    sft.add_argument("--seed", type=int, default=0)


def run_train_command(args: argparse.Namespace) -> int:
    """Dispatch ``memagent train ...``."""
    return {"rl": _train_rl, "sft": _train_sft, "export": _export}[args.train_command](args)


def _export(args: argparse.Namespace) -> int:
    from memagent_graph.training.rl.checkpoints import export_model, read_policy

    checkpoint = Path(args.checkpoint)
    policy = Path(args.policy) if args.policy else read_policy(checkpoint)
    print(f"exported {export_model(checkpoint, args.output, policy=policy)}", flush=True)
    return 0


def _train_rl(args: argparse.Namespace) -> int:
    from memagent_graph.training.rl.config import RLConfig
    from memagent_graph.training.rl.trainer import Trainer

    config = RLConfig.from_yaml(args.config)
    if args.output_dir:
        config = config.model_copy(update={"output_dir": args.output_dir})
    trainer = Trainer(config, log=lambda line: print(line, flush=True))
    try:
        checkpoint = Path(config.output_dir) / "checkpoint"
        if args.resume:
            if not (checkpoint / "position.json").is_file():
                raise ConfigError(f"nothing to resume: no checkpoint in {checkpoint} (run without --resume)")
            trainer.restore(checkpoint)
            print(
                f"resumed at step {trainer.step_index} (data position {trainer.position}) from {checkpoint}", flush=True
            )
        data = f"rows of {config.task.dataset}" if config.task.dataset else "generated tasks"
        print(
            f"training {config.policy} policy on {data}: {config.steps} steps x {config.questions_per_step} "
            f"questions x {config.group_size} episodes on {config.rollout_workers} rollout worker(s); "
            f"logs in {config.output_dir}",
            flush=True,
        )
        history = trainer.fit(on_step=_print_step, on_eval=_print_eval)
    finally:
        trainer.close()
    rewards = [metrics["reward"] for metrics in history if "reward" in metrics]
    if len(rewards) >= 10:
        first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
        print(f"mean reward: first 5 steps {first:.3f}, last 5 steps {last:.3f}", flush=True)
    from memagent_graph.training.eval.plots import plot_training

    metrics = Path(config.output_dir) / "metrics.jsonl"
    plot = plot_training(metrics, Path(config.output_dir) / "reward.png", title=f"memagent train rl: {args.config}")
    print(f"checkpoint: {checkpoint}; metrics: {metrics}; plot: {plot}", flush=True)
    return 0


def _print_step(metrics: dict[str, float]) -> None:
    print(
        f"step {int(metrics['step']) + 1:>3}  reward {metrics['reward']:.3f}  "
        f"kept {int(metrics['kept_episodes'])}/{int(metrics['episodes'])}  loss {metrics.get('loss', 0.0):+.4f}  "
        f"entropy {metrics.get('entropy', 0.0):.3f}  rollout {metrics['rollout_s']:.1f}s  "
        f"learn {metrics['learn_s']:.1f}s  sync {metrics['sync_s']:.2f}s",
        flush=True,
    )


def _print_eval(metrics: dict[str, float]) -> None:
    print(f"eval after step {int(metrics['step'])}: greedy reward {metrics['eval_reward']:.3f}", flush=True)


def _train_sft(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoTokenizer

    from memagent_graph.training.rl.learner import LearnerConfig, TorchLearner
    from memagent_graph.training.rollout.traces import read_jsonl, read_parquet
    from memagent_graph.training.rollout.weights import load_policy
    from memagent_graph.training.sft.rejection_sampling import fine_tune, rejection_sample

    traces = Path(args.traces)
    if not traces.is_file():
        raise ConfigError(f"no traces file at {traces}")
    if not (Path(args.policy) / "config.json").is_file():
        raise ConfigError(f"policy {args.policy} is not a Hugging Face model folder (no config.json)")
    calls = read_parquet(traces) if traces.suffix == ".parquet" else read_jsonl(traces)
    kept = rejection_sample(calls, min_reward=args.min_reward)
    model = load_policy(args.policy)
    largest = max((max(c.prompt_ids + c.response_ids) for c in kept), default=0)
    if largest >= model.config.vocab_size:
        raise ConfigError(f"the traces hold token id {largest}, beyond {args.policy}'s vocabulary: another tokenizer")
    torch.manual_seed(args.seed)
    learner = TorchLearner(model, config=LearnerConfig(lr=args.lr), pad_id=model.config.pad_token_id or 0)
    episodes = len({c.episode_id for c in kept})
    print(f"{len(kept)} calls of {episodes} episodes with reward >= {args.min_reward} (of {len(calls)} calls)")

    def report(step: int, stats: dict[str, float]) -> None:
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step + 1:>4}  loss {stats['loss']:.4f}  grad norm {stats['grad_norm']:.3f}", flush=True)

    fine_tune(learner, kept, steps=args.steps, batch_size=args.batch_size, seed=args.seed, on_step=report)
    model.save_pretrained(args.output)
    AutoTokenizer.from_pretrained(args.policy, local_files_only=True).save_pretrained(args.output)
    print(f"fine-tuned model: {args.output}")
    return 0
