"""`ModelOptions`: one record of the model a user named, filled by every ``memagent`` command that takes a model
(the flags' names are its fields), completed from the environment for the Ray batch workers."""

from __future__ import annotations

import dataclasses

import pytest

from memagent_graph.integrations.cli.commands import _parser
from memagent_graph.integrations.model_options import ModelOptions
from memagent_graph.integrations.ray_batch import BatchSettings

GIVEN = ModelOptions(
    base_url="http://127.0.0.1:9/v1", model="m", api_key="sk-1", tokenizer="tok", adapter="ad", model_dir="dir"
)
FLAGS = ["--base-url", GIVEN.base_url, "--model", "m", "--api-key", "sk-1", "--tokenizer", "tok"]
FLAGS += ["--adapter", "ad", "--model-dir", "dir"]
COMMANDS = {
    "ask": ["ask", "doc.txt", "q"],
    "demo": ["demo"],
    "batch": ["batch", "in.jsonl", "out.jsonl"],
    "eval": ["eval"],
}


@pytest.fixture
def no_endpoint_env(monkeypatch):
    for name in ("BASE_URL", "MODEL", "API_KEY"):
        for prefix in ("MEMAGENT", "OPENAI"):
            monkeypatch.delenv(f"{prefix}_{name}", raising=False)
    monkeypatch.delenv("MEMAGENT_TOKENIZER", raising=False)


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS)
def test_every_command_that_takes_a_model_fills_every_field(command):
    assert ModelOptions.from_cli_args(_parser().parse_args([*command, *FLAGS])) == GIVEN
    assert ModelOptions.from_cli_args(_parser().parse_args(command)) == ModelOptions()


def test_the_batch_settings_take_the_model_and_the_reading_options():
    settings = BatchSettings.from_cli_args(_parser().parse_args([*COMMANDS["batch"], *FLAGS, "--chunk-tokens", "300"]))
    assert ModelOptions(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(ModelOptions)}) == GIVEN
    assert settings.reading.chunk_tokens == 300


def test_the_key_never_shows_in_a_repr():
    assert "sk-1" not in repr(GIVEN) and "sk-1" not in repr(BatchSettings(api_key="sk-1"))


def test_with_env_fills_the_endpoint_from_the_environment(no_endpoint_env, monkeypatch):
    monkeypatch.setenv("MEMAGENT_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-2")
    monkeypatch.setenv("MEMAGENT_TOKENIZER", "tok")
    completed = BatchSettings(model="m").with_env()
    assert isinstance(completed, BatchSettings)
    assert (completed.base_url, completed.model, completed.api_key, completed.tokenizer) == (
        "http://127.0.0.1:9/v1", "m", "sk-2", "tok"
    )  # fmt: skip


def test_with_env_and_no_endpoint_drops_the_endpoint_fields(no_endpoint_env):
    completed = ModelOptions(model="m", api_key="sk-1", adapter="ad").with_env()
    assert completed == ModelOptions(adapter="ad")
