"""A CPU rollout backend for VERL 0.9.1: pr1-eval's HF engine served as a Ray actor, synced every step.

VERL 0.9.1 has no rollout engine that runs on CPU (its HF rollout cannot be selected, PyPI's vLLM
and SGLang are CUDA builds), so the nano curriculum registers this one under the rollout name
:data:`ROLLOUT_NAME` (``actor_rollout_ref.rollout.name=pr1_cpu``). It plays the parts vLLM plays in
a GPU job, with the same contracts:

- :class:`CpuHFServer` is the server actor VERL's ``LLMServerClient.generate`` calls: token ids in,
  token ids and raw log-probs out, as ``vLLMHttpServer.generate`` returns them (the stop or EOS id
  that ended the request is the last returned id; ``max_tokens`` is clamped to the room left in
  ``prompt_length + response_length``; ``logprobs`` only when asked; ``extra_fields`` carries the
  weight version ``global_steps``). Sampling is pr1-eval's :class:`~pr1_eval.engines.hf.HFEngine`
  (temperature, top-p, top-k, per-request seed), the engine ``pr1-eval run --engine hf`` scores
  with, so there is no third sampler. Under VERL's ``rollout.full_determinism`` every request is
  seeded (:func:`request_seed`): from ``rollout.seed``, the weight version the server holds and
  VERL's request id (``det-<priority>``, a sample's place in the step's batch: prompt × sample
  index), never from the order requests arrive in, so two runs of one commit sample the same
  tokens. Without it (a GPU-like run), requests share the process's RNG in arrival order.
- :class:`CpuHFReplica` launches one server per replica under the actor name the adapter looks up.
- :class:`CpuServerAdapter` is the trainer-side ``BaseRollout``: at every weight sync VERL's
  ``ActorRolloutRefWorker.update_weights`` hands it the trainer's full parameters
  (``engine.get_per_tensor_param``); it gathers them to CPU tensors and loads them into the
  server, then stamps the server's ``global_steps`` as vLLM's adapter does. A frozen server (the
  control in the tests) is ``PR1_CPU_ROLLOUT_FROZEN=1``: the weights are received and dropped.

Loaded in every VERL process through the plugin hook (``repro.testing.verl_cpu.cpu_environment``
names this module after the platform module), never by a GPU job.

VERL symbols touched (public unless marked):

- ``verl.workers.rollout.replica.RolloutReplica``, ``RolloutReplicaRegistry.register``, ``TokenOutput``
- ``verl.workers.rollout.base.BaseRollout``; ``verl.workers.rollout.base._ROLLOUT_REGISTRY``
  (private: VERL 0.9.1 has no public way to register a trainer-side adapter)
- the server methods the replica and ``LLMServerClient`` call: ``generate``, ``wake_up``, ``sleep``,
  ``clear_kv_cache``, ``release_kv_cache``, ``resume_kv_cache``, ``abort_all_requests``,
  ``resume_generation``, ``set_global_steps``, ``start_profile``, ``stop_profile``
  (mirrored from ``vLLMHttpServer``; not a declared interface)
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from typing import Any

import ray
import torch

from pr1_eval.decoding.base import request_seed as _derived_seed
from pr1_eval.engines.base import GenerationRequest, SamplingConfig
from pr1_eval.engines.hf import HFEngine
from repro.testing.threads import fix_threads

ROLLOUT_NAME = "pr1_cpu"
FROZEN_ENV = "PR1_CPU_ROLLOUT_FROZEN"
SERVER_PREFIX = "pr1cpu_"


def _server_name(replica_rank: int, node_rank: int = 0) -> str:
    return f"{SERVER_PREFIX}server_{replica_rank}_{node_rank}"


def request_seed(rollout_seed: int, version: int, request_id: str) -> int:
    """The seed of one request: a hash of ``rollout.seed``, the weight version the server holds (one
    sync per training step, so the step) and VERL's deterministic request id. Nothing here depends
    on arrival order, so concurrent requests (the n samples of a prompt, the paths of a block) draw
    the same tokens whichever reaches the server first."""
    seed = _derived_seed(int(rollout_seed), f"v{int(version)}:{request_id}")
    assert seed is not None
    return seed


def _clamped_max_tokens(params: dict[str, Any], prompt_len: int, prompt_length: int, response_length: int,
                        max_model_len: int | None) -> int:
    """``max_tokens`` as ``vLLMHttpServer.generate`` derives it: the request's, else the room left in
    ``prompt_length + response_length``, clamped to [1, the model's room after the prompt]."""
    room = (max_model_len or prompt_length + response_length) - prompt_len
    if room < 1:
        raise ValueError(f"prompt of {prompt_len} tokens leaves no room to generate (max_model_len {max_model_len})")
    if "max_tokens" in params:
        wanted = int(params["max_tokens"])
    elif "max_new_tokens" in params:
        wanted = int(params["max_new_tokens"])
    else:
        wanted = min(response_length, prompt_length + response_length - prompt_len)
    return max(1, min(wanted, room))


class CpuHFServer:
    """The rollout server: pr1-eval's HF engine on CPU, weights replaced at every sync."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int) -> None:
        self.config = config
        self.replica_rank = replica_rank
        self.global_steps: int | None = None
        self.frozen = os.environ.get(FROZEN_ENV, "") == "1"
        self.deterministic = bool(getattr(config, "full_determinism", False))
        self.seed = int(getattr(config, "seed", 0) or 0)
        fix_threads()
        path = model_config.local_path if getattr(model_config, "local_path", None) else model_config.path
        self.engine = HFEngine(str(path), device="cpu", dtype="float32", max_batch_size=1, record_logprobs=True)
        self.syncs = 0
        self.requests = 0

    def ready(self) -> bool:
        return True

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any], request_id: str,
                       **_: Any) -> Any:
        """One request, token ids in and out (the contract of ``vLLMHttpServer.generate``)."""
        from verl.workers.rollout.replica import TokenOutput

        params = dict(sampling_params)
        prompt = [int(t) for t in prompt_ids]
        max_tokens = _clamped_max_tokens(params, len(prompt), self.config.prompt_length,
                                         self.config.response_length, getattr(self.config, "max_model_len", None))
        stops = {int(t) for t in params.get("stop_token_ids") or []}
        if not params.get("ignore_eos", False):
            stops |= self.engine.eos_token_ids  # vLLM returns the EOS that ended the request
        temperature = float(params.get("temperature", 1.0))
        top_k = int(params.get("top_k", -1) or -1)
        seed = params.get("seed")
        if seed is None and self.deterministic:
            seed = request_seed(self.seed, self.syncs, request_id)
        request = GenerationRequest(request_id=request_id, prompt_token_ids=prompt, max_new_tokens=max_tokens,
                                    stop_token_ids=tuple(sorted(stops)),
                                    seed=int(seed) if seed is not None else None)
        sampling = SamplingConfig(temperature=temperature, top_p=float(params.get("top_p", 1.0)),
                                  top_k=top_k if top_k > 0 else 0, max_new_tokens=max_tokens,
                                  seed=None if seed is None else int(seed))
        completion = self.engine.generate([request], sampling)[0][0]
        self.requests += 1
        want_logprobs = bool(params.get("logprobs"))
        return TokenOutput(token_ids=list(completion.token_ids),
                           log_probs=list(completion.logprobs or []) if want_logprobs else None,
                           stop_reason="aborted" if completion.finish_reason in ("abort", "error") else "completed",
                           extra_fields={"global_steps": self.global_steps})

    def load_weights(self, named: dict[str, torch.Tensor], global_steps: int | None) -> dict[str, Any]:
        """Replace the model's weights with the trainer's (unless frozen); report what was loaded."""
        self.syncs += 1
        if self.frozen:
            return {"loaded": 0, "frozen": True}
        model = self.engine.model
        own = model.state_dict()
        unknown = sorted(set(named) - set(own))
        if unknown:
            raise RuntimeError(f"the trainer sent weights the rollout model lacks: {unknown[:5]}")
        with torch.no_grad():
            for name, tensor in named.items():
                own[name].copy_(tensor.to(own[name].dtype))
        missing = sorted(set(own) - set(named) - self._tied_names())
        if missing:
            raise RuntimeError(f"the trainer's weights lack {missing[:5]}: the rollout would sample an old model")
        return {"loaded": len(named), "frozen": False}

    def _tied_names(self) -> set[str]:
        model = self.engine.model
        if getattr(model.config, "tie_word_embeddings", False):
            return {"lm_head.weight"}
        return set()

    def stats(self) -> dict[str, Any]:
        return {"syncs": self.syncs, "requests": self.requests, "global_steps": self.global_steps,
                "frozen": self.frozen}

    async def set_global_steps(self, global_steps: int) -> None:
        if not self.frozen:
            self.global_steps = global_steps

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def wait_for_requests_to_drain(self) -> None:
        return None

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict[str, Any]:
        return {"aborted_count": 0, "request_ids": []}

    async def abort_request(self, request_id: str, reset_prefix_cache: bool = True) -> dict[str, Any]:
        return {"aborted": False, "request_id": request_id}

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **_: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


def _replica_class() -> type:
    from verl.workers.rollout.replica import RolloutReplica

    class CpuHFReplica(RolloutReplica):
        """One :class:`CpuHFServer` per replica, named as :class:`CpuServerAdapter` looks it up."""

        async def launch_servers(self) -> None:
            name = _server_name(self.replica_rank)
            actor: Any = ray.remote(CpuHFServer)
            server = actor.options(name=name, num_cpus=0, max_concurrency=4).remote(
                config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
            await server.ready.remote()
            self.servers = [server]
            self._server_handle = server
            self._server_address = f"{name}:0"

        def rollout_worker_use_gpu(self) -> bool:
            return False

    return CpuHFReplica


def _full_cpu(tensor: torch.Tensor) -> torch.Tensor:
    """A parameter as one whole CPU tensor (an FSDP2 shard is a DTensor: gather it)."""
    full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
    return full.detach().to("cpu", copy=True)


def _adapter_class() -> type:
    from verl.workers.rollout.base import BaseRollout

    class CpuServerAdapter(BaseRollout):
        """The trainer-side rollout: forwards weight syncs to this rank's replica server."""

        def __init__(self, config: Any, model_config: Any, device_mesh: Any, replica_rank: int = -1) -> None:
            super().__init__(config, model_config, device_mesh)
            rank = int(os.environ.get("RANK", "0"))
            world = (self.config.tensor_model_parallel_size * self.config.data_parallel_size
                     * self.config.pipeline_model_parallel_size)
            self.replica_rank = rank // world if replica_rank == -1 else replica_rank
            self.has_server = rank % world == 0
            self.server_handle: Any = None

        def _server(self) -> Any:
            if self.server_handle is None:
                self.server_handle = ray.get_actor(_server_name(self.replica_rank))
            return self.server_handle

        async def resume(self, tags: list[str]) -> None:
            return None

        async def release(self) -> None:
            return None

        async def update_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                                 wire_format: str = "named_tensors", **kwargs: Any) -> None:
            """VERL passes ``global_steps`` (and LoRA fields, unused here) as keywords."""
            global_steps = kwargs.get("global_steps")
            if wire_format != "named_tensors":
                raise ValueError(f"the CPU rollout takes wire_format='named_tensors', not {wire_format!r}")
            start = time.time()
            named = {name: _full_cpu(tensor) for name, tensor in weights}  # every rank joins the gathers
            if not self.has_server:
                return
            server = self._server()
            await server.load_weights.remote(named, global_steps)
            if global_steps is not None:
                await server.set_global_steps.remote(global_steps)
            print(f"pr1_cpu rollout: weights synced ({len(named)} tensors, step {global_steps}, "
                  f"{time.time() - start:.2f}s)")

    return CpuServerAdapter


def register() -> None:
    """Make ``rollout.name=pr1_cpu`` resolvable in this process (replica and trainer-side adapter)."""
    from verl.workers.rollout import base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(ROLLOUT_NAME, _replica_class)
    base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = f"{__name__}.CpuServerAdapter"


def __getattr__(name: str) -> Any:
    """``CpuServerAdapter`` / ``CpuHFReplica`` built on first use (VERL's classes load lazily)."""
    if name == "CpuServerAdapter":
        return _adapter_class()
    if name == "CpuHFReplica":
        return _replica_class()
    raise AttributeError(name)


register()
