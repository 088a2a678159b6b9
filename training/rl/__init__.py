"""Reinforcement learning from verifiable rewards.

`config` (`RLConfig`, the YAML schema), `algorithms` (GRPO/Dr.GRPO/DAPO advantages and losses, pure torch),
`learner` (the `Learner` protocol, the torch learner and `LearnerConfig`), `learner_group` (the learner across
Ray ranks), `trainer` (`Trainer`: the loop, `score_calls`: credit per call), `checkpoints` (save and
exact resume), `tiny_policy` (a tiny local Qwen2 and its tokenizer).
"""
