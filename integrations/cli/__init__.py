"""The `memagent` command line: `commands` (parser and subcommands), `progress` (the progress bar)."""

from memagent_graph.integrations.cli.commands import main

__all__ = ["main"]
