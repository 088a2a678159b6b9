"""The RL trainer (GRPO/DAPO on the graph's own traces), task data and rewards: not built yet (issue 5)."""
