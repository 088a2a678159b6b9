"""Reinforcement learning from verifiable rewards.

`algorithms` (GRPO/Dr.GRPO/DAPO advantages and losses, pure torch), `learner` (the torch learner and its
config), `trainer` (`RLConfig`, `Trainer`: the loop, checkpoints, warm start), `tiny_policy` (a tiny local
Qwen2 and its tokenizer).
"""
