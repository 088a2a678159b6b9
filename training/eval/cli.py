"""`memagent eval`: run the evaluation grid with the chosen model and print, save and plot the results."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memagent_graph.errors import ConfigError
from memagent_graph.training.data.task_suite import TASK_KINDS
from memagent_graph.training.eval.evaluation import (
    METHODS,
    EvalRecord,
    build_readers,
    check_methods,
    check_samples,
    check_tasks,
    evaluate,
    format_report,
    parse_lengths,
    write_results,
)
from memagent_graph.training.eval.record_log import RecordLog, reading_code_digest

if TYPE_CHECKING:
    from memagent_graph.config import MemAgentConfig
    from memagent_graph.integrations.model_choice import ModelChoice

log = logging.getLogger("memagent")


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``memagent eval`` other than the model and reading budget."""
    families = ", ".join(TASK_KINDS)
    parser.add_argument("--task", help=f"one or more of {families}, hotpotqa; comma-separated")
    parser.add_argument("--dataset", metavar="FILE", help="the rows of a data file instead (docs: Your own data)")
    parser.add_argument(
        "--limit", type=int, help="the first N good rows of --dataset (default: all), or N documents per --task length"
    )
    parser.add_argument("--columns", help="with --dataset: the file's names, e.g. question=query,answers=gold")
    parser.add_argument("--on-bad-row", choices=["error", "skip"], help="with --dataset (default: error)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="skip the documents or rows OUTPUT_DIR already holds answers for (a larger --samples adds documents)",
    )
    parser.add_argument("--hotpotqa", metavar="FILE", help="the HotpotQA JSON (hotpot_dev_distractor_v1.json)")
    parser.add_argument(
        "--closed-book-filter",
        action="store_true",
        help="with hotpotqa: drop questions the model answers without the document (asked once each)",
    )
    parser.add_argument("--lengths", help="document lengths in tokens, e.g. 4k,32k,1m (default 4k,16k)")
    parser.add_argument("--samples", type=int, help="documents per task and length (default 5)")
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

    if args.dataset is not None:
        return run_dataset_eval(args, config=config, choose=choose)
    if not args.task:
        raise ConfigError("say what to evaluate on: --task niah_single_2 (generated tasks) or --dataset FILE")
    if args.columns or args.on_bad_row:
        raise ConfigError("--columns and --on-bad-row apply to --dataset")
    if args.limit is not None and args.samples is not None:
        raise ConfigError("--limit and --samples both say how many documents per task and length: give one")
    samples = args.samples if args.samples is not None else args.limit
    args.lengths, args.samples = args.lengths or "4k,16k", 5 if samples is None else samples
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
    settings = {
        "model": choice.description,
        "tasks": tasks,
        "lengths": lengths,
        "samples": args.samples,
        "methods": methods,
        "seed": args.seed,
        "context_window": args.context_window,
        "reading": config.model_dump(mode="json", exclude={"prompts"}),
        "reading_code": reading_code_digest(),
    }
    answers = RecordLog(  # document i of a task is the same for every --samples: a resumed run may ask for more
        args.output_dir, settings=settings, resume=args.resume, record=EvalRecord, growable=("samples",)
    )
    done = {(r.task, r.tokens, r.method, r.sample) for r in answers.records()}
    built = build_readers(methods, choice.model, choice.tokenizer, config=config, context_window=args.context_window)
    evaluate(tasks, lengths, samples=args.samples, readers=built, tokenizer=choice.tokenizer, seed=args.seed,
             hotpotqa=hotpotqa, progress=not args.quiet, done=done, on_record=answers.append)  # fmt: skip
    records = answers.records()
    paths = write_results(records, args.output_dir, settings=settings)
    print(format_report(records))
    log.info("wrote %s, %s and %s", paths["json"], paths["table"], paths["plot"])
    return 0


def parse_columns(text: str | None) -> dict[str, str] | None:
    """``"question=query,answers=gold"`` → ``{"question": "query", "answers": "gold"}``."""
    if not text:
        return None
    pairs = [part.split("=", 1) for part in text.split(",") if part.strip()]
    if any(len(pair) != 2 or not pair[0].strip() or not pair[1].strip() for pair in pairs):
        raise ConfigError(f"--columns {text!r}: write field=column pairs, e.g. question=query,answers=gold")
    return {field.strip(): column.strip() for field, column in pairs}


def run_dataset_eval(args: argparse.Namespace, *, config: MemAgentConfig, choose: Callable[[], ModelChoice]) -> int:
    """``memagent eval --dataset FILE``: check the file's first rows, then answer every row (`dataset_eval`)."""
    from memagent_graph.training.data.datasets import open_dataset
    from memagent_graph.training.eval.dataset_eval import (
        RowRecord,
        evaluate_rows,
        headline_metric,
        write_dataset_results,
    )
    from memagent_graph.training.eval.record_log import RecordLog, reading_code_digest

    if args.task:
        raise ConfigError("--task and --dataset both given: drop --task to read the file's rows, or --dataset")
    if args.lengths or args.samples is not None or args.hotpotqa or args.closed_book_filter:
        raise ConfigError(
            "--lengths, --samples, --hotpotqa and --closed-book-filter apply to --task: with --dataset use --limit"
        )
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {args.limit}")
    columns, on_bad_row = parse_columns(args.columns), args.on_bad_row or "error"
    dataset = open_dataset(args.dataset, columns=columns, on_bad_row=on_bad_row)
    dataset.check()
    methods = check_methods([m.strip() for m in args.methods.split(",") if m.strip()])
    choice = choose()
    log.info("model: %s; %s rows of %s", choice.description, dataset.format, dataset.name)
    settings = {
        "dataset": str(Path(args.dataset).resolve()), "columns": columns, "on_bad_row": on_bad_row,
        "model": choice.description, "methods": methods, "context_window": args.context_window,
        "reading": config.model_dump(mode="json", exclude={"prompts"}), "reading_code": reading_code_digest(),
    }  # fmt: skip
    records = RecordLog(args.output_dir, settings=settings, resume=args.resume, record=RowRecord)
    done = {(record.row, record.method) for record in records.records()}
    built = build_readers(methods, choice.model, choice.tokenizer, config=config, context_window=args.context_window)
    evaluate_rows(dataset, readers=built, tokenizer=choice.tokenizer, limit=args.limit, done=done,
                  on_record=records.append, progress=not args.quiet)  # fmt: skip
    headline = headline_metric(dataset.format)
    report = write_dataset_results(records, headline=headline, skipped=dataset.skipped, settings=settings)
    print(report)
    log.info("wrote %s", Path(args.output_dir) / "results.json")
    return 0
