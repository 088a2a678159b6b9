"""`memagent eval`: run the evaluation grid with the chosen model and print, save and plot the results."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from memagent_graph.training.data.task_suite import TASK_KINDS
from memagent_graph.training.eval.evaluation import (
    METHODS,
    build_readers,
    check_methods,
    check_samples,
    check_tasks,
    evaluate,
    format_report,
    parse_lengths,
    write_results,
)

if TYPE_CHECKING:
    from memagent_graph.config import MemAgentConfig
    from memagent_graph.integrations.model_choice import ModelChoice

log = logging.getLogger("memagent")


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``memagent eval`` other than the model and reading budget."""
    families = ", ".join(TASK_KINDS)
    parser.add_argument("--task", required=True, help=f"one or more of {families}, hotpotqa; comma-separated")
    parser.add_argument("--hotpotqa", metavar="FILE", help="the HotpotQA JSON (hotpot_dev_distractor_v1.json)")
    parser.add_argument(
        "--closed-book-filter",
        action="store_true",
        help="with hotpotqa: drop questions the model answers without the document (asked once each)",
    )
    parser.add_argument(
        "--lengths", default="4k,16k", help="document lengths in tokens, e.g. 4k,32k,1m (default 4k,16k)"
    )
    parser.add_argument("--samples", type=int, default=5, help="documents per task and length (default 5)")
    parser.add_argument(
        "--methods", default=",".join(METHODS), help=f"comma-separated, from {', '.join(METHODS)} (default: all)"
    )
    parser.add_argument("--context-window", type=int, default=8192, help="the model's window, for the baselines")
    parser.add_argument("--seed", type=int, default=0, help="task seed (evaluation split)")
    parser.add_argument("--output-dir", default="runs/eval", help="results.json, results.md, accuracy.png")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(temperature=0.0)


def run_eval(args: argparse.Namespace, *, config: MemAgentConfig, choose: Callable[[], ModelChoice]) -> int:
    """Check every option first (nothing runs on bad input), then evaluate and report."""
    from memagent_graph.training.data.hotpotqa import closed_book_filter, load_hotpotqa

    tasks = [name.strip() for name in args.task.split(",") if name.strip()]
    hotpotqa = load_hotpotqa(args.hotpotqa) if args.hotpotqa else None
    check_tasks(tasks, hotpotqa=hotpotqa)
    lengths = parse_lengths(args.lengths)
    check_samples(args.samples)
    methods = check_methods([m.strip() for m in args.methods.split(",") if m.strip()])
    choice = choose()
    log.info("model: %s", choice.description)
    if hotpotqa is not None and args.closed_book_filter:
        known = len(hotpotqa)
        hotpotqa = closed_book_filter(hotpotqa, choice.model)
        log.info("closed-book filter: kept %d of %d HotpotQA questions", len(hotpotqa), known)
    built = build_readers(methods, choice.model, choice.tokenizer, config=config, context_window=args.context_window)
    records = evaluate(
        tasks,
        lengths,
        samples=args.samples,
        readers=built,
        tokenizer=choice.tokenizer,
        seed=args.seed,
        hotpotqa=hotpotqa,
        progress=not args.quiet,
    )
    settings = {
        "model": choice.description,
        "tasks": tasks,
        "lengths": lengths,
        "samples": args.samples,
        "methods": methods,
        "seed": args.seed,
        "context_window": args.context_window,
        "reading": config.model_dump(mode="json", exclude={"prompts"}),
    }
    paths = write_results(records, args.output_dir, settings=settings)
    print(format_report(records))
    log.info("wrote %s, %s and %s", paths["json"], paths["table"], paths["plot"])
    return 0
