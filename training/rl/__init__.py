"""Reinforcement learning from verifiable rewards.

`config` (`RLConfig`, the YAML schema), `algorithms` (GRPO/Dr.GRPO/DAPO advantages and losses, pure torch),
`learner` (the torch learner and `LearnerConfig`), `trainer` (`Trainer`: the loop), `checkpoints` (save and
exact resume), `tiny_policy` (a tiny local Qwen2 and its tokenizer).
"""
