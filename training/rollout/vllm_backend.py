"""The vLLM rollout backend: a vLLM engine (``vllm.LLM``) sampling from token ids, for GPU training runs.

Same contract as `TransformersRollout` (`backends.RolloutBackend`): prompts go in as token ids, responses
come back as token ids with the log-probability of each sampled token under the sampling distribution —
vLLM's ``logprobs_mode="processed_logprobs"`` (after temperature; top-p and top-k are off), which is what the
learner computes. Every request carries its own seed (from the backend seed, the call count and its place in
the batch), so a run samples the same tokens again whatever else shares the batch.

Weight sync: the learner's weights, under their Hugging Face names and as safetensors bytes, go to every vLLM
worker through ``collective_rpc`` into `WeightLoader` (vLLM's ``worker_extension_cls`` hook), which reloads
them in place (``reload_weights``: mapped onto vLLM's fused layers, repacked for its kernels); then the prefix
cache is reset, since cached keys and values were computed by the old weights. (At the scale of a GPU
cluster, vLLM's NCCL weight transfer would carry the payload instead; the contract stays the same.)

vLLM reads its CPU settings from the environment (`integrations.models.vllm_environment.vllm_cpu_settings`); on
this project's CPU machines vLLM lives in its own virtual environment (`memagent vllm setup`), and the Ray
rollout workers run from there (`WorkerPool`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memagent_graph.errors import ConfigError
from memagent_graph.training.rollout.backends import ChatTokens, Generation, Sampling

WORKER_EXTENSION = "memagent_graph.training.rollout.vllm_backend.WeightLoader"


class WeightLoader:
    """Mixed into every vLLM worker by ``worker_extension_cls``: loads weights into the running model."""

    model_runner: Any

    def load_policy_weights(self, payload: bytes) -> int:
        """Load safetensors ``payload`` bytes (Hugging Face names); returns how many tensors arrived."""
        from safetensors.torch import load

        weights = load(payload)
        # vLLM's in-place reload: the model's own load_weights would miss layers whose weights were repacked for
        # the CPU or GPU kernels after the first load (their parameters lose their loaders)
        self.model_runner.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
        from vllm.platforms import current_platform

        head = getattr(self.model_runner.model, "lm_head", None)
        if current_platform.is_cpu() and head is not None and "lm_head.weight" not in weights:
            # an output layer tied to the embeddings gets no weights of its own, so the reload skips it; on CPUs
            # it keeps a copy packed for the GEMM kernel from the old embeddings: pack the new ones
            head.quant_method.process_weights_after_loading(head)
        return len(weights)


class VLLMRollout(ChatTokens):
    """A vLLM engine as the rollout backend (see module doc); ``engine_options`` go to ``vllm.LLM``."""

    def __init__(self, model: str | Path, *, seed: int = 0, **engine_options: Any) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise ConfigError(
                "the vLLM rollout backend needs vLLM in this environment (`pip install vllm` on GPU machines), "
                "or Ray rollout workers (`ray: true`) that run from `memagent vllm setup`'s environment"
            ) from None
        self.llm = LLM(
            model=str(model),
            seed=seed,
            logprobs_mode="processed_logprobs",
            enable_prefix_caching=True,
            worker_extension_cls=WORKER_EXTENSION,
            **engine_options,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.policy_version = 0
        self.sampled_calls = 0
        self._seed = seed

    def generate(self, prompts: Sequence[list[int]], sampling: Sampling) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        call, self.sampled_calls = self.sampled_calls, self.sampled_calls + 1
        params = [
            SamplingParams(
                max_tokens=sampling.max_tokens,
                temperature=max(sampling.temperature, 0.0),
                top_p=1.0,
                top_k=0,
                logprobs=0,
                seed=hash((self._seed, call, index)) & 0x7FFF_FFFF_FFFF_FFFF,
            )
            for index in range(len(prompts))
        ]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], params, use_tqdm=False)
        results = []
        for output in outputs:
            [completion] = output.outputs
            ids = list(completion.token_ids)
            logprobs = [position[token].logprob for token, position in zip(ids, completion.logprobs, strict=True)]
            results.append(Generation(ids, logprobs, completion.finish_reason or "length"))
        return results

    def load_weights(self, weights: dict[str, Any]) -> None:
        from safetensors.torch import save

        # safetensors bytes: vLLM's RPC encoding keeps bytes intact, where nested tensors lose their type
        self.llm.collective_rpc("load_policy_weights", args=(save({k: v.contiguous() for k, v in weights.items()}),))
        self.llm.reset_prefix_cache()
