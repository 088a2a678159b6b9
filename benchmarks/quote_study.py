"""The embedded reader's study: quote-policy variants and the retrieval baselines, side by side in one run.

Each variant reads the same generated documents with the embedded SmolLM2 engine; per (task, length, variant)
it reports RULER's match (`ruler_match_all`), exact match, sub-EM (a gold inside the answer), the share of the
evidence sentences in the final memory, seconds per document and document tokens per second; and, for the
BM25 first stage, its recall: the share of evidence sentences it passes in their own chunk (given the first
hop in memory for a second hop). Choose settings on ``--split train`` or ``validation`` (training wording and
seeds; ``realtext``: Judges); run the held-out table once with ``--split eval``.

    python benchmarks/quote_study.py --split train --tasks two_hop,niah_multikey_1 --lengths 4k --samples 10 \
        --variants before,hops,cascade --output benchmarks/results/quote_study/validation.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from memagent_graph import MemAgent, TextDocument
from memagent_graph.documents.chunking import chunk_document
from memagent_graph.integrations.model_choice import EMBEDDED_READING
from memagent_graph.nodes.quote.memory import split_sentences
from memagent_graph.nodes.quote.prefilter import prefilter
from memagent_graph.nodes.quote.scoring import bridge_terms
from memagent_graph.reading_options import ReadingOptions
from memagent_graph.training.data.task_suite import suite_task
from memagent_graph.training.eval.evaluation import parse_lengths
from memagent_graph.training.rewards import exact_match, gold_in_answer, ruler_match_all

VARIANTS: dict[str, dict[str, Any]] = {
    "before": {"quote_prefilter": 0, "quote_hop_min_share": 2.0, "quote_answer": "copy"},
    "hops": {"quote_prefilter": 0, "quote_answer": "span"},
    "cascade": {},
    "cascade-k8": {"quote_prefilter": 8},
    "cascade-line": {"quote_answer": "line"},
    "cascade-span": {"quote_answer": "span"},
    "cascade-extract": {"quote_answer": "extract"},
    "cascade-gain6": {"quote_min_gain": 6.0},
    "cascade-gain3": {"quote_min_gain": 3.0},
    "cascade-k4": {"quote_prefilter": 4},
    "cascade-k4-gain6": {"quote_prefilter": 4, "quote_min_gain": 6.0},
    "chunk4k-k8": {"chunk_tokens": 4096, "quote_prefilter": 8},
}
"""Settings over the shipped defaults: ``before`` is the quote policy as it was (every sentence scored, no
second hops, the model copies a line); ``cascade`` is the shipped default."""
BASELINES = ("bm25", "embedding", "truncation")


def stage_recall(task: Any, tokenizer: Any, *, chunk_tokens: int, keep: int) -> float | None:
    """The share of ``task``'s evidence sentences the first stage passes in their chunk (a later one given the
    earlier ones as memory, as the policy queries)."""
    if not task.evidence:
        return None
    chunked = chunk_document(TextDocument(task.document), tokenizer, chunk_tokens)
    chunks = [split_sentences(chunked.chunk_text(i)) for i in range(chunked.num_chunks)]
    passed = 0
    for index, sentence in enumerate(task.evidence):
        memory = task.evidence[index - 1] if index else ""
        query = f"{task.question} {bridge_terms(memory, task.question)}" if memory else task.question
        home = next((c for c in chunks if sentence in c), None)
        passed += bool(home) and sentence in prefilter(query, home, keep=keep)
    return passed / len(task.evidence)


def read_variant(model: Any, tokenizer: Any, settings: dict[str, Any]) -> Any:
    """A reader ``(question, document) -> (answer, memory)`` for one quote variant."""
    config = ReadingOptions(**settings).config(EMBEDDED_READING)
    agent = MemAgent(model, config=config, tokenizer=tokenizer)

    def read(question: str, document: str) -> tuple[str, str]:
        result = agent.invoke(question, TextDocument(document))
        return result.answer, result.memory

    return read


def read_baseline(model: Any, tokenizer: Any, method: str) -> Any:
    """A reader for one `memagent eval` baseline (its context is the "memory")."""
    from memagent_graph.training.eval.evaluation import build_readers

    config = ReadingOptions().config(EMBEDDED_READING)
    reader = build_readers([method], model, tokenizer, config=config, context_window=8192)[method]

    def read(question: str, document: str) -> tuple[str, str]:
        reading = reader(question, document)
        cited = "\n".join(document[a:b] for a, b in reading.cited)
        return reading.reply, cited

    return read


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means per (task, tokens, variant)."""
    cells: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        cells[(row["task"], row["tokens"], row["variant"])].append(row)
    table = []
    for (task, tokens, variant), group in sorted(cells.items()):
        seconds = sum(r["seconds"] for r in group)
        cell = {"task": task, "tokens": tokens, "variant": variant, "n": len(group)}
        for key in ("ruler", "em", "sub_em", "evidence_kept"):
            values = [r[key] for r in group if r[key] is not None]
            cell[key] = round(100 * sum(values) / len(values), 1) if values else None
        cell["empty_memory"] = round(100 * sum(not r["memory"].strip() for r in group) / len(group), 1)
        cell["s_per_doc"] = round(seconds / len(group), 2)
        cell["doc_tokens_per_s"] = round(tokens * len(group) / seconds, 1)
        table.append(cell)
    return table


def format_table(table: list[dict[str, Any]]) -> str:
    """A Markdown table of `summarize`'s cells."""
    lines = [
        "| task | length | variant | n | RULER match | EM | sub-EM | evidence kept | empty memory | s/doc | tokens/s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in table:
        cells = [c["task"], f"{c['tokens'] // 1024}K", c["variant"], c["n"]]
        cells += ["–" if c[k] is None else c[k] for k in ("ruler", "em", "sub_em", "evidence_kept")]
        cells += [c["empty_memory"], c["s_per_doc"], c["doc_tokens_per_s"]]
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=["train", "validation", "eval"], required=True)
    parser.add_argument("--tasks", default="two_hop,niah_single_2,niah_multikey_1")
    parser.add_argument("--lengths", default="4k")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", default="before,cascade", help=f"of {', '.join([*VARIANTS, *BASELINES])}")
    parser.add_argument("--output", type=Path, required=True, help="a JSON file (rows are kept as they come)")
    parser.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", "bfloat16", "float32"],
        help="the engine's weights (auto: bf16 where native)",
    )
    parser.add_argument(
        "--model-dir",
        default=None,
        help="a local Hugging Face model folder to read with, in its own tokens (default: SmolLM2); "
        "the documents are cut to SmolLM2's token counts either way",
    )
    args = parser.parse_args()

    from memagent_graph.integrations.models.embedded_chat import embedded_chat_model, embedded_tokenizer

    model = embedded_chat_model(temperature=0.0, dtype=args.dtype, model_path=args.model_dir)
    task_tokenizer = embedded_tokenizer()  # every model reads the same documents, cut to SmolLM2's token counts
    tokenizer = task_tokenizer if args.model_dir is None else model.tokenizer()
    model.load()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    readers = {
        name: read_baseline(model, tokenizer, name)
        if name in BASELINES
        else read_variant(model, tokenizer, VARIANTS[name])
        for name in names
    }
    rows: list[dict[str, Any]] = []
    recall: dict[str, list[float]] = defaultdict(list)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    for task_name in args.tasks.split(","):
        for tokens in parse_lengths(args.lengths):
            for index in range(args.samples):
                task = suite_task(
                    task_name, index, tokens=tokens, tokenizer=task_tokenizer, split=args.split, seed=args.seed
                )
                share = stage_recall(task, tokenizer, chunk_tokens=EMBEDDED_READING["chunk_tokens"], keep=16)
                if share is not None:
                    recall[f"{task_name}/{tokens}"].append(share)
                for name, read in readers.items():
                    started = time.perf_counter()
                    answer, memory = read(task.question, task.document)
                    seconds = time.perf_counter() - started
                    kept = [e for e in task.evidence if e in memory]
                    rows.append(
                        {
                            "task": task_name,
                            "tokens": tokens,
                            "sample": index,
                            "variant": name,
                            "answer": answer,
                            "golds": task.golds,
                            "seconds": round(seconds, 2),
                            "ruler": ruler_match_all(answer, task.golds),
                            "em": exact_match(answer, task.golds),
                            "sub_em": gold_in_answer(answer, task.golds),
                            "evidence_kept": len(kept) / len(task.evidence) if task.evidence else None,
                            "evidence": task.evidence,
                            "question": task.question,
                            "memory": memory,
                        }
                    )
                    print(
                        f"{task_name} {tokens} #{index} {name}: {answer[:60]!r} gold={task.golds} {seconds:.1f}s",
                        file=sys.stderr,
                        flush=True,
                    )
                table = summarize(rows)
                payload = {
                    "split": args.split,
                    "seed": args.seed,
                    "machine": platform.processor() or platform.machine(),
                    "dtype": args.dtype,
                    "model": model._identifying_params["model_name"],
                    "date": time.strftime("%Y-%m-%d"),
                    "command": " ".join(sys.argv),
                    "first_stage_recall_k16": {k: round(sum(v) / len(v), 3) for k, v in recall.items()},
                    "table": table,
                    "rows": rows,
                }
                args.output.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print(format_table(summarize(rows)))
    print(json.dumps(payload["first_stage_recall_k16"]))


if __name__ == "__main__":
    main()
