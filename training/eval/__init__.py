"""`memagent eval`: MemAgent and baselines on the task suite, scored, tabulated and plotted.

`evaluation` (readers, records, summaries, results files), `baselines` (full context, truncation, BM25,
embedding retrieval), `plots`, `cli` (the subcommand's arguments and run).
"""
