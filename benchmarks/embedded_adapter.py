"""The embedded SmolLM2 as a memory agent, base model against a trained memory adapter, side by side on the
held-out evaluation split (RULER's phrasings and seeds the adapter never saw), with retrieval baselines on the
base model. Each sample is read by every method before the next one, so machine noise hits all alike.

    python benchmarks/embedded_adapter.py --task niah_single_2,niah_multikey_1,two_hop --lengths 4k,16k \
        --samples 10 --adapter runs/train-smollm2/adapter [--baselines bm25,embedding]

Writes benchmarks/results/embedded_adapter/ (results.json, results.md, accuracy.png) unless --output-dir.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memagent_graph import MemAgentConfig
from memagent_graph.errors import ConfigError
from memagent_graph.integrations.models.embedded_chat import embedded_chat_model
from memagent_graph.training.eval.evaluation import (
    build_readers,
    check_methods,
    check_samples,
    check_tasks,
    evaluate,
    format_table,
    parse_lengths,
    summarize,
    write_results,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="niah_single_2,niah_multikey_1,two_hop")
    parser.add_argument("--lengths", default="4k,16k")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--baselines", default="", help="baseline methods on the base model, e.g. bm25,embedding")
    parser.add_argument("--adapter", required=True, help="the adapter folder (a peft folder, e.g. runs/.../adapter)")
    parser.add_argument("--chunk-tokens", type=int, default=512, help="the adapter's training chunk (default 512)")
    parser.add_argument("--memory-tokens", type=int, default=96)
    parser.add_argument("--answer-tokens", type=int, default=48)
    parser.add_argument("--context-window", type=int, default=8192, help="SmolLM2's window, for the baselines")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", default=str(Path(__file__).parent / "results" / "embedded_adapter"))
    args = parser.parse_args()
    tasks, lengths = check_tasks(args.task.split(",")), parse_lengths(args.lengths)
    check_samples(args.samples)
    baselines = check_methods(args.baselines.split(",")) if args.baselines else []
    config = MemAgentConfig.build(
        chunk_tokens=args.chunk_tokens,
        memory_tokens=args.memory_tokens,
        answer_tokens=args.answer_tokens,
        temperature=0.0,
    )
    base, adapted = embedded_chat_model(), embedded_chat_model(adapter_path=args.adapter)
    tokenizer = base.tokenizer()
    shared = {"config": config, "context_window": args.context_window}
    readers = {
        "memagent (base)": build_readers(["memagent"], base, tokenizer, **shared)["memagent"],
        "memagent (adapter)": build_readers(["memagent"], adapted, tokenizer, **shared)["memagent"],
        **(build_readers(baselines, base, tokenizer, **shared) if baselines else {}),
    }
    records = evaluate(
        tasks, lengths, samples=args.samples, readers=readers, tokenizer=tokenizer, seed=args.seed, progress=True
    )
    settings = {
        **vars(args),
        "adapter_folder": adapted.adapter_path,
        "reading": config.model_dump(mode="json", exclude={"prompts"}),
    }
    paths = write_results(records, args.output_dir, settings=settings)
    print(format_table(summarize(records)))
    print(f"wrote {paths['json']}, {paths['table']} and {paths['plot']}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except ConfigError as error:  # bad options: one line, as `memagent eval` prints them
        sys.exit(f"embedded_adapter: error: {error}")
