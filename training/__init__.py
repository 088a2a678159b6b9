"""Training the memory policy from the graph's own traces.

`tasks` (generated verifiable tasks), `rewards` (verifiable rewards), `algorithms` (RL objectives, pure
torch), `traces` (the trace schema), `recording` (the recording policy), `rollout_backends` (the backend
protocol, transformers on CPU), `vllm_rollout` (the vLLM backend), `batching` (one generate per round of
concurrent episodes), `rollout_worker` / `worker_pool` (Ray rollout actors and weight sync), `learner` (the
torch learner), `trainer` (`RLConfig`, `Trainer`), `sft` (rejection-sampled SFT), `cli` (`memagent train`),
`tiny_policy` (a tiny local Qwen2).
Import the submodules directly: nothing here imports torch until they are.
"""
