"""Task data: verifiable questions over generated or loaded documents.

`tasks` (the `Task` record, needle tasks), `task_suite` (named task families and their train/eval splits),
`ruler_tasks` (RULER's synthetic tasks), `two_hop`, `haystacks` (offline haystack text in the reader's
tokens), `hotpotqa` (loader, synthesis, closed-book filter).
"""
