"""Bad input, one case per test: a specific `MemAgentError` in the API, one clear line and exit 1 in the CLI.

The CLI runs in-process (`memagent_graph.integrations.cli.main`, the console script's entry point) against a simulated
server; `test_cli.py` checks the same paths through real subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memagent_graph import FileDocument, HuggingFaceTokenizer, MemAgent, MemAgentConfig
from memagent_graph.errors import (
    BinaryDocumentError,
    ConfigError,
    DocumentEncodingError,
    DocumentIsDirectoryError,
    DocumentNotFoundError,
    DocumentPermissionError,
    EmptyDocumentError,
    EmptyQuestionError,
    MemAgentError,
    QuestionTooLongError,
    TokenizerError,
)
from memagent_graph.integrations.cli import main
from memagent_graph.testing import RuleMemoryModel
from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.usefixtures("restore_logging")  # `main` configures the loggers

BUDGET = {"chunk_tokens": 300, "memory_tokens": 100, "answer_tokens": 30}


@dataclass(frozen=True)
class Case:
    """A bad input: how to make it, what the API raises, what the CLI's one line says."""

    make: Callable[[Path], Path]
    error: type[MemAgentError]
    says: str
    question: str = "What is the special magic number?"
    budget: dict[str, int] = field(default_factory=dict)


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        (folder / name).write_bytes(data)
        return folder / name

    return make


def _symlink_loop(folder: Path) -> Path:
    (folder / "a").symlink_to(folder / "b")
    (folder / "b").symlink_to(folder / "a")
    return folder / "a"


def _unreadable(folder: Path) -> Path:
    path = _write("secret.txt", b"text")(folder)
    path.chmod(0)
    return path


GOOD = _write("good.txt", b"The special magic number is 42.\n" + b"Filler text about nothing. " * 200)
CASES = {
    "empty file": Case(_write("empty.txt", b""), EmptyDocumentError, "is empty"),
    "whitespace only": Case(_write("blank.txt", b" \n\t\n  \r\n"), EmptyDocumentError, "is empty"),
    "binary file": Case(_write("a.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), BinaryDocumentError, "binary"),
    "invalid UTF-8": Case(_write("latin1.txt", "café au lait".encode("latin-1")), DocumentEncodingError, "UTF-8"),
    "UTF-16 with BOM": Case(_write("u16.txt", "hello".encode("utf-16")), DocumentEncodingError, "UTF-16"),
    "missing file": Case(lambda folder: folder / "nope.txt", DocumentNotFoundError, "not found"),
    "directory": Case(lambda folder: folder, DocumentIsDirectoryError, "is a directory"),
    "symlink loop": Case(_symlink_loop, DocumentNotFoundError, "symlink loop"),
    "no read permission": Case(_unreadable, DocumentPermissionError, "permission denied"),
    "empty question": Case(GOOD, EmptyQuestionError, "question is empty", question="   "),
    "question longer than a chunk": Case(
        GOOD, QuestionTooLongError, "longer than a whole chunk", question="why " * 400
    ),
    "chunk smaller than the template": Case(
        GOOD, ConfigError, "template alone", budget={"chunk_tokens": 60, "memory_tokens": 20}
    ),
    "memory not smaller than a chunk": Case(GOOD, ConfigError, "must be smaller than", budget={"memory_tokens": 300}),
    "negative budget": Case(GOOD, ConfigError, "greater than 0", budget={"answer_tokens": -5}),
}


@pytest.fixture(scope="module")
def tokenizer_file(tokenizer, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(path)
    return path


@pytest.fixture(scope="module")
def server():
    with SimulatedOpenAIServer() as running:
        yield running


def _skip_unreadable_as_root(name: str) -> None:
    if name == "no read permission" and os.geteuid() == 0:
        pytest.skip("root reads any file")


@pytest.mark.parametrize("name", CASES)
def test_the_api_raises_a_specific_error(name, tokenizer, tmp_path):
    _skip_unreadable_as_root(name)
    case = CASES[name]
    with pytest.raises(case.error, match=case.says):
        config = MemAgentConfig.build(**{**BUDGET, **case.budget})
        MemAgent(RuleMemoryModel(), config=config, tokenizer=tokenizer).invoke(
            case.question, FileDocument(case.make(tmp_path))
        )


@pytest.mark.parametrize("name", CASES)
def test_the_cli_prints_one_line_and_exits_1(name, tmp_path, tokenizer_file, server, capsys):
    _skip_unreadable_as_root(name)
    case = CASES[name]
    budget = {**BUDGET, **case.budget}
    flags = [item for key, value in budget.items() for item in (f"--{key.replace('_', '-')}", str(value))]
    code = main(
        ["ask", str(case.make(tmp_path)), case.question, "--base-url", server.base_url, "--model", server.model_name,
         "--tokenizer", str(tokenizer_file), "--quiet", *flags]
    )  # fmt: skip
    stderr = capsys.readouterr().err
    errors = [line for line in stderr.splitlines() if line.startswith("memagent: error: ")]
    assert code == 1 and len(errors) == 1 and case.says in errors[0], stderr
    assert "Traceback" not in stderr


def test_a_tokenizer_path_that_does_not_exist(tmp_path, server, capsys):
    with pytest.raises(TokenizerError, match="nowhere"):
        HuggingFaceTokenizer(tmp_path / "nowhere")
    code = main(
        ["ask", str(GOOD(tmp_path)), "q?", "--base-url", server.base_url, "--tokenizer", str(tmp_path / "nowhere")]
    )
    assert code == 1 and "nowhere" in capsys.readouterr().err


def test_control_and_zero_width_characters_are_read_safely(tokenizer, tmp_path):
    text = (
        "Bell\x07 and escape\x1b[31m red\x1b[0m.\nThe special\u200b magic number is 42.\nZero\u200dwidth\ufeff join.\n"
    )
    path = _write("controls.txt", text.encode() + b"Filler. " * 100)(tmp_path)
    model = RuleMemoryModel(fact_pattern=r"The special\u200b magic number is \d+\.")
    result = MemAgent(model, config=MemAgentConfig(**BUDGET), tokenizer=tokenizer).invoke(
        "What is the special magic number?", FileDocument(path)
    )
    assert result.answer == "42"
    first_prompt = model.calls[0]["prompt"]
    assert "\x07" not in first_prompt and "\x1b" not in first_prompt  # control characters never reach the model
    assert "\u200b" in first_prompt  # zero-width characters are text: kept


PEAK_RSS = """
import resource, sys
from memagent_graph import FileDocument, HuggingFaceTokenizer
from memagent_graph.documents import chunk_document
tokenizer = HuggingFaceTokenizer(sys.argv[2])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
chunked = chunk_document(FileDocument(sys.argv[1]), tokenizer, 5000)
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
largest = max(chunked.chunk_length(i) for i in range(chunked.num_chunks))
print(chunked.num_tokens, chunked.num_chunks, grown, largest, chunked.chunk_text(0)[:40])
"""


@pytest.mark.slow
def test_one_50_mb_line_is_streamed_with_bounded_memory(tmp_path, tokenizer_file):
    path = tmp_path / "line.txt"
    path.write_text(("lorem ipsum dolor sit amet " * 2_000_000)[:50_000_000])  # no newline at all
    done = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, str(path), str(tokenizer_file)], capture_output=True, text=True, timeout=600
    )
    tokens, chunks, grown, largest, start = done.stdout.split(maxsplit=4)
    assert int(largest) <= 5000 and int(chunks) >= int(tokens) // 5000
    with path.open() as text:
        assert start.strip() == text.read(40).strip()  # the first chunk starts where the file does
    # neither the 50 MB of text nor its token ids are kept (the ids alone would be 4 bytes x 28M = 111 MB): what
    # grows is one batch of pieces being encoded, whatever the length
    assert int(grown) < 64_000_000, (grown, tokens)
