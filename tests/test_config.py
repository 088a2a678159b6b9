import pytest

from memagent_graph import MemAgentConfig
from memagent_graph.errors import ConfigError


def test_defaults_are_memagent_reference_settings():
    config = MemAgentConfig()
    assert (config.chunk_tokens, config.memory_tokens, config.answer_tokens) == (5000, 1024, 1024)
    assert (config.temperature, config.top_p) == (0.7, 0.95)


def test_memory_must_be_smaller_than_a_chunk():
    with pytest.raises(ConfigError, match=r"`memory_tokens` \(5000\) must be smaller than `chunk_tokens` \(5000\)"):
        MemAgentConfig.build(memory_tokens=5000)


def test_build_names_every_invalid_field():
    with pytest.raises(ConfigError) as info:
        MemAgentConfig.build(chunk_tokens=0, top_p=1.5)
    assert "chunk_tokens" in str(info.value) and "top_p" in str(info.value)


def test_build_ignores_unset_options():
    assert MemAgentConfig.build(chunk_tokens=None, memory_tokens=100).chunk_tokens == 5000


def test_run_settings_are_validated():
    from memagent_graph.state import RunSettings

    with pytest.raises(ConfigError, match="memory_tokens must be a positive"):
        RunSettings(memory_tokens=0)
    with pytest.raises(ConfigError, match="temperature"):
        RunSettings(temperature=5)
