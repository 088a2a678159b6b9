"""The LangGraph server under load: one read, then N concurrent stateless reads of N different documents, on the
real ``langgraph dev`` serving this repository's graph, with the simulated OpenAI-compatible server (its own
process: a fixed delay per call, unlimited slots, its ``/tokenize``) as the model.

    python benchmarks/server_load.py [--runs 16] [--chunks 50] [--latency 0.05] [--tokenizer server|local]

Reports the seconds of one read, of the N together and their ratio (the goal: within 3x of one read when the
model has the slots), whether every read answered its own needle, and the server's requests per read.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from common import benchmark_tokenizer, save, simulated_server_process
from langgraph_sdk import get_client

from memagent_graph import TextDocument
from memagent_graph.documents.chunking import chunk_document
from memagent_graph.documents.haystack import NeedleTask, needle_document
from memagent_graph.documents.tokenization import Tokenizer

REPO = Path(__file__).resolve().parents[1]
CHUNK_TOKENS = 400


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--chunks", type=int, default=50, help="chunks per document")
    parser.add_argument("--latency", type=float, default=0.05, help="the model's seconds per call")
    parser.add_argument(
        "--tokenizer",
        choices=("server", "local"),
        default="server",
        help="the server's /tokenize and /detokenize, or a local copy (MEMAGENT_TOKENIZER)",
    )
    parser.add_argument("--jobs", type=int, default=16, help="langgraph dev --n-jobs-per-worker (runs at once)")
    args = parser.parse_args()
    tokenizer = benchmark_tokenizer()
    with tempfile.TemporaryDirectory() as folder:
        documents = Path(folder) / "documents"
        documents.mkdir()
        tasks = _needle_tasks(args.runs, tokens=args.chunks * CHUNK_TOKENS - 50, tokenizer=tokenizer)
        for index, task in enumerate(tasks):
            (documents / f"doc{index}.txt").write_text(task.text, encoding="utf-8")
        local = _local_tokenizer(Path(folder)) if args.tokenizer == "local" else None
        with (
            simulated_server_process(delay_s=args.latency) as base_url,
            _langgraph_dev(Path(folder), base_url, documents, tokenizer=local, jobs=args.jobs) as url,
        ):
            result = asyncio.run(_measure(url, tasks))
    result.update(runs=args.runs, chunks=args.chunks, latency_s=args.latency, tokenizer=args.tokenizer, jobs=args.jobs)
    print(result)
    save(f"server_load_{args.tokenizer}_tokenizer_{args.jobs}_jobs", result)


def _needle_tasks(runs: int, *, tokens: int, tokenizer: Tokenizer) -> list[NeedleTask]:
    """``runs`` needle documents (seeds from 100 on) whose needle no chunk border cuts: the simulated server's
    rule model reads whole sentences only, so a cut needle would be lost whatever the server does."""
    tasks: list[NeedleTask] = []
    seed = 100
    while len(tasks) < runs:
        task = needle_document(tokens=tokens, tokenizer=tokenizer, seed=seed, depth=0.5)
        chunked = chunk_document(TextDocument(task.text), tokenizer, CHUNK_TOKENS)
        if any(f"is {task.answer}." in chunked.chunk_text(i) for i in range(chunked.num_chunks)):
            tasks.append(task)
        seed += 1
    return tasks


def _local_tokenizer(folder: Path) -> Path:
    """The benchmark tokenizer saved as a local folder for the server (the model server's own)."""
    target = folder / "tokenizer"
    target.mkdir()
    benchmark_tokenizer()._backend.save(str(target / "tokenizer.json"))
    return target


async def _measure(url: str, tasks: list) -> dict:
    client = get_client(url=url)

    async def read(index: int) -> tuple[bool, float]:
        started = time.perf_counter()
        output = await client.runs.wait(
            None, "memagent", input={"question": tasks[index].question, "doc_id": f"doc{index}.txt"}
        )
        right = isinstance(output, dict) and output.get("answer") == tasks[index].answer
        if not right:
            print(f"read {index}: expected {tasks[index].answer!r}, got {str(output)[:300]}", flush=True)
        return right, time.perf_counter() - started

    await read(0)  # the server builds its graph on the first run
    right, one = await read(1)
    started = time.perf_counter()
    outcomes = await asyncio.gather(*(read(i) for i in range(len(tasks))))
    together = time.perf_counter() - started
    return {
        "one_read_s": round(one, 2),
        "together_s": round(together, 2),
        "ratio": round(together / one, 2),
        "all_right": right and all(ok for ok, _ in outcomes),
    }


@contextlib.contextmanager
def _langgraph_dev(folder: Path, base_url: str, documents: Path, *, tokenizer: Path | None, jobs: int) -> Iterator[str]:
    shutil.copy(REPO / "langgraph.json", folder / "langgraph.json")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMAGENT_", "OPENAI_"))},
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "MEMAGENT_BASE_URL": base_url,
        "MEMAGENT_DOCUMENTS_DIR": str(documents),
        "MEMAGENT_CHUNK_TOKENS": str(CHUNK_TOKENS),
        "MEMAGENT_MEMORY_TOKENS": "150",
        "MEMAGENT_ANSWER_TOKENS": "40",
        **({"MEMAGENT_TOKENIZER": str(tokenizer)} if tokenizer is not None else {}),
    }
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload", "--port", str(port)]
    command += ["--n-jobs-per-worker", str(jobs)]
    log = (folder / "server.log").open("wb")
    with subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT) as process:
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/ok", timeout=1.0).status_code == 200:
                        break
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
