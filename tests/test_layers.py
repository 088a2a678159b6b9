"""The folders are layers (core <- nodes <- integrations, training) and test doubles stay out of production
code: the import-linter contracts in pyproject.toml, checked on a real install of the package (our
package-dir mapping puts nodes/, integrations/ and training/ inside `memagent_graph` only once installed).
The rooms stay readable: the quote policy's modules live in nodes/quote/, and no function of the nodes, the
facade or the command line runs past `MAX_FUNCTION_LINES` (read from the sources, a unit test)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# The tests that install the package are marked integration one by one; the checks of the sources are unit tests.
ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60
READABLE = [
    *sorted((ROOT / "nodes").rglob("*.py")),
    ROOT / "memagent_graph" / "agent.py",
    *sorted((ROOT / "integrations" / "cli").rglob("*.py")),
    ROOT / "training" / "cli.py",
    ROOT / "training" / "eval" / "cli.py",
]
"""The modules a reader reads first: the graph's nodes, the `MemAgent` facade, the command line."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The package as pip installs it, in a folder of its own (built from a copy of the sources: setuptools
    keeps a build/ folder whose stale modules would otherwise ship)."""
    source, target = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("site")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("memagent_graph", "nodes", "integrations", "training"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--target", str(target), str(source)],
        check=True,
        capture_output=True,
    )
    return target


def _lint(site: Path) -> subprocess.CompletedProcess[str]:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    return subprocess.run(
        [lint, str(ROOT / "pyproject.toml")],
        cwd=site,
        env={"PYTHONPATH": str(site), "PATH": str(Path(sys.executable).parent), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
    )


@pytest.mark.integration  # pip installs the package, lint-imports reads the install
def test_every_layer_imports_only_the_layers_below_it(installed):
    done = _lint(installed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout


def _lint_with_import(installed: Path, tmp_path: Path, module: str, statement: str) -> str:
    """Lint a copy of the install in which ``module`` (a path under the site) gains ``statement``; its report."""
    site = tmp_path / "site"
    shutil.copytree(installed, site)
    path = site / module
    path.write_text(path.read_text() + f"\n{statement}  # noqa\n")
    done = _lint(site)
    assert done.returncode != 0
    return done.stdout


FORBIDDEN = {  # a module of the install gains an import the contracts forbid: what the report names
    "core-imports-an-integration": (
        "memagent_graph/agent.py",
        "from memagent_graph.integrations import tool",
        "memagent_graph.agent -> memagent_graph.integrations.tool",
    ),
    "task-data-imports-the-trainer": (
        "memagent_graph/training/data/tasks.py",
        "from memagent_graph.training.rl import trainer",
        "memagent_graph.training.data.tasks -> memagent_graph.training.rl.trainer",
    ),
    "a-graph-node-imports-the-quote-policy": (
        "memagent_graph/nodes/update_memory.py",
        "from memagent_graph.nodes.quote import memory",
        "the graph reaches memory policies through the registry BROKEN",
    ),
    "production-code-imports-a-test-double": (
        "memagent_graph/training/rl/trainer.py",
        "from memagent_graph.testing import RuleMemoryModel",
        "test doubles stay out of production code BROKEN",
    ),
}


@pytest.mark.integration  # pip installs the package, lint-imports reads the install
@pytest.mark.parametrize(("module", "statement", "expected"), FORBIDDEN.values(), ids=FORBIDDEN)
def test_a_forbidden_import_breaks_its_contract(installed, tmp_path, module, statement, expected):
    assert expected in _lint_with_import(installed, tmp_path, module, statement)


def _long_functions(path: Path) -> list[str]:
    """``name:line (N lines)`` for each function or method in ``path`` longer than `MAX_FUNCTION_LINES`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    lengths = {node: node.end_lineno - node.lineno + 1 for node in functions}
    return [f"{node.name}:{node.lineno} ({n} lines)" for node, n in lengths.items() if n > MAX_FUNCTION_LINES]


def test_no_function_of_the_nodes_the_facade_or_the_cli_is_longer_than_60_lines():
    assert all(path.is_file() for path in READABLE)
    long = [f"{path.relative_to(ROOT)} {entry}" for path in READABLE for entry in _long_functions(path)]
    assert long == []


def test_the_length_check_counts_a_function_from_its_def_to_its_last_line(tmp_path):
    path = tmp_path / "long.py"
    fits, long = "    x = 1\n" * (MAX_FUNCTION_LINES - 1), "        x = 1\n" * MAX_FUNCTION_LINES
    path.write_text(f"def fits():\n{fits}\n\nclass A:\n    async def long(self):\n{long}")
    assert _long_functions(path) == [f"long:{MAX_FUNCTION_LINES + 4} ({MAX_FUNCTION_LINES + 1} lines)"]


def test_the_quote_policys_modules_live_in_nodes_quote_only():
    nodes = ROOT / "nodes"
    assert (nodes / "quote" / "__init__.py").is_file()
    assert [str(p.relative_to(ROOT)) for p in nodes.rglob("quote_*.py") if nodes / "quote" not in p.parents] == []
