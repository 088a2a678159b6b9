"""One set of reading options everywhere: every entry point turns the same options into the same config."""

from __future__ import annotations

import os

import pytest

from memagent_graph import MemAgentConfig, PromptSet
from memagent_graph.errors import ConfigError
from memagent_graph.integrations import server
from memagent_graph.integrations.cli.commands import _batch_settings, _config, _in_cli_terms, _parser
from memagent_graph.reading_options import ReadingOptions

OPTIONS = {
    "chunk_tokens": 600,
    "memory_tokens": 100,
    "answer_tokens": 40,
    "temperature": 0.3,
    "top_p": 0.9,
    "prompts": "verbatim",
    "memory_policy": "generate",
    "quote_min_gain": 5.0,
    "quote_answer": "span",
    "max_attempts": 2,
}
FLAGS = [part for name, value in OPTIONS.items() for part in (f"--{name.replace('_', '-')}", str(value))]


@pytest.fixture
def no_endpoint(monkeypatch) -> pytest.MonkeyPatch:
    for name in [k for k in os.environ if k.startswith(("MEMAGENT_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_options_become_the_config_they_name():
    config = ReadingOptions(**OPTIONS).config()
    assert (config.chunk_tokens, config.memory_tokens, config.answer_tokens) == (600, 100, 40)
    assert (config.temperature, config.top_p, config.quote_min_gain) == (0.3, 0.9, 5.0)
    assert config.prompts == PromptSet.verbatim() and config.memory_policy == "generate"
    assert config.retries.max_attempts == 2


def test_given_options_win_over_defaults_and_defaults_over_the_reference():
    config = ReadingOptions(chunk_tokens=900).config({"chunk_tokens": 700, "memory_tokens": 50})
    assert (config.chunk_tokens, config.memory_tokens, config.answer_tokens) == (900, 50, 1024)


@pytest.mark.parametrize("command", ["ask", "batch", "eval", "server"])
def test_every_entry_point_builds_the_same_config_from_the_same_options(no_endpoint, command):
    if command == "server":
        for name, value in OPTIONS.items():
            no_endpoint.setenv(f"MEMAGENT_{name.upper()}", str(value))
        built = server.config_from_env()
    elif command == "batch":
        built = _batch_settings(_parser().parse_args(["batch", "in.jsonl", "out.jsonl", *FLAGS])).config()
    else:
        positional = ["doc.txt", "Who?"] if command == "ask" else ["--task", "niah_single_1"]
        built = _config(_parser().parse_args([command, *positional, *FLAGS]))
    assert built == ReadingOptions(**OPTIONS).config()


def test_the_server_reads_as_the_cli_does_on_the_embedded_engine(no_endpoint):
    cli = _config(_parser().parse_args(["ask", "doc.txt", "Who?"]))
    assert server.config_from_env() == cli
    assert (cli.memory_policy, cli.chunk_tokens) == ("quote", 2048)


def test_the_server_takes_prompts_and_memory_policy_from_its_environment(no_endpoint):
    no_endpoint.setenv("MEMAGENT_PROMPTS", "section-first")
    no_endpoint.setenv("MEMAGENT_MEMORY_POLICY", "generate")
    config = server.config_from_env()
    assert config.prompts == PromptSet.section_first() and config.memory_policy == "generate"


def test_a_bad_variable_is_named_in_the_error():
    with pytest.raises(ConfigError, match=r"MEMAGENT_TOP_P='high' is not valid"):
        ReadingOptions.from_env({"MEMAGENT_TOP_P": "high"})


def test_core_errors_name_python_settings_and_the_cli_names_its_flags():
    with pytest.raises(ConfigError) as caught:
        MemAgentConfig.build(chunk_tokens=100, memory_tokens=100)
    assert "--" not in str(caught.value) and caught.value.settings == ("memory_tokens", "chunk_tokens")
    assert "raise --chunk-tokens or lower --memory-tokens" in _in_cli_terms(caught.value)


def test_an_unknown_prompt_set_names_the_bundled_ones():
    with pytest.raises(ConfigError, match="choose from default, section-first, verbatim"):
        ReadingOptions(prompts="terse").config()


@pytest.mark.engine
@pytest.mark.slow
def test_the_server_graph_on_the_embedded_engine_reads_with_quote(no_endpoint, tmp_path):
    (tmp_path / "minutes.txt").write_text(
        "Minutes of the harbour board. The special magic number is 4711. The meeting closed at noon.\n"
    )
    no_endpoint.setenv("MEMAGENT_DOCUMENTS_DIR", str(tmp_path))
    graph = server.build_graph()
    question = {"question": "What is the special magic number?", "doc_id": "minutes.txt"}
    updates = [step for step in graph.stream(question, stream_mode="updates") if "update_memory" in step]
    assert [step["update_memory"]["last_step"]["finish_reason"] for step in updates] == ["quote"]
    assert "4711" in updates[-1]["update_memory"]["memory"]


def test_the_trainer_reads_with_the_options_its_config_names():
    from memagent_graph.training.rl.config import RLConfig

    budgets = {"chunk_tokens": 600, "memory_tokens": 100, "answer_tokens": 40, "temperature": 0.3}
    trainer = RLConfig(**budgets, prompts="verbatim").reading()
    assert trainer == ReadingOptions(**budgets, prompts="verbatim", top_p=1.0, max_attempts=1).config()
