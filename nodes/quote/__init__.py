"""The quote memory policy, one policy among the registry's: the memory is sentences of the document chosen by
the model's query likelihood, and the answer is a span of them.

`memory` (the policy: candidates, update, answer) builds on `prefilter` (BM25 first stage), `scoring`
(query-likelihood gains, the gain cache, bridge terms), `selection` (what the memory keeps), `choice`
(Plackett-Luce draws at a temperature) and `answer` (span, line or copy answers).
"""
