"""The folders are layers (core <- nodes <- integrations, training) and test doubles stay out of production
code: the import-linter contracts in pyproject.toml, checked on a real install of the package (our
package-dir mapping puts nodes/, integrations/ and training/ inside `memagent_graph` only once installed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]


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


def test_every_layer_imports_only_the_layers_below_it(installed):
    done = _lint(installed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


def _lint_with_import(installed: Path, tmp_path: Path, module: str, statement: str) -> str:
    """Lint a copy of the install in which ``module`` (a path under the site) gains ``statement``; its report."""
    site = tmp_path / "site"
    shutil.copytree(installed, site)
    path = site / module
    path.write_text(path.read_text() + f"\n{statement}  # noqa\n")
    done = _lint(site)
    assert done.returncode != 0
    return done.stdout


def test_an_upward_import_from_the_core_breaks_the_contract(installed, tmp_path):
    report = _lint_with_import(
        installed, tmp_path, "memagent_graph/agent.py", "from memagent_graph.integrations import tool"
    )
    assert "memagent_graph.agent -> memagent_graph.integrations.tool" in report


def test_task_data_importing_the_trainer_breaks_the_training_layers(installed, tmp_path):
    report = _lint_with_import(
        installed, tmp_path, "memagent_graph/training/data/tasks.py", "from memagent_graph.training.rl import trainer"
    )
    assert "memagent_graph.training.data.tasks -> memagent_graph.training.rl.trainer" in report


def test_production_code_importing_a_test_double_breaks_the_contract(installed, tmp_path):
    report = _lint_with_import(
        installed,
        tmp_path,
        "memagent_graph/training/rl/trainer.py",
        "from memagent_graph.testing import RuleMemoryModel",
    )
    assert "test doubles stay out of production code BROKEN" in report
