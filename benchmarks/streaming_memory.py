"""Peak memory of chunking files from disk: a 100M-token document and one 50 MB line, each in a fresh process.

The text is streamed (1 MiB blocks, 64 KiB pieces); what stays in memory is the token ids, 4 bytes each.

    python benchmarks/streaming_memory.py [--tokens 1000000,10000000,100000000] [--line-mb 50]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from common import save

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {benchmarks!r})
from common import benchmark_tokenizer
from memagent_graph import FileDocument
from memagent_graph.documents import chunk_document
tokenizer = benchmark_tokenizer()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
chunked = chunk_document(FileDocument({path!r}), tokenizer, 5000)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"tokens": chunked.num_tokens, "chunks": chunked.num_chunks, "seconds": round(seconds, 1),
                  "baseline_mb": round(before / 1024), "peak_mb": round(peak / 1024)}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="1000000,10000000,100000000")
    parser.add_argument("--line-mb", type=int, default=50)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for tokens in (int(t) for t in args.tokens.split(",")):
            rows.append(_measure(_haystack_file(Path(folder) / "doc.txt", tokens), f"{tokens:,} tokens"))
        line = Path(folder) / "line.txt"
        line.write_text(("lorem ipsum dolor sit amet " * (args.line_mb * 40_000))[: args.line_mb * 1_000_000])
        rows.append(_measure(line, f"one {args.line_mb} MB line"))
    print(f"saved {save('streaming_memory', {'rows': rows})}")


def _haystack_file(path: Path, tokens: int) -> Path:
    """Write about ``tokens`` tokens of haystack text in 1 MB writes (never the whole text in memory)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from common import benchmark_tokenizer, haystack_text

    block = haystack_text(250_000, benchmark_tokenizer())
    with path.open("w", encoding="utf-8") as out:
        for _ in range(max(1, round(tokens / 250_000))):
            out.write(block + "\n\n")
    return path


def _measure(path: Path, label: str) -> dict[str, object]:
    child = CHILD.format(benchmarks=str(Path(__file__).parent), path=str(path))
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    row = {"document": label, "file_mb": round(path.stat().st_size / 1e6), **json.loads(done.stdout.splitlines()[-1])}
    grown = row["peak_mb"] - row["baseline_mb"]
    row["bytes_per_token"] = round(grown * 2**20 / row["tokens"], 2)
    print(
        f"{label:>22}: {row['file_mb']:>5} MB file, {row['tokens']:>11,} tokens in {row['seconds']:>6} s, "
        f"peak RSS {row['peak_mb']:,} MB ({row['bytes_per_token']} bytes/token over {row['baseline_mb']} MB at start)"
    )
    return row


if __name__ == "__main__":
    main()
