"""Training the memory policy: verifiable rewards (`rewards`) and the RL objectives (`algorithms`, pure torch).

The recording policy, rollout/learner backends and the Ray trainer loop are not built yet (issue 5).
Import the submodules directly; nothing here imports torch until `algorithms` is imported.
"""
