"""Time the whole test run and write the tables of docs/tests.md from the measurement (never by hand).

    python benchmarks/suite_times.py                      # run `python -m pytest`, save, rewrite docs/tests.md
    python benchmarks/suite_times.py --junit run.xml      # use a run already made (`pytest --junitxml run.xml`)
    python benchmarks/suite_times.py --docs-only          # rewrite docs/tests.md from the saved results

Each CPU kind (AVX512-BF16, or AVX2 only: torch computes in bf16 on the first and fp32 on the second, so the
same tests take different times) keeps its own results file, `benchmarks/results/suite_times/<kind>.json`; the
docs show every kind measured so far, each with its machine and date.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

from memagent_graph.precision import cpu_kind

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "suite_times"
DOCS = REPO / "docs" / "tests.md"
TIERS = ("unit", "integration", "slow", "engine", "vllm", "ray")
"""The markers of tests/conftest.py: `unit` is every test marked none of the others."""
SLOWEST = 12


def cpu_model() -> str:
    """The CPU's model name and the cores this process may use."""
    names = re.findall(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), flags=re.MULTILINE)
    return f"{names[0] if names else 'unknown CPU'}, {len(os.sched_getaffinity(0))} cores"


def run_suite(junit: Path) -> float:
    """Run the whole suite (the README's `python -m pytest`), writing ``junit``; its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}"],
                          cwd=REPO)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the test run failed (exit code {done.returncode}): fix it before timing it")
    return time.perf_counter() - started


def tier_members(tier: str) -> set[str]:
    """The node ids pytest collects for ``-m tier``."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", tier], cwd=REPO, capture_output=True, text=True)  # fmt: skip
    return {line for line in done.stdout.splitlines() if "::" in line}


def without_group(name: str) -> str:
    """A test name without pytest-xdist's ``@group`` suffix (`--dist loadgroup`), split as xdist splits it: at the
    last ``@`` after any parameter brackets."""
    at = name.rfind("@")
    return name[:at] if at > name.rfind("]") else name


def read_junit(junit: Path) -> tuple[dict[str, dict[str, Any]], float]:
    """Each test's seconds and outcome by node id, and the run's total seconds, from a JUnit XML file."""
    root = ElementTree.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    tests = {}
    for case in suite.iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(part for part in module if part[:1].islower()) + ".py"
        classes = [part for part in module if part[:1].isupper()]
        name = without_group(case.get("name", ""))
        node = "::".join([path, *classes, name])
        failed = case.find("failure") is not None or case.find("error") is not None
        outcome = "failed" if failed else "skipped" if case.find("skipped") is not None else "passed"
        tests[node] = {"seconds": float(case.get("time", 0.0)), "outcome": outcome}
    return tests, float(suite.get("time", 0.0))


def measure(junit: Path, wall_s: float | None) -> dict[str, Any]:
    """The saved result of one run: machine, date, every test's seconds and tiers, and the run's wall time."""
    tests, total = read_junit(junit)
    members = {tier: tier_members(tier) for tier in TIERS}
    for node, test in tests.items():
        test["tiers"] = [tier for tier in TIERS if node in members[tier]]
    return {
        "cpu_kind": cpu_kind(),
        "machine": cpu_model(),
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": round(wall_s if wall_s is not None else total, 1),
        "tests": tests,
    }


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)  # rounded first: 1259.6 s is 21 min 00 s, not 20 min 60 s
    return f"{minutes} min {rest:02d} s"


def tier_table(results: list[dict[str, Any]]) -> str:
    """One row per CPU kind: the whole run's wall time and tests, then each tier's tests and summed seconds."""
    header = "| CPU kind (machine, date) | whole run | " + " | ".join(f"`{tier}`" for tier in TIERS) + " |"
    rows = [header, "|" + "---|" * (len(TIERS) + 2)]
    for result in results:
        tests = result["tests"].values()
        skipped = sum(test["outcome"] == "skipped" for test in tests)
        failed = sum(test["outcome"] == "failed" for test in tests)
        cells = []
        for tier in TIERS:
            inside = [test for test in tests if tier in test["tiers"]]
            cells.append(f"{len(inside)} tests, {_minutes(sum(test['seconds'] for test in inside))}")
        whole = f"**{_minutes(result['wall_s'])}** ({len(tests)} tests, {skipped} skipped"
        whole += f", {failed} failed)" if failed else ")"
        rows.append(f"| {result['cpu_kind']} ({result['machine']}, {result['date']}) | {whole} | {' | '.join(cells)} |")
    return "\n".join(rows)


def slowest_table(result: dict[str, Any]) -> str:
    """The slowest tests of one run, with their tiers."""
    ranked = sorted(result["tests"].items(), key=lambda item: -item[1]["seconds"])[:SLOWEST]
    rows = [f"| test ({result['cpu_kind']}, {result['date']}) | seconds | tiers |", "|---|---|---|"]
    rows += [f"| `{node}` | {test['seconds']:.0f} | {', '.join(test['tiers'])} |" for node, test in ranked]
    return "\n".join(rows)


def rewrite_docs(results: list[dict[str, Any]], docs: Path = DOCS) -> None:
    """Replace the generated block of ``docs`` (between its ``test-times`` markers) with the tables."""
    start, end = "<!-- --8<-- [start:test-times] -->", "<!-- --8<-- [end:test-times] -->"
    text = docs.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{docs} has no {start} ... {end} block to rewrite")
    newest = max(results, key=lambda result: result["date"])
    block = (
        f"{start}\n<!-- written by `python benchmarks/suite_times.py`: do not edit by hand -->\n"
        f"{tier_table(results)}\n\nThe slowest tests:\n\n{slowest_table(newest)}\n{end}"
    )
    docs.write_text(text[: text.index(start)] + block + text[text.index(end) + len(end) :])


def saved_results() -> list[dict[str, Any]]:
    """Every CPU kind's saved result, AVX2 first."""
    return [json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--junit", type=Path, help="a JUnit XML file of a whole run made on this machine")
    source.add_argument("--docs-only", action="store_true", help="only rewrite docs/tests.md from saved results")
    args = parser.parse_args(argv)
    if not args.docs_only:
        with tempfile.TemporaryDirectory() as scratch:
            junit = args.junit or Path(scratch) / "run.xml"
            wall = None if args.junit else run_suite(junit)
            result = measure(junit, wall)
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"{result['cpu_kind']}.json"
        path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"{path.relative_to(REPO)}: {len(result['tests'])} tests in {_minutes(result['wall_s'])}")
    rewrite_docs(saved_results())
    print(f"rewrote {DOCS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
