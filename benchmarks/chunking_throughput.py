"""Chunking throughput at 3.5M tokens: FileDocument (streamed, batched encode) vs encoding one giant string,
and reloading the saved chunk index instead (what a resumed read does: hash the file, read the index).

python benchmarks/chunking_throughput.py [--tokens 3500000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import benchmark_tokenizer, haystack_text, save

from memagent_graph import FileDocument
from memagent_graph.documents import chunk_document
from memagent_graph.documents.chunk_index_file import load_chunk_index, save_chunk_index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=3_500_000)
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    text = haystack_text(args.tokens, tokenizer)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "doc.txt"
        path.write_text(text, encoding="utf-8")
        started = time.perf_counter()
        chunked = chunk_document(FileDocument(path), tokenizer, 5000)
        streamed_s = time.perf_counter() - started
        save_chunk_index(chunked, Path(folder) / "doc.chunks")
        started = time.perf_counter()
        reloaded = load_chunk_index(FileDocument(path), tokenizer, 5000, Path(folder) / "doc.chunks")
        reload_s = time.perf_counter() - started
        assert reloaded is not None and reloaded.fingerprint == chunked.fingerprint
    started = time.perf_counter()
    whole = len(tokenizer.encode(text))
    whole_s = time.perf_counter() - started
    result = {
        "tokenizer": tokenizer.name,
        "document_mb": round(len(text.encode()) / 1e6, 1),
        "tokens": chunked.num_tokens,
        "chunks": chunked.num_chunks,
        "chunk_document_s": round(streamed_s, 2),
        "chunk_document_tok_per_s": round(chunked.num_tokens / streamed_s),
        "one_string_encode_s": round(whole_s, 2),
        "speedup": round(whole_s / streamed_s, 2),
        "index_reload_s": round(reload_s, 3),
        "one_string_tokens": whole,
    }
    print(f"{result['tokens']:,} tokens ({result['document_mb']} MB, {tokenizer.name}) -> {chunked.num_chunks} chunks")
    print(f"chunk_document(FileDocument): {streamed_s:.2f} s ({result['chunk_document_tok_per_s']:,} tok/s)")
    print(f"encode(one string):           {whole_s:.2f} s  -> streamed+batched is {result['speedup']}x faster")
    print(f"saved chunk index reloaded (file hashed, index read): {reload_s:.3f} s")
    print(f"saved {save('chunking_throughput', result)}")


if __name__ == "__main__":
    main()
