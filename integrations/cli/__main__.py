"""``python -m memagent_graph.integrations.cli`` runs the `memagent` command."""

from memagent_graph.integrations.cli.commands import main

raise SystemExit(main())
