"""`benchmarks/suite_times.py`: the test-time tables of docs/tests.md come from a run's JUnit file, not by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "suite_times.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="3" time="754.2">
<testcase classname="tests.test_a" name="test_fast" time="0.5"/>
<testcase classname="tests.test_b.TestGroup" name="test_slow[x]" time="300.0"><skipped message="no"/></testcase>
<testcase classname="tests.test_b" name="test_broken" time="12.0"><failure message="boom"/></testcase>
</testsuite></testsuites>
"""


@pytest.fixture(scope="module")
def suite_times():
    spec = importlib.util.spec_from_file_location("suite_times", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(tmp_path: Path) -> Path:
    (tmp_path / "run.xml").write_text(JUNIT)
    return tmp_path / "run.xml"


def _result(suite_times, tmp_path) -> dict:
    """The saved result of the JUnit file above, with tiers as `pytest --collect-only -m TIER` would give them."""
    tests, total = suite_times.read_junit(_write(tmp_path))
    tests["tests/test_a.py::test_fast"]["tiers"] = ["unit"]
    tests["tests/test_b.py::TestGroup::test_slow[x]"]["tiers"] = ["slow", "engine"]
    tests["tests/test_b.py::test_broken"]["tiers"] = ["integration"]
    return {"cpu_kind": "AVX2", "machine": "a CPU, 2 cores", "date": "2026-12-07", "wall_s": total, "tests": tests}


def test_a_junit_file_gives_each_tests_node_id_seconds_and_outcome(suite_times, tmp_path):
    tests, total = suite_times.read_junit(_write(tmp_path))
    assert total == 754.2
    assert tests["tests/test_a.py::test_fast"] == {"seconds": 0.5, "outcome": "passed"}
    assert tests["tests/test_b.py::TestGroup::test_slow[x]"]["outcome"] == "skipped"
    assert tests["tests/test_b.py::test_broken"]["outcome"] == "failed"


def test_a_grouped_tests_node_id_drops_the_xdist_group(suite_times, tmp_path):
    grouped = JUNIT.replace('name="test_fast"', 'name="test_fast[a@b]@tests/test_a.py"')
    (tmp_path / "run.xml").write_text(grouped)
    tests, _ = suite_times.read_junit(tmp_path / "run.xml")
    assert "tests/test_a.py::test_fast[a@b]" in tests  # as `pytest --collect-only` names it, to find its tiers


def test_the_tier_table_sums_each_tiers_tests_and_says_what_failed(suite_times, tmp_path):
    table = suite_times.tier_table([_result(suite_times, tmp_path)])
    row = table.splitlines()[2]
    assert row.startswith("| AVX2 (a CPU, 2 cores, 2026-12-07) | **12 min 34 s** (3 tests, 1 skipped, 1 failed) |")
    assert "| 1 tests, 0 min 00 s |" in row and "| 1 tests, 5 min 00 s |" in row  # unit, then integration...


def test_the_docs_block_is_rewritten_and_the_page_around_it_kept(suite_times, tmp_path):
    docs = tmp_path / "tests.md"
    start, end = "<!-- --8<-- [start:test-times] -->", "<!-- --8<-- [end:test-times] -->"
    docs.write_text(f"# Tests\n\nbefore\n\n{start}\nold numbers\n{end}\n\nafter\n")
    suite_times.rewrite_docs([_result(suite_times, tmp_path)], docs)
    text = docs.read_text()
    assert text.startswith("# Tests\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "old numbers" not in text and "do not edit by hand" in text
    assert "`tests/test_b.py::TestGroup::test_slow[x]` | 300 |" in text  # the slowest first


def test_a_page_without_the_block_is_refused(suite_times, tmp_path):
    docs = tmp_path / "tests.md"
    docs.write_text("# Tests\n")
    with pytest.raises(SystemExit, match="no .* block"):
        suite_times.rewrite_docs([_result(suite_times, tmp_path)], docs)
