"""The docs: README is a front page that `.ci/run` can still read, the site under docs/ builds with
`mkdocs build --strict` (a broken link or anchor fails it), every public name has a docstring, and every
Python block a reader would paste either runs here or is an `examples/` script included by reference."""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ToolCallingModel
from langchain_core.documents import Document

from memagent_graph import MemAgent, MemAgentConfig
from memagent_graph.documents.haystack import haystack_paragraphs
from memagent_graph.testing import RuleMemoryModel
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
PACKAGES = ("memagent_graph", "memagent_graph.integrations", "memagent_graph.training")

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
INCLUDE = re.compile(r'^--8<-- "(?P<path>[^"]+)"$')

# What the pages' Python blocks name that a reader has and a test does not: replaced before a block runs.
MODEL_FOLDER = "/models/Qwen2.5-7B-Instruct"
ENDPOINT = "http://localhost:8000/v1"
LANGGRAPH_SERVER = "http://127.0.0.1:2025"

FACT = "The special magic signatory is ada-4021."
"""The fact planted in every file the blocks read; `RuleMemoryModel` keeps it and answers with its value."""


def code_blocks(page: Path, lang: str) -> list[str]:
    """The page's fenced ``lang`` blocks, in order, dedented (blocks inside admonitions are indented)."""
    blocks = []
    for match in FENCE.finditer(page.read_text(encoding="utf-8")):
        if match["lang"] == lang:
            indent = len(match["indent"])
            blocks.append("".join(line[indent:] for line in match["body"].splitlines(keepends=True)))
    return blocks


def included_file(block: str) -> str | None:
    """The file a block includes by reference (``--8<-- "examples/x.py"``), or None for a block to run."""
    match = INCLUDE.match(block.strip())
    return match["path"] if match else None


def runnable_blocks(page: Path) -> list[str]:
    return [block for block in code_blocks(page, "python") if included_file(block) is None]


def readme_tests_line() -> str:
    """What `.ci/run`'s awk takes from README: the first line of the first code block under ``## Tests``."""
    section = README.read_text(encoding="utf-8").split("\n## Tests\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1].split("\n", 2)[1]


# ---------------------------------------------------------------- README as the front page


def test_readme_is_a_front_page_of_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_readme_tests_line_is_the_one_ci_runs():
    [ci_line] = re.findall(r"^TESTS_LINE='(.*)'$", (REPO / ".ci" / "run").read_text(), re.M)
    assert readme_tests_line() == ci_line


def test_the_quickstart_command_is_the_same_on_every_page_that_shows_it():
    def quickstart(page: Path) -> str:
        section = page.read_text(encoding="utf-8").split("## Quickstart", 1)[1]
        return section.split("```bash\n", 1)[1].split("```", 1)[0]

    commands = {page.name: quickstart(page) for page in (README, DOCS / "index.md", DOCS / "reading.md")}
    assert len(set(commands.values())) == 1, commands


def test_the_images_the_docs_show_are_the_benchmark_results():
    copies = {
        "embedded_lengths.png": "benchmarks/results/embedded_lengths/accuracy.png",
        "eval_base_smollm2.png": "benchmarks/results/eval_base_smollm2/accuracy.png",
        "train_tiny_reward.png": "benchmarks/results/train_tiny_reward.png",
    }
    assert {path.name for path in (DOCS / "img").iterdir()} == set(copies)
    for copy, original in copies.items():
        assert (DOCS / "img" / copy).read_bytes() == (REPO / original).read_bytes(), f"copy {original} again"


# ---------------------------------------------------------------- the site


@pytest.mark.integration  # a subprocess: ~3 s
def test_the_site_builds_strictly(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for package in PACKAGES:
        for name in _public_names(package):
            assert f'id="{package}.{name}"' in api, f"{package}.{name} is missing from the API reference"


@functools.cache
def _api_modules() -> dict[str, Any]:
    """The three packages as griffe reads them for the API reference (sources, never imported)."""
    import griffe

    spec = importlib.util.spec_from_file_location("memagent_docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    loader = griffe.GriffeLoader(search_paths=[hooks.build_api_source()])
    return {package: loader.load(package, try_relative_path=False) for package in PACKAGES}


def _public_names(package: str) -> list[str]:
    return list(_api_modules()[package].exports)


def test_every_public_name_and_its_public_methods_have_a_docstring():
    missing = []
    for package, module in _api_modules().items():
        assert module.exports, f"{package} has no __all__"
        for name in module.exports:
            target = module[name].final_target
            if not target.docstring:
                missing.append(f"{package}.{name}")
            if target.is_class:
                for member_name, member in target.members.items():
                    if member_name.startswith("_") or member.is_alias or not member.is_function:
                        continue
                    if not member.docstring:
                        missing.append(f"{package}.{name}.{member_name}")
    assert not missing, f"no docstring: {missing}"


# ---------------------------------------------------------------- the blocks a reader would paste


def test_every_python_block_runs_here_or_is_an_example_that_a_test_runs():
    others = [path for path in Path(__file__).parent.glob("test_*.py") if path.name != Path(__file__).name]
    tests = "".join(path.read_text(encoding="utf-8") for path in others)
    for page in PAGES:
        for block in code_blocks(page, "python"):
            path = included_file(block)
            if path is None:
                continue  # run by test_the_python_blocks_of_a_page_run (or its LangGraph server variant)
            assert re.fullmatch(r"examples/\w+\.py", path), f"{page.name} includes {path}, not an example"
            assert (REPO / path).is_file(), f"{page.name} includes {path}, which does not exist"
            assert Path(path).name in tests, f"no test runs {path}, which {page.name} includes"


@pytest.fixture
def reader_folder(tmp_path, monkeypatch, tokenizer) -> Path:
    """The current folder of a reader who pastes the blocks: the files they name, and a tokenizer folder."""
    text = "\n\n".join([*haystack_paragraphs()[:12], FACT, *haystack_paragraphs()[12:20]])
    for name in ("contract.txt", "site.txt"):
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "docs").mkdir()
    (tmp_path / "tokenizer").mkdir()
    tokenizer.save(tmp_path / "tokenizer" / "tokenizer.json")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_page(page: Path, substitutions: dict[str, str], names: dict[str, Any]) -> dict[str, Any]:
    """Run the page's Python blocks in order in one namespace (as a reader pastes them into one session)."""
    namespace = {"__name__": f"docs_{page.stem}", **names}
    for block in runnable_blocks(page):
        for old, new in substitutions.items():
            block = block.replace(old, new)
        exec(compile(textwrap.dedent(block), f"{page.name} block", "exec"), namespace)
    return namespace


RUNNABLE_PAGES = [page for page in PAGES if runnable_blocks(page)]
SERVER_PAGES = {DOCS / "serving.md"}  # blocks that need a running LangGraph server


@pytest.mark.integration  # a loopback server
@pytest.mark.parametrize("page", [p for p in RUNNABLE_PAGES if p not in SERVER_PAGES], ids=lambda p: p.name)
def test_the_python_blocks_of_a_page_run(page, reader_folder, tokenizer, capsys):
    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        names = {
            # what the page assumes the reader already has (an agent from the Python API, their own models)
            "agent": MemAgent(
                RuleMemoryModel(), tokenizer=tokenizer, config=MemAgentConfig(chunk_tokens=300, memory_tokens=120)
            ),
            "chat_model": ToolCallingModel(args={"question": "Who signed?", "document": "contract"}),
            "docs": [Document(page_content=text) for text in (*haystack_paragraphs()[:3], FACT)],
        }
        substitutions = {MODEL_FOLDER: str(reader_folder / "tokenizer"), ENDPOINT: server.base_url}
        namespace = run_page(page, substitutions, names)
    if "result" in namespace:
        assert namespace["result"].answer == "ada-4021"
    assert "ada-4021" in capsys.readouterr().out


@pytest.mark.slow  # starts `langgraph dev` (~4 s)
@pytest.mark.parametrize("page", sorted(SERVER_PAGES), ids=lambda p: p.name)
def test_the_python_blocks_that_call_the_langgraph_server_run(page, reader_folder, tokenizer, tmp_path_factory, capsys):
    from test_server import langgraph_dev  # the server as tests/test_server.py starts it

    with SimulatedOpenAIServer(tokenizer=tokenizer) as server:
        env = {
            "MEMAGENT_BASE_URL": server.base_url,
            "MEMAGENT_DOCUMENTS_DIR": str(reader_folder),
            "MEMAGENT_TOKENIZER": str(reader_folder / "tokenizer"),
        }
        with langgraph_dev(tmp_path_factory.mktemp("server"), **env) as dev:
            namespace = run_page(page, {LANGGRAPH_SERVER: dev.url}, {})
    assert namespace["out"]["answer"] == "ada-4021"
    assert "ada-4021" in capsys.readouterr().out


@pytest.mark.integration  # imports the trainer's config, and with it torch (~3 s)
def test_the_training_config_blocks_are_valid_changes_to_the_example():
    from memagent_graph.training import RLConfig

    example = yaml.safe_load((REPO / "examples" / "train_tiny.yaml").read_text())
    blocks = code_blocks(DOCS / "training.md", "yaml")
    assert blocks
    for block in blocks:
        RLConfig.model_validate({**example, **yaml.safe_load(block)})
