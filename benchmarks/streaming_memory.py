"""Peak memory of chunking files from disk and then reading every chunk's ids back, each file in a fresh process:
documents of 10M to 1B tokens (written on the fly into a temporary file, deleted after) and one 50 MB line.

The text is streamed (1 MiB blocks, 64 KiB pieces); what stays is the chunk index (where each piece and chunk
starts), and a chunk is encoded again from its piece when read: the goal is a flat peak, whatever the length.

    python benchmarks/streaming_memory.py [--tokens 10000000,100000000,1000000000] [--line-mb 50]
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
chunked_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
read = sum(len(chunked.chunk_ids(i)) for i in range(chunked.num_chunks))
assert read == chunked.num_tokens
read_seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"tokens": chunked.num_tokens, "chunks": chunked.num_chunks, "seconds": round(seconds, 1),
                  "read_seconds": round(read_seconds, 1), "baseline_mb": round(before / 1024),
                  "chunked_peak_mb": round(chunked_peak / 1024), "peak_mb": round(peak / 1024)}}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", default="10000000,100000000,1000000000")
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
    row["grown_mb"] = row["peak_mb"] - row["baseline_mb"]
    print(
        f"{label:>22}: {row['file_mb']:>5} MB file, {row['tokens']:>13,} tokens chunked in {row['seconds']:>6} s "
        f"and read back in {row['read_seconds']} s; peak RSS {row['peak_mb']:,} MB, {row['grown_mb']} MB above "
        f"the {row['baseline_mb']} MB at start"
    )
    path.unlink()
    return row


if __name__ == "__main__":
    main()
