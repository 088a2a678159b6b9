"""Training the memory policy from the graph's own traces.

`rewards` (verifiable rewards), `algorithms` (RL objectives, pure torch), `traces` (the trace schema),
`recording` (the recording policy over a rollout backend), `learner` (the torch learner and weight sync),
`trainer` (one in-process RL step), `tiny_policy` (a tiny local Qwen2). The Ray trainer is in progress.
Import the submodules directly: nothing here imports torch until they are.
"""
