"""The ``memagent`` command: answers, JSON, and one clear line for every bad input.

The tests call the console script's entry point (`main`) in this process, with its own stdin, environment
and captured output; one test runs the command as a subprocess (``python -m``), as a shell runs it.
"""

import json
import os

import pytest
from helpers import run_python

from memagent_graph.testing.simulated_server import SimulatedOpenAIServer

pytestmark = pytest.mark.integration  # not in the unit tier: a loopback server answers the model calls

SMALL = ["--chunk-tokens", "300", "--memory-tokens", "100", "--answer-tokens", "30"]


@pytest.fixture(scope="module")
def server(tokenizer):
    with SimulatedOpenAIServer(tokenizer=tokenizer) as running:
        yield running


def _assert_one_line_error(result, expected):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and expected in errors[0], result.stderr


def test_ask_prints_the_answer_and_names_the_model(memagent, server, doc, needle):
    result = memagent("ask", str(doc), needle.question, "--base-url", server.base_url, *SMALL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == needle.answer
    assert f"model: rule-model at {server.base_url}" in result.stderr
    assert "tokenizer: the server's /tokenize" in result.stderr


def test_ask_shows_the_file_and_line_its_answer_was_read_at(memagent, server, doc, needle):
    result = memagent("ask", str(doc), needle.question, "--base-url", server.base_url, *SMALL)
    [evidence] = [line for line in result.stderr.splitlines() if line.startswith(f"  {doc}:")]
    line_number = int(evidence.removeprefix(f"  {doc}:").split(":")[0])
    assert needle.answer in doc.read_text().splitlines()[line_number - 1]
    assert "Unsupported memory" not in result.stderr


def test_ask_flags_memory_found_nowhere_in_the_document(memagent, server, tmp_path):
    path = tmp_path / "plain.txt"  # no fact for the rule model to keep: its notes say so in its own words
    path.write_text("The river bends twice before the mill.\nFarmers carry grain every autumn.\n" * 40)
    result = memagent("ask", str(path), "What is the number?", "--base-url", server.base_url, *SMALL)
    assert "Unsupported memory (found nowhere in what was read):\n  - Nothing relevant yet." in result.stderr


def test_ask_json_prints_the_result_object(memagent, server, doc, needle):
    result = memagent("ask", str(doc), needle.question, "--base-url", server.base_url, "--json", "--quiet", *SMALL)
    payload = json.loads(result.stdout)
    assert {"answer", "memory", "num_chunks", "steps", "usage", "elapsed_s", "citations", "unsupported"} <= set(payload)
    [citation, *_] = payload["citations"]
    assert needle.answer in doc.read_bytes()[citation["byte_start"] : citation["byte_end"]].decode()
    assert payload["answer"] == needle.answer
    assert len(payload["steps"]) == payload["num_chunks"] + 1


def test_ask_with_segments_reads_them_and_merges_before_answering(memagent, server, doc, needle):
    options = ["--json", "--quiet", "--segments", "3", *SMALL]
    payload = json.loads(memagent("ask", str(doc), needle.question, "--base-url", server.base_url, *options).stdout)
    assert payload["answer"] == needle.answer and payload["citations"]
    assert payload["usage"]["calls"] == payload["num_chunks"] + 2  # the chunks, one merge section, the answer


def test_ask_reads_stdin(memagent, server, needle):
    result = memagent("ask", "-", needle.question, "--base-url", server.base_url, "--quiet", *SMALL, stdin=needle.text)
    assert result.stdout.strip() == needle.answer


def test_ask_uses_a_local_tokenizer_folder(memagent, server, doc, needle, tokenizer, tmp_path):
    tokenizer._backend.save(str(tmp_path / "tokenizer.json"))
    result = memagent(
        "ask", str(doc), needle.question, "--base-url", server.base_url, "--tokenizer", str(tmp_path), "--quiet", *SMALL
    )
    assert result.stdout.strip() == needle.answer
    assert "/tokenize" not in result.stderr


def test_endpoint_comes_from_the_environment(memagent, server, doc, needle):
    result = memagent(
        "ask", str(doc), needle.question, "--quiet", *SMALL, env_extra={"MEMAGENT_BASE_URL": server.base_url}
    )
    assert result.stdout.strip() == needle.answer


def test_the_command_answers_when_run_as_a_subprocess(server, doc, needle):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMAGENT_", "OPENAI_"))}
    command = ["-m", "memagent_graph.integrations.cli", "ask", str(doc), needle.question]
    done = run_python(*command, "--base-url", server.base_url, "--quiet", *SMALL, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == needle.answer


def test_missing_file(memagent, tmp_path):
    _assert_one_line_error(memagent("ask", str(tmp_path / "nope.txt"), "q"), "document not found")


def test_directory(memagent, tmp_path):
    _assert_one_line_error(memagent("ask", str(tmp_path), "q"), "is a directory")


def test_binary_file(memagent, server, tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    _assert_one_line_error(memagent("ask", str(path), "q", "--base-url", server.base_url), "binary file")


def test_invalid_utf8(memagent, server, tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("déjà vu".encode("latin-1"))
    _assert_one_line_error(memagent("ask", str(path), "q", "--base-url", server.base_url), "not valid UTF-8")


def test_empty_document(memagent, server, tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("\n  \n")
    _assert_one_line_error(memagent("ask", str(path), "q", "--base-url", server.base_url), "is empty")


def test_empty_question(memagent, doc):
    _assert_one_line_error(memagent("ask", str(doc), "   "), "question is empty")


def test_memory_not_smaller_than_chunk(memagent, doc):
    _assert_one_line_error(
        memagent("ask", str(doc), "q", "--chunk-tokens", "100", "--memory-tokens", "100"),
        "must be smaller than --chunk-tokens (100); raise --chunk-tokens or lower --memory-tokens",
    )


def test_unreachable_endpoint(memagent, doc):
    _assert_one_line_error(
        memagent("ask", str(doc), "q", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--max-attempts", "1"),
        "cannot reach the model endpoint",
    )


def test_rejected_api_key(memagent, doc, tokenizer):
    with SimulatedOpenAIServer(status=401) as failing:
        result = memagent("ask", str(doc), "q", "--base-url", failing.base_url, "--model", "m", "--api-key", "sk-x")
    _assert_one_line_error(result, "HTTP 401")
    assert "sk-x" not in result.stderr


def test_unknown_model(memagent, server, doc):
    _assert_one_line_error(
        memagent("ask", str(doc), "q", "--base-url", server.base_url, "--model", "gpt-nope"), "HTTP 404"
    )


def test_missing_tokenizer_folder(memagent, server, doc, tmp_path):
    _assert_one_line_error(
        memagent("ask", str(doc), "q", "--base-url", server.base_url, "--tokenizer", str(tmp_path / "none")),
        "tokenizer not found",
    )


@pytest.fixture
def no_endpoint(monkeypatch):
    for prefix in ("MEMAGENT", "OPENAI"):
        monkeypatch.delenv(f"{prefix}_BASE_URL", raising=False)


def _settings(*argv):
    from memagent_graph.integrations.cli.commands import _config, _parser

    return _config(_parser().parse_args(["ask", "doc.txt", "Who?", *argv]))


def test_the_embedded_engine_reads_with_its_measured_settings(no_endpoint):
    config = _settings()
    assert (config.memory_policy, config.chunk_tokens, config.memory_tokens, config.temperature) == (
        "quote",
        2048,
        256,
        0.0,
    )


def test_an_endpoint_reads_with_memagent_reference_settings(no_endpoint):
    config = _settings("--base-url", "http://127.0.0.1:9/v1")
    assert (config.memory_policy, config.chunk_tokens, config.memory_tokens, config.temperature) == (
        "generate",
        5000,
        1024,
        0.7,
    )


def test_options_override_the_engine_settings(no_endpoint):
    config = _settings("--memory-policy", "generate", "--chunk-tokens", "1000", "--temperature", "0.5")
    assert (config.memory_policy, config.chunk_tokens, config.temperature) == ("generate", 1000, 0.5)


def test_a_missing_model_folder_is_one_clear_line(memagent, tmp_path):
    document = tmp_path / "doc.txt"
    document.write_text("The special magic number is 4711.", encoding="utf-8")
    result = memagent("ask", str(document), "What is the number?", "--model-dir", str(tmp_path / "nowhere"))
    assert result.returncode == 1
    assert "model folder not found" in result.stderr and "Traceback" not in result.stderr
