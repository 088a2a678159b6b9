"""Soak: many CLI reads with random SIGKILLs and 20% injected faults; every read must end with the right answer.

Each run reads a fresh needle document through `memagent ask --checkpoint-db` against the fault-injecting
simulated server; the process is killed at random completion requests (up to ``--max-kills`` times) and
restarted until it finishes. Its answer must equal the answer of an uninterrupted, fault-free read of the
same document (the simulated server's model is deterministic). A request for a chunk whose reply was already
delivered counts as re-sent work (at most one chunk per kill may be: the one in flight when the process died).

    python benchmarks/soak.py [--runs 20] [--chunks 30] [--fault-rate 0.2] [--seed 0]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from common import save

from memagent_graph import MemAgent, MemAgentConfig, TextDocument
from memagent_graph.documents.haystack import haystack_paragraphs, needle_document
from memagent_graph.testing import RuleMemoryModel, train_bpe_tokenizer
from memagent_graph.testing.simulated_server import FaultPlan, SimulatedOpenAIServer

BUDGET = ["--chunk-tokens", "300", "--memory-tokens", "80", "--answer-tokens", "30", "--temperature", "0"]
CONFIG = MemAgentConfig(chunk_tokens=300, memory_tokens=80, answer_tokens=30, temperature=0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=30)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--max-kills", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    tokenizer = train_bpe_tokenizer(haystack_paragraphs()[:600], vocab_size=2048)
    totals: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        tokenizer.save(folder / "tokenizer.json")
        for run in range(args.runs):
            task = needle_document(tokens=args.chunks * 300 - 150, tokenizer=tokenizer, seed=run, depth=rng.random())
            (folder / "doc.txt").write_text(task.text)
            reference = MemAgent(RuleMemoryModel(), config=CONFIG, tokenizer=tokenizer).invoke(
                task.question, TextDocument(task.text)
            )
            outcome = _soak_one(folder, task, reference.answer, rng, args, seed=args.seed * 1000 + run)
            totals.update(outcome)
            print(f"run {run + 1:3d}: " + ", ".join(f"{k} {v}" for k, v in sorted(outcome.items())), flush=True)
            (folder / "run.db").unlink()
    summary = {key: totals[key] for key in ("runs", "kills", "faults", "retries", "chunks_resent", "wrong_answers")}
    print("\n" + "  ".join(f"{key.replace('_', ' ')}: {value}" for key, value in summary.items()))
    print(f"saved {save('soak', {'settings': vars(args), 'totals': summary})}")


def _soak_one(
    folder: Path, task, expected: str, rng: random.Random, args: argparse.Namespace, *, seed: int
) -> Counter[str]:
    outcome: Counter[str] = Counter(runs=1)
    delivered: set[str] = set()  # chunk prompts whose reply reached a live client
    plan = FaultPlan(rate=args.fault_rate, seed=seed, hang_s=1.0)
    with SimulatedOpenAIServer(faults=plan) as server:
        for attempt in range(args.max_kills + 1):
            kill_at = rng.randrange(len(server.chat_requests()) + 1, len(server.chat_requests()) + args.chunks)
            kill = attempt < args.max_kills and rng.random() < 0.7
            process = subprocess.Popen(
                [sys.executable, "-m", "memagent_graph.integrations.cli",
"ask", str(folder / "doc.txt"), task.question,
                 "--base-url", server.base_url, "--model", server.model_name, "--timeout", "0.5", "--max-attempts", "8",
                 "--tokenizer", str(folder / "tokenizer.json"), *BUDGET, "--json", "--quiet",
                 "--checkpoint-db", str(folder / "run.db")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            server.on_completion = _killer(process, kill_at) if kill else None
            start = len(server.chat_requests())
            stdout, stderr = process.communicate(timeout=600)
            outcome["retries"] += sum(o != "ok" for o in server.outcomes[start:])
            for body, result in zip(server.chat_requests()[start:], server.outcomes[start:], strict=False):
                prompt = hashlib.sha1(body["messages"][-1]["content"].encode()).hexdigest()
                if prompt in delivered:
                    outcome["chunks_resent"] += 1
                if result == "ok":
                    delivered.add(prompt)
            if process.returncode == -signal.SIGKILL:
                outcome["kills"] += 1
                delivered.discard(prompt)  # the reply in flight at the kill never reached a live client
                continue
            answer = json.loads(stdout)["answer"] if process.returncode == 0 else f"error: {stderr.strip()[-200:]}"
            if answer != expected:
                outcome["wrong_answers"] += 1
                print(f"  wrong: got {answer!r}, an uninterrupted clean read gives {expected!r}", flush=True)
            break
        outcome["faults"] += sum(server.injected.values())
    return outcome


def _killer(process: subprocess.Popen, at: int):
    def kill(index: int) -> None:
        if index == at:
            os.kill(process.pid, signal.SIGKILL)

    return kill


if __name__ == "__main__":
    main()
