"""Supervised warm starts: teachers act out the policy, verified traces are kept, the policy imitates them.

`teachers` (`ScriptedChatModel`, the rule teacher), `oracle` (the oracle memory policy), `rejection_sampling`
(teacher traces, rejection sampling, fine-tuning), `warm_start` (the warm start before RL and its settings).
"""
