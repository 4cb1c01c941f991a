"""transformers backend: a local model directory, batched left-padded ``model.generate`` (CPU or GPU).

Requests are grouped by their decoding parameters (``temperature``, ``top_p``, ``max_tokens``: one
``generate`` call takes one set), in order of first appearance, and each group is cut into batches of
``batch_size``. Prompts are rendered with the tokenizer's chat template
(``apply_chat_template(..., add_generation_prompt=True, tokenize=False)``) and tokenized without adding
special tokens again (the template already holds them, as vLLM does).

Decoding is exactly what the :class:`~mascot.backends.base.Sampling` asks for: greedy at temperature 0,
otherwise multinomial sampling with ``temperature`` and ``top_p`` and nothing else -- the checkpoint's own
``generation_config.json`` defaults (Qwen2.5 ships top_k = 20, repetition_penalty = 1.05) are replaced by
a neutral config at load time, so hf, vLLM (``SamplingParams``) and OpenAI-compatible runs sample the
same distribution.

Seeds: one ``generate`` call draws from one torch generator, so per-request seeds cannot all be honoured
inside one batch. Each sampled batch seeds torch (inside ``torch.random.fork_rng``, so the global RNG is
left untouched) from a hash of the seeds of all requests in that batch (``request.sampling.seed``). Runs are
therefore reproducible for the same requests, order, ``batch_size`` and device, but a request's sample
depends on its batch-mates; unlike vLLM's per-request seeds. If no request in a batch has a seed the batch
is not seeded. Greedy batches need no seed.

:meth:`HFBackend.identity` (what changes results): the model directory, ``dtype`` (None for "auto", the
checkpoint's own), ``batch_size`` and ``device`` -- the last two because they decide the torch seed of a
sampled request (above) and which generator draws from it (CPU or CUDA).

Errors: a request whose messages are malformed or that the chat template rejects, and a batch whose
``generate`` fails for a reason of its own (out of memory, a prompt longer than the model's positions, a
numerical failure in sampling: ``RuntimeError``/``ValueError``/``IndexError``), come back as responses with
``error`` set; programming errors (``TypeError``, ``AttributeError``, ``NameError``, ``KeyError``,
``NotImplementedError``, ...) propagate.

Token counts: ``prompt_tokens`` = the non-pad input ids of the row; ``completion_tokens`` = generated ids up
to and including the first end-of-sequence id (``finish_reason = "stop"``), or all ``max_tokens`` of them
when none appeared (``"length"``). ``latency_s`` is the wall time of the batch the request ran in.

The model directory is checked before anything is loaded (:func:`check_model_dir`: ``config.json``, tokenizer
files, weights), so a wrong path or an empty directory gets one message naming the path and what is missing
(the CLI checks it before a run directory is written). Progress: after each generation batch the backend
calls ``on_progress(done, total, elapsed_s, failed)`` when a harness attached one
(:func:`mascot.backends.base.attach_progress`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass

from mascot.backends.base import Request, Response, constructor_options, report_progress
from mascot.errors import BackendError, InputError, NotFoundError

__all__ = ["DTYPES", "HFBackend", "check_model_dir", "completion_lengths"]

_INSTALL_HINT = 'pip install -e ".[hf]"  (torch and transformers)'
DTYPES = ("auto", "float32", "float16", "bfloat16")


# bugs, never a problem of the request at hand (NotImplementedError and RecursionError are RuntimeErrors)
_PROGRAMMING_ERRORS = (
    TypeError,
    AttributeError,
    NameError,
    KeyError,
    AssertionError,
    ImportError,
    NotImplementedError,
    RecursionError,
)


# a tokenizer is one of these (fast tokenizers: tokenizer.json; sentencepiece: *.model; BPE: vocab.json +
# merges.txt; WordPiece: vocab.txt; tiktoken)
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.json",
    "vocab.txt",
    "tokenizer.tiktoken",
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def check_model_dir(model) -> str:
    """``model`` as a path string if it is a local model directory transformers can load without a download:
    ``config.json``, tokenizer files (one of :data:`_TOKENIZER_FILES`) and weights (``*.safetensors``,
    ``*.bin``, ...). Else ``FileNotFoundError`` naming the path and everything that is missing."""
    path = os.fspath(model)
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise NotFoundError(
            f"hf backend: the model must be a local model directory (config.json, weights, tokenizer files); "
            f"{path!r} {what} (models are never downloaded)"
        )
    names = set(os.listdir(path))
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not names & set(_TOKENIZER_FILES):
        missing.append("tokenizer files (one of " + ", ".join(_TOKENIZER_FILES) + ")")
    if not any(n.endswith(_WEIGHT_SUFFIXES) for n in names):
        missing.append("weights (*.safetensors or pytorch_model*.bin)")
    if missing:
        raise NotFoundError(
            f"hf backend: {path!r} is not a usable local model directory: missing {'; '.join(missing)}"
            + (" (the directory is empty)" if not names else "")
        )
    for name in ("config.json", "generation_config.json", "tokenizer_config.json"):
        if name in names:
            try:
                with open(os.path.join(path, name), encoding="utf-8") as fh:
                    json.load(fh)
            except (OSError, ValueError) as e:
                raise NotFoundError(f"hf backend: {os.path.join(path, name)!r} is not valid JSON ({e})") from None
    return path


def _is_request_error(e: BaseException) -> bool:
    """An error of the requests at hand: the chat template rejected the messages (jinja2's ``TemplateError``,
    ``ValueError``), or ``generate`` failed on this batch (``torch.OutOfMemoryError`` and other
    ``RuntimeError``s, ``IndexError`` for a prompt beyond the model's positions). Not a programming error."""
    if isinstance(e, _PROGRAMMING_ERRORS):
        return False
    return isinstance(e, (ValueError, IndexError, RuntimeError)) or any(
        c.__name__ == "TemplateError" for c in type(e).__mro__
    )


def _batch_seed(seeds: list[int | None]) -> int | None:
    """A 63-bit seed from all the seeds of a batch (stable across processes); None if none is set."""
    if all(s is None for s in seeds):
        return None
    digest = hashlib.sha256(repr([None if s is None else int(s) for s in seeds]).encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _check_messages(messages) -> str | None:
    """None if ``messages`` is a non-empty list of {"role": str, "content": str}; else what is wrong."""
    if not isinstance(messages, (list, tuple)) or not messages:
        return "messages must be a non-empty list of {'role': ..., 'content': ...}"
    for k, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            return f"message {k} must be a dict with string 'role' and 'content'; got {m!r:.80}"
    return None


def completion_lengths(rows: list[list[int]], eos_ids: set[int]) -> list[tuple[int, int | None, str]]:
    """For each generated row: (completion_tokens, index of the first eos or None, finish_reason).

    ``completion_tokens`` counts up to and including the first eos id; a row without one was cut by
    ``max_tokens`` (``generate`` only stops early once every row has finished) and counts in full.
    """
    out = []
    for row in rows:
        stop = next((i for i, t in enumerate(row) if t in eos_ids), None)
        if stop is None:
            out.append((len(row), None, "length"))
        else:
            out.append((stop + 1, stop, "stop"))
    return out


@dataclass(frozen=True)
class _Key:
    temperature: float
    top_p: float
    max_tokens: int


class HFBackend:
    """transformers causal LM from a LOCAL directory (``local_files_only=True``; nothing is downloaded).

    Args:
        model: path of a directory holding ``config.json``, the weights and the tokenizer files.
        device: ``"auto"`` (CUDA if available, else CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        dtype: ``"auto"`` (the checkpoint's dtype), ``"float32"``, ``"float16"`` or ``"bfloat16"``.
        batch_size: requests per ``generate`` call (>= 1).
        trust_remote_code: passed to transformers (leave False unless you trust the directory's code).
    """

    name = "hf"
    on_answer = None  # on_answer(index, response) after each batch (mascot.backends.cache)
    on_progress = (
        None  # on_progress(done, total, elapsed_s, failed) after each batch (mascot.backends.base.attach_progress)
    )

    def __init__(
        self,
        model: str,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 16,
        trust_remote_code: bool = False,
    ):
        if int(batch_size) != batch_size or batch_size < 1:
            raise InputError(f"batch_size must be an integer >= 1; got {batch_size!r}")
        if dtype not in DTYPES:
            raise InputError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
        path = check_model_dir(model)
        try:
            import torch
            import transformers
        except ImportError as e:
            raise BackendError(
                f"the hf backend needs torch and transformers ({e}); install them with: {_INSTALL_HINT}"
            ) from e

        self._torch = torch
        self.model = path
        self.batch_size = int(batch_size)
        self.trust_remote_code = bool(trust_remote_code)
        self.dtype_option = dtype

        self.device_option = str(device)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)

        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(
                path, local_files_only=True, trust_remote_code=self.trust_remote_code
            )
        except Exception as e:  # a damaged or foreign file in the directory: one line naming it, not a traceback
            raise InputError(
                f"hf backend: cannot load the tokenizer in {path!r}: {type(e).__name__}: "
                f"{str(e).splitlines()[0][:300] if str(e) else ''}"
            ) from None
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            if self.tokenizer.eos_token is None:
                raise InputError(f"hf backend: the tokenizer in {path!r} has neither a pad nor an eos token")
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise InputError(f"hf backend: the tokenizer in {path!r} has no chat_template")

        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        try:
            self._lm = transformers.AutoModelForCausalLM.from_pretrained(
                path, local_files_only=True, trust_remote_code=self.trust_remote_code, dtype=torch_dtype
            )
        except Exception as e:  # damaged weights (safetensors header), a config without a model type, ...
            raise InputError(
                f"hf backend: cannot load the model in {path!r}: {type(e).__name__}: "
                f"{str(e).splitlines()[0][:300] if str(e) else ''}"
            ) from None
        self._lm.to(self.device)
        self._lm.eval()

        # End-of-sequence ids: the tokenizer's eos plus whatever the checkpoint's generation config lists
        # (Qwen2.5-Instruct: <|im_end|> and <|endoftext|>).
        ckpt_gc = self._lm.generation_config
        eos: set[int] = set()
        for src in (self.tokenizer.eos_token_id, getattr(ckpt_gc, "eos_token_id", None)):
            if src is None:
                continue
            eos.update([src] if isinstance(src, int) else list(src))
        self.eos_token_ids = sorted(eos)
        self.pad_token_id = int(self.tokenizer.pad_token_id)
        self._ignored_checkpoint_defaults = {
            k: getattr(ckpt_gc, k, None)
            for k in ("do_sample", "temperature", "top_p", "top_k", "repetition_penalty")
            if getattr(ckpt_gc, k, None) is not None
        }
        self._lm.generation_config = transformers.GenerationConfig(
            eos_token_id=self.eos_token_ids,
            pad_token_id=self.pad_token_id,
            bos_token_id=getattr(ckpt_gc, "bos_token_id", None),
        )
        self._versions = {"torch": torch.__version__, "transformers": transformers.__version__}
        self._dtype_loaded = str(next(self._lm.parameters()).dtype).replace("torch.", "")

    # -- public --------------------------------------------------------------------------------------

    def generate(self, requests: list[Request]) -> list[Response]:
        requests = list(requests)
        results: list[Response | None] = [None] * len(requests)

        prompts: dict[int, str] = {}
        for i, req in enumerate(requests):
            problem = _check_messages(req.messages)
            if problem is not None:
                results[i] = Response("", 0, 0, error=f"bad messages: {problem}", latency_s=0.0)
                continue
            try:
                prompts[i] = self.tokenizer.apply_chat_template(
                    [dict(m) for m in req.messages], add_generation_prompt=True, tokenize=False
                )
            except Exception as e:
                if not _is_request_error(e):
                    raise
                msg = f"chat template failed on these messages: {type(e).__name__}: {e}"
                results[i] = Response("", 0, 0, error=msg, latency_s=0.0)

        context = getattr(self._lm.config, "max_position_embeddings", None)
        if isinstance(context, int):  # a reply longer than the model's context is refused, not generated for
            for i in list(prompts):  # minutes (the prompt is not counted: rotary models run past it)
                if requests[i].sampling.max_tokens > context:
                    results[i] = Response(
                        "",
                        0,
                        0,
                        latency_s=0.0,
                        error=(
                            f"max_tokens = {requests[i].sampling.max_tokens} exceeds the model's context of {context} "
                            "tokens"
                        ),
                    )
                    del prompts[i]
        groups: dict[_Key, list[int]] = {}
        for i in prompts:
            s = requests[i].sampling
            groups.setdefault(_Key(float(s.temperature), float(s.top_p), int(s.max_tokens)), []).append(i)

        t0 = time.perf_counter()
        done = failed = len(requests) - len(prompts)  # refused before generation (failed: errors among done)
        for key, idx in groups.items():
            for start in range(0, len(idx), self.batch_size):
                chunk = idx[start : start + self.batch_size]
                seed = _batch_seed([requests[i].sampling.seed for i in chunk])
                try:
                    outs = self._run_batch([prompts[i] for i in chunk], key, seed)
                except Exception as e:  # e.g. out of memory: fail this batch, keep the others
                    if not _is_request_error(e):
                        raise
                    msg = f"generate failed: {type(e).__name__}: {e}"
                    outs = [Response("", 0, 0, error=msg) for _ in chunk]
                for i, r in zip(chunk, outs):
                    results[i] = r
                    if self.on_answer is not None:  # kept at once: a kill mid-call loses no answered batch
                        self.on_answer(i, r)
                done += len(chunk)
                failed += sum(bool(r.error) for r in outs)
                report_progress(self, done, len(requests), time.perf_counter() - t0, failed)
        return results  # type: ignore[return-value]

    @classmethod
    def identity_of(cls, **options) -> dict:
        """:meth:`identity` of ``HFBackend(**options)`` without loading the model."""
        o = constructor_options(cls, options)
        return {
            "backend": cls.name,
            "model": os.fspath(o["model"]),
            "dtype": None if o["dtype"] == "auto" else str(o["dtype"]),
            "batch_size": int(o["batch_size"]),
            "device": str(o["device"]),
        }

    def identity(self) -> dict:
        """The options that change results (the model, dtype, batch size and device; see the module docstring)."""
        return self.identity_of(
            model=self.model, dtype=self.dtype_option, batch_size=self.batch_size, device=self.device_option
        )

    def describe(self) -> dict:
        return {
            "backend": self.name,
            "model": self.model,
            "device": str(self.device),
            "device_option": self.device_option,
            "dtype": self._dtype_loaded,
            "dtype_option": self.dtype_option,
            "batch_size": self.batch_size,
            "trust_remote_code": self.trust_remote_code,
            "eos_token_ids": list(self.eos_token_ids),
            "pad_token_id": self.pad_token_id,
            "seed_policy": "one torch seed per batch, hashed from the seeds of all requests in the batch",
            "ignored_checkpoint_generation_defaults": dict(self._ignored_checkpoint_defaults),
            **self._versions,
        }

    def __repr__(self) -> str:
        return f"HFBackend(model={self.model!r}, device={str(self.device)!r}, batch_size={self.batch_size})"

    # -- internals -----------------------------------------------------------------------------------

    def _run_batch(self, prompts: list[str], key: _Key, seed: int | None) -> list[Response]:
        torch = self._torch
        t0 = time.perf_counter()
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        enc = {k: v.to(self.device) for k, v in enc.items()}
        gen_kwargs: dict = {"max_new_tokens": key.max_tokens, "pad_token_id": self.pad_token_id}
        if key.temperature > 0:
            gen_kwargs.update(do_sample=True, temperature=key.temperature, top_p=key.top_p, top_k=0)
        else:
            gen_kwargs.update(do_sample=False)
        sampled = key.temperature > 0 and seed is not None
        devices = []
        if sampled and self.device.type == "cuda":
            devices = [self.device.index if self.device.index is not None else torch.cuda.current_device()]
        with torch.random.fork_rng(devices=devices, enabled=sampled), torch.inference_mode():
            if sampled:
                torch.manual_seed(seed)
            out = self._lm.generate(**enc, **gen_kwargs)
        elapsed = time.perf_counter() - t0

        n_in = enc["input_ids"].shape[1]
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        rows = out[:, n_in:].tolist()
        eos = set(self.eos_token_ids)
        responses = []
        for row, p_len, (n_tok, stop, reason) in zip(rows, prompt_lens, completion_lengths(rows, eos)):
            kept = row[:stop] if stop is not None else row
            text = self.tokenizer.decode(kept, skip_special_tokens=True)
            responses.append(Response(text, int(p_len), int(n_tok), finish_reason=reason, latency_s=elapsed))
        return responses
