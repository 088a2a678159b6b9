"""Rollouts: the graph reads with a recording policy, and every call becomes a training row.

`traces` (the trace schema, JSONL/Parquet), `recording` (the recording chat model), `backends` (the backend
protocol and the transformers backend), `vllm_backend` (vLLM, weight reload), `batching` (one generate per
round of concurrent episodes), `worker` (the Ray rollout actor), `worker_pool` (actors, restarts, weight
sync), `weights` (what a step changes and how workers take it; LoRA wrapping).
"""
