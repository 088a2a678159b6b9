"""The package's public surface: a dozen documented names, and the names and module paths that moved still
import (with a warning naming their new home)."""

from __future__ import annotations

import importlib
import sys

import pytest

import memagent_graph
import memagent_graph.integrations
import memagent_graph.training


@pytest.mark.parametrize(
    "package", [memagent_graph, memagent_graph.integrations, memagent_graph.training], ids=lambda p: p.__name__
)
def test_each_package_exports_at_most_a_dozen_documented_names(package):
    assert len(package.__all__) <= 13
    for name in package.__all__:
        assert getattr(package, name).__doc__, f"{package.__name__}.{name} has no docstring"


@pytest.mark.parametrize("name", ["ChunkedDocument", "Tokenizer", "RunSettings", "recursion_limit_for"])
def test_a_moved_name_still_imports_with_a_warning_that_names_its_new_module(name):
    with pytest.warns(DeprecationWarning, match=r"import it from memagent_graph\.(documents|state|graph)"):
        moved = getattr(importlib.import_module("memagent_graph"), name)
    assert moved.__name__ == name


@pytest.mark.parametrize(
    ("old", "name"),
    [
        ("memagent_graph.integrations.local_engine", "embedded_chat_model"),
        ("memagent_graph.integrations.vllm_server", "VLLMServer"),
    ],
)
def test_an_old_module_path_imports_with_a_deprecation_warning(old, name):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match="moved: import from memagent_graph.integrations"):
        module = importlib.import_module(old)
    assert getattr(module, name).__name__ == name
