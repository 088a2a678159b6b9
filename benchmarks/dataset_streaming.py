"""Streaming a big data file: peak memory and rows/s of reading a ~1 GB Parquet in MemAgent's training schema,
alone and with every document chunked.

    python benchmarks/dataset_streaming.py --out benchmarks/results/dataset_streaming.json [--gigabytes 1.0]
        [--folder DIR] [--keep]

The file is written row group by row group (≤ 64 MB each, as a trainer's file would be), never whole; each
measurement runs in a fresh process whose peak RSS is reset after the imports (Linux ``clear_refs``), so the
peak above the start is what reading added.
The bound the project holds itself to: 300 MB above start.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import RESULTS, benchmark_tokenizer, haystack_text

ROW_GROUP_BYTES = 64 * 2**20
DOCUMENT_TOKENS = 32_768  # MemAgent's training documents: ~28K tokens
BOUND_MB = 300  # peak RSS above start the issue allows


def write_parquet(path: Path, *, gigabytes: float) -> dict[str, float]:
    """A Parquet of MemAgent-schema rows (one long document each, varied) of about ``gigabytes``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from memagent_graph.testing.dataset_files import QARow, memagent_train_record, memagent_train_schema

    text = haystack_text(DOCUMENT_TOKENS * 4, benchmark_tokenizer())
    document_chars = len(text) // 4
    rows_per_group = max(ROW_GROUP_BYTES // (document_chars + 200), 1)
    total_rows, written = int(gigabytes * 2**30 / document_chars), 0
    with pq.ParquetWriter(path, memagent_train_schema(), compression="none") as writer:
        while written < total_rows:
            count = min(rows_per_group, total_rows - written)
            records = []
            for index in range(written, written + count):
                start = (index * 7919) % (len(text) - document_chars)  # a different window of the text per row
                row = QARow(f"Question {index}?", (f"answer {index}",), text[start : start + document_chars])
                records.append(memagent_train_record(row, index))
            writer.write_table(pa.Table.from_pylist(records, memagent_train_schema()), row_group_size=count)
            written += count
    return {"rows": written, "rows_per_group": rows_per_group, "bytes": path.stat().st_size}


def measure(path: str, chunk: bool) -> dict[str, float]:
    """In this (fresh) process: stream every row (and chunk its document); peak RSS above the start."""
    from memagent_graph.documents.chunking import chunk_document
    from memagent_graph.documents.sources import TextDocument
    from memagent_graph.training.data.datasets import open_dataset

    tokenizer = benchmark_tokenizer()
    tokenizer.count("warm up")
    Path(f"/proc/{os.getpid()}/clear_refs").write_text("5")  # reset the peak (VmHWM) to what is resident now
    start_rss = _status_mb("VmRSS")
    started, rows, characters, chunks = time.perf_counter(), 0, 0, 0
    for row in open_dataset(path).rows():
        rows, characters = rows + 1, characters + len(row.document)
        if chunk:
            chunks += chunk_document(TextDocument(row.document), tokenizer, 5000).num_chunks
    seconds = time.perf_counter() - started
    peak = _status_mb("VmHWM")
    return {"rows": rows, "seconds": round(seconds, 2), "rows_per_s": round(rows / seconds, 1),
            "mb_per_s": round(characters / 2**20 / seconds, 1), "chunks": chunks,
            "peak_rss_above_start_mb": round(peak - start_rss, 1)}  # fmt: skip


def _status_mb(field: str) -> float:
    """A memory field of /proc/self/status (VmRSS: resident now, VmHWM: the peak since the last reset), in MB."""
    with open(f"/proc/{os.getpid()}/status", encoding="utf-8") as status:
        return next(float(line.split()[1]) / 1024 for line in status if line.startswith(f"{field}:"))


def cpu() -> dict[str, object]:
    """The CPU the numbers were measured on: its model (as lscpu names it), cores, and AVX512-BF16."""
    info = Path("/proc/cpuinfo").read_text(encoding="utf-8") if Path("/proc/cpuinfo").exists() else ""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")), "")
    return {"model": model or platform.processor() or platform.machine(), "cores": len(os.sched_getaffinity(0)),
            "avx512_bf16": "avx512_bf16" in info}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "dataset_streaming.json", help="the result file")
    parser.add_argument("--gigabytes", type=float, default=1.0)
    parser.add_argument("--folder", help="where to write the file (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the file")
    parser.add_argument("--measure", nargs=2, metavar=("PATH", "CHUNK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:  # the child process
        print(json.dumps(measure(args.measure[0], args.measure[1] == "1")))
        return 0
    folder = Path(args.folder or tempfile.mkdtemp(prefix="memagent-streaming-"))
    path = folder / "train.parquet"
    written = write_parquet(path, gigabytes=args.gigabytes)
    print(f"wrote {path}: {written}", flush=True)
    results = {"cpu": cpu(), "date": time.strftime("%Y-%m-%d"), "document_tokens": DOCUMENT_TOKENS, "file": written}
    for name, chunk in (("read", "0"), ("read_and_chunk", "1")):
        child = [sys.executable, __file__, "--measure", str(path), chunk]
        results[name] = json.loads(subprocess.run(child, capture_output=True, text=True, check=True).stdout)
        print(f"{name}: {results[name]}", flush=True)
    if not args.keep:
        path.unlink()
        if not args.folder:
            folder.rmdir()
    peaks = [results[name]["peak_rss_above_start_mb"] for name in ("read", "read_and_chunk")]
    results |= {"bound_mb": BOUND_MB, "within_bound": max(peaks) <= BOUND_MB}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
