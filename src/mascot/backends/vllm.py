"""vLLM offline-engine backend: one ``LLM.chat`` call per stage, a ``SamplingParams`` per request.

Written against vLLM 0.33: ``vllm.LLM(model, ..., seed, gpu_memory_utilization, enforce_eager,
tensor_parallel_size, max_model_len)`` (``max_model_len`` travels through ``**kwargs`` to ``EngineArgs``),
``LLM.chat(conversations, sampling_params=[...], use_tqdm=False)`` and
``SamplingParams(temperature, top_p, max_tokens, seed, structured_outputs=StructuredOutputsParams(json=...))``
with ``StructuredOutputsParams`` from ``vllm.sampling_params``. Each request's own seed
(``request.sampling.seed``) goes into its ``SamplingParams`` (vLLM keeps a generator per request, so
samples do not depend on batch-mates).

:meth:`VLLMBackend.identity` (what changes results): the model, ``dtype``, ``max_model_len``,
``structured_output`` and the engine ``seed``; memory, CUDA-graph and parallelism knobs are provenance
(:meth:`VLLMBackend.describe`).

Request construction is the pure function :func:`build_chat_call` (testable without vLLM); the engine can be
injected (``llm=``) and so can the ``SamplingParams`` factory (``sampling_params_factory=``), which is how
the tests drive the backend with a fake engine on machines without vLLM or a GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mascot.backends.base import Request, Response, constructor_options
from mascot.errors import BackendError, InputError

__all__ = ["VLLMBackend", "build_chat_call", "make_sampling_params"]

INSTALL_HINT = 'install the vllm extra on a GPU node: pip install -e ".[vllm]"'


def build_chat_call(requests: list[Request], structured_output: bool) -> tuple[list[list[dict]], list[dict]]:
    """The arguments of one batched ``LLM.chat`` call, as plain data.

    Returns ``(conversations, params_kwargs)``: one OpenAI-format message list per request, and per request
    the keyword arguments of its ``SamplingParams``: ``temperature``, ``top_p``, ``max_tokens``, ``seed``
    (``request.sampling.seed``; None = drawn from the engine's seed) and, when
    ``structured_output`` is on and the request carries a ``json_schema``,
    ``structured_outputs = {"json": schema}`` (the kwargs of ``StructuredOutputsParams``). With
    ``structured_output`` off, schemas are ignored and replies are parsed from free text.
    """
    conversations: list[list[dict]] = []
    params: list[dict] = []
    for req in requests:
        conversations.append([{"role": m["role"], "content": m["content"]} for m in req.messages])
        s = req.sampling
        kw: dict[str, Any] = {
            "temperature": float(s.temperature),
            "top_p": float(s.top_p),
            "max_tokens": int(s.max_tokens),
            "seed": None if s.seed is None else int(s.seed),
        }
        if structured_output and req.json_schema is not None:
            kw["structured_outputs"] = {"json": req.json_schema}
        params.append(kw)
    return conversations, params


def make_sampling_params(vllm_module=None, **kwargs):
    """``vllm.SamplingParams(**kwargs)``, turning a ``structured_outputs`` dict into ``StructuredOutputsParams``."""
    if vllm_module is None:
        import vllm as vllm_module
    from vllm.sampling_params import StructuredOutputsParams

    so = kwargs.pop("structured_outputs", None)
    if so is not None:
        kwargs["structured_outputs"] = StructuredOutputsParams(**so)
    return vllm_module.SamplingParams(**kwargs)


def _is_request_error(e: BaseException) -> bool:
    """vLLM's per-request rejections (``VLLMClientError``: validation, prompt too long) or plain ValueError."""
    return isinstance(e, (ValueError, TypeError)) or any(c.__name__ == "VLLMClientError" for c in type(e).__mro__)


def _cuda_available() -> bool | None:
    """True/False from torch when torch is importable; None when it is not (vLLM then decides)."""
    try:
        import torch
    except ImportError:
        return None
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


class VLLMBackend:
    """vLLM's offline engine (GPU). All requests of one :meth:`generate` call go to ONE ``LLM.chat``.

    Args:
        model: HF model id or local directory (Qwen/Qwen2.5-7B-Instruct in the papers).
        enforce_eager: disable CUDA graphs (faster start, slower decode).
        gpu_memory_utilization: fraction of GPU memory vLLM may take (weights + KV cache).
        max_model_len: context length cap (None: the model's own).
        dtype: weights/activations dtype (``vllm.LLM(dtype=...)``: "auto", "bfloat16", "float16", "float32";
            None: vLLM's default, "auto").
        structured_output: constrain replies to the request's ``json_schema`` (``StructuredOutputsParams``).
        seed: the engine seed (requests without a seed draw from it).
        tensor_parallel_size: GPUs per model replica.
        llm: a pre-built engine (anything with vLLM's ``chat`` signature); nothing is imported then.
        sampling_params_factory: ``f(**kwargs) -> SamplingParams``; default :func:`make_sampling_params`.
    """

    name = "vllm"

    def __init__(
        self,
        model: str = "Qwen/Qwen2.5-7B-Instruct",
        enforce_eager: bool = False,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        structured_output: bool = False,
        seed: int = 0,
        tensor_parallel_size: int = 1,
        dtype: str | None = None,
        llm: Any = None,
        sampling_params_factory: Callable[..., Any] | None = None,
    ):
        if not (0 < float(gpu_memory_utilization) <= 1):
            raise InputError(f"gpu_memory_utilization must be in (0, 1]; got {gpu_memory_utilization!r}")
        if max_model_len is not None and (int(max_model_len) != max_model_len or max_model_len < 1):
            raise InputError(f"max_model_len must be None or an integer >= 1; got {max_model_len!r}")
        if int(tensor_parallel_size) != tensor_parallel_size or tensor_parallel_size < 1:
            raise InputError(f"tensor_parallel_size must be an integer >= 1; got {tensor_parallel_size!r}")
        self.model = str(model)
        self.enforce_eager = bool(enforce_eager)
        self.gpu_memory_utilization = float(gpu_memory_utilization)
        self.max_model_len = None if max_model_len is None else int(max_model_len)
        self.structured_output = bool(structured_output)
        self.seed = int(seed)
        self.tensor_parallel_size = int(tensor_parallel_size)
        self.dtype = None if dtype is None else str(dtype)
        self.injected = llm is not None
        self._vllm_version: str | None = None

        if llm is None:
            vllm = self._import_vllm()
            self._vllm_version = getattr(vllm, "__version__", None)
            if _cuda_available() is False:
                raise BackendError(
                    "the vllm backend needs a CUDA GPU and torch sees none (torch.cuda.is_available() is False); "
                    "run on a GPU node, or use the hf / openai / surrogate backend"
                )
            engine_kwargs: dict[str, Any] = {
                "model": self.model,
                "enforce_eager": self.enforce_eager,
                "gpu_memory_utilization": self.gpu_memory_utilization,
                "seed": self.seed,
                "tensor_parallel_size": self.tensor_parallel_size,
            }
            if self.max_model_len is not None:
                engine_kwargs["max_model_len"] = self.max_model_len
            if self.dtype is not None:
                engine_kwargs["dtype"] = self.dtype
            try:
                llm = vllm.LLM(**engine_kwargs)
            except Exception as e:
                raise BackendError(
                    f"vLLM could not start model {self.model!r} ({type(e).__name__}: {e}); check that a CUDA GPU is "
                    "visible (nvidia-smi, CUDA_VISIBLE_DEVICES), that the model is available locally or downloadable, "
                    "and gpu_memory_utilization / max_model_len"
                ) from e
            if sampling_params_factory is None:
                sampling_params_factory = lambda **kw: make_sampling_params(vllm, **kw)  # noqa: E731
        elif sampling_params_factory is None:
            sampling_params_factory = make_sampling_params  # imports vllm lazily, at the first generate
        self.llm = llm
        self._make_params = sampling_params_factory

    @staticmethod
    def _import_vllm():
        try:
            import vllm
        except ImportError as e:
            raise BackendError(f"vLLM is not installed ({e}); {INSTALL_HINT}") from e
        return vllm

    # -- public --------------------------------------------------------------------------------------

    def generate(self, requests: list[Request]) -> list[Response]:
        requests = list(requests)
        if not requests:
            return []
        conversations, kwargs = build_chat_call(requests, self.structured_output)
        responses: list[Response | None] = [None] * len(requests)
        params: list[Any] = []
        ok: list[int] = []
        for i, kw in enumerate(kwargs):
            try:
                params.append(self._make_params(**kw))
                ok.append(i)
            except Exception as e:  # invalid parameters for this one request (e.g. a bad schema)
                if not _is_request_error(e):
                    raise
                responses[i] = Response("", 0, 0, error=f"invalid sampling parameters: {type(e).__name__}: {e}")
        if not ok:
            return responses  # type: ignore[return-value]
        t0 = time.perf_counter()
        try:
            outs = self._chat([conversations[i] for i in ok], params)
        except Exception as e:
            if not _is_request_error(e):
                raise BackendError(f"vLLM engine failed ({type(e).__name__}: {e})") from e
            # One request was rejected (prompt too long, bad schema, ...): vLLM aborts the whole call, so
            # rerun the requests one at a time to keep the good ones and pin the error on the bad one.
            for i, p in zip(ok, params):
                t1 = time.perf_counter()
                try:
                    (out,) = self._chat([conversations[i]], [p])
                except Exception as e1:
                    if not _is_request_error(e1):
                        raise BackendError(f"vLLM engine failed ({type(e1).__name__}: {e1})") from e1
                    responses[i] = Response(
                        "",
                        0,
                        0,
                        error=f"rejected by vLLM: {type(e1).__name__}: {e1}",
                        latency_s=time.perf_counter() - t1,
                    )
                else:
                    responses[i] = self._to_response(out, time.perf_counter() - t1)
            return responses  # type: ignore[return-value]
        elapsed = time.perf_counter() - t0
        for i, out in zip(ok, outs):
            responses[i] = self._to_response(out, elapsed)
        return responses  # type: ignore[return-value]

    def _chat(self, conversations: list, params: list) -> list:
        outs = self.llm.chat(conversations, sampling_params=params, use_tqdm=False)
        if len(outs) != len(conversations):
            raise BackendError(f"vLLM returned {len(outs)} outputs for {len(conversations)} requests")
        return outs

    @classmethod
    def identity_of(cls, **options) -> dict:
        """:meth:`identity` of ``VLLMBackend(**options)`` without starting an engine."""
        o = constructor_options(cls, options)
        return {
            "backend": cls.name,
            "model": str(o["model"]),
            "dtype": None if o["dtype"] is None else str(o["dtype"]),
            "max_model_len": None if o["max_model_len"] is None else int(o["max_model_len"]),
            "structured_output": bool(o["structured_output"]),
            "seed": int(o["seed"]),
        }

    def identity(self) -> dict:
        """The options that change results (the model, dtype, context cap, structured output, engine seed)."""
        return self.identity_of(
            model=self.model,
            dtype=self.dtype,
            max_model_len=self.max_model_len,
            structured_output=self.structured_output,
            seed=self.seed,
        )

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model": self.model,
            "vllm": self._vllm_version,
            "dtype": self.dtype,
            "enforce_eager": self.enforce_eager,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_model_len": self.max_model_len,
            "structured_output": self.structured_output,
            "seed": self.seed,
            "tensor_parallel_size": self.tensor_parallel_size,
            "injected_engine": self.injected,
        }

    def __repr__(self) -> str:
        return f"VLLMBackend(model={self.model!r}, structured_output={self.structured_output})"

    @staticmethod
    def _to_response(out: Any, elapsed: float) -> Response:
        if not getattr(out, "outputs", None):
            return Response("", 0, 0, error="vLLM returned no completion for this request", latency_s=elapsed)
        c = out.outputs[0]
        prompt_ids = getattr(out, "prompt_token_ids", None) or []
        return Response(
            text=c.text or "",
            prompt_tokens=len(prompt_ids),
            completion_tokens=len(c.token_ids or []),
            finish_reason=c.finish_reason,
            latency_s=elapsed,
        )
