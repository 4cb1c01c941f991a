"""One backend-argument builder for the LLM commands (``mascot trials``, ``mascot deliberate``,
``mascot debate``): the same flags, names and defaults, and the same errors, everywhere.

    add_backend_args(parser)                          --backend, --model, vllm / openai / hf options,
                                                      --temperature (alias --temp), --top-p, --max-tokens, --seed
    check_sampling_args(args)                         flag-named errors for the sampling values given
    build_backend(args, surrogate_factory, flags)     (backend or factory, identity spec)

A real backend comes back as a zero-argument factory (a finished run never loads a model) with its
identity spec, ``run_spec(identity_of(name, **options))`` (:mod:`mascot.backends`); the protocol's surrogate
comes back constructed (it is cheap, and constructing it validates its options) with spec ``None``: the
harness takes the spec from the instance. A flag given for a backend it does not apply to is an error
that names the flag and the backends it is for.

Checked before anything is written: an hf ``--model`` must be a loadable local directory
(:func:`mascot.backends.hf.check_model_dir`: config.json, tokenizer files, weights), so a wrong path never
leaves a run directory behind. The openai backend probes its server once per run (:mod:`mascot.backends.probe`)
unless ``--no-probe``. ``--surrogate-params FILE`` builds the surrogate with its class's
``from_params(FILE, **overrides)``: the file replaces the config's surrogate options; the command's own
surrogate flags and the surrogate's seed override the file.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from mascot.errors import InputError
from mascot.limits import INT64_MAX

__all__ = ["BACKENDS", "DEFAULT_VLLM_MODEL", "add_backend_args", "build_backend", "check_sampling_args"]

BACKENDS = ("surrogate", "vllm", "openai", "hf")
#: The model of the SR paper's runs (and the vllm default when --model is not given).
DEFAULT_VLLM_MODEL = "Qwen/Qwen2.5-7B-Instruct"

# dest (= the backend constructor's parameter) -> (flag, backends it applies to)
_OPTIONS = {
    "enforce_eager": ("--enforce-eager", ("vllm",)),
    "gpu_memory_utilization": ("--gpu-memory-utilization", ("vllm",)),
    "max_model_len": ("--max-model-len", ("vllm",)),
    "base_url": ("--base-url", ("openai",)),
    "api_key_env": ("--api-key-env", ("openai",)),
    "concurrency": ("--concurrency", ("openai",)),
    "timeout_s": ("--timeout", ("openai",)),
    "max_retries": ("--max-retries", ("openai",)),
    "budget_s": ("--request-budget", ("openai",)),
    "device": ("--device", ("hf",)),
    "batch_size": ("--batch-size", ("hf",)),
    "dtype": ("--dtype", ("vllm", "hf")),
}
_SAMPLING_HELP = {
    "temperature": "sampling temperature",
    "top_p": "nucleus sampling top_p",
    "max_tokens": "completion token limit per reply",
    "seed": "run seed: every request's sampling seed derives from it (and the surrogate's noise)",
}


def _given(v) -> bool:
    """A backend option the user gave: anything but None (not given) and False (a store_true flag left off).
    ``v is not False``, not ``v not in (None, False)``: ``0 == False``, and ``--max-retries 0`` is a value."""
    return v is not None and v is not False


def add_backend_args(
    parser: argparse.ArgumentParser, sampling_defaults: Mapping | None = None, *, surrogate_params: bool = True
) -> None:
    """Add the backend and sampling flags to ``parser``.

    ``sampling_defaults``: the command's defaults for ``temperature``, ``top_p``, ``max_tokens`` and
    ``seed`` (shown in the help); a value left out defaults to ``None`` (the command's config decides).
    Backend options default to ``None`` (the backend's own default), so that a flag given for the wrong
    backend is recognised by :func:`build_backend`. ``surrogate_params``: add ``--surrogate-params FILE``.
    """
    sd = dict(sampling_defaults or {})

    def dflt(key: str) -> str:
        return f" (default {sd[key]})" if sd.get(key) is not None else " (default: the config's)"

    g = parser.add_argument_group("backend")
    g.add_argument(
        "--backend",
        default="surrogate",
        choices=BACKENDS,
        help="agent backend (default surrogate: the protocol's simulated agents, on CPU without a model)",
    )
    g.add_argument(
        "--model",
        help=f"model: HF hub id or local directory (vllm; default {DEFAULT_VLLM_MODEL}), "
        "server model name (openai), local model directory (hf)",
    )
    g.add_argument(
        "--temperature",
        type=float,
        default=sd.get("temperature"),
        help=_SAMPLING_HELP["temperature"] + dflt("temperature") + "; alias --temp",
    )
    g.add_argument("--temp", dest="temperature", type=float, default=sd.get("temperature"), help=argparse.SUPPRESS)
    g.add_argument("--top-p", type=float, default=sd.get("top_p"), help=_SAMPLING_HELP["top_p"] + dflt("top_p"))
    g.add_argument(
        "--max-tokens", type=int, default=sd.get("max_tokens"), help=_SAMPLING_HELP["max_tokens"] + dflt("max_tokens")
    )
    g.add_argument("--seed", type=int, default=sd.get("seed"), help=_SAMPLING_HELP["seed"] + dflt("seed"))

    g = parser.add_argument_group("vllm")
    g.add_argument(
        "--enforce-eager",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="disable CUDA graphs (faster start; default off)",
    )
    g.add_argument("--gpu-memory-utilization", type=float, help="fraction of GPU memory vLLM may take (default 0.9)")
    g.add_argument("--max-model-len", type=int, help="context length cap (default: the model's)")
    g.add_argument("--dtype", help="vllm/hf: weights dtype, e.g. auto, float32, float16, bfloat16 (default auto)")

    g = parser.add_argument_group("openai")
    g.add_argument(
        "--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vllm serve; the default)"
    )
    g.add_argument("--api-key-env", help="environment variable holding the API key (default OPENAI_API_KEY)")
    g.add_argument("--concurrency", type=int, help="requests in flight (default 8)")
    g.add_argument("--timeout", dest="timeout_s", type=float, help="per-request timeout in seconds (default 120)")
    g.add_argument("--max-retries", type=int, help="HTTP retries per request (default 5)")
    g.add_argument(
        "--request-budget",
        dest="budget_s",
        type=float,
        help="seconds one request may take in all, its retries, back-offs and Retry-After waits included "
        "(default timeout x (max retries + 1))",
    )
    g.add_argument(
        "--no-probe",
        action="store_true",
        default=None,
        help="do not probe the server before the first stage (the probe warns when the server ignores "
        "sampling or structured output; a few tiny requests)",
    )
    g.add_argument(
        "--probe", dest="no_probe", action="store_false", default=None, help="probe the server first (the default)"
    )

    g = parser.add_argument_group("hf")
    g.add_argument("--device", help="auto, cpu, cuda, cuda:1, ... (default auto)")
    g.add_argument("--batch-size", type=int, help="requests per generate call (default 16)")
    if surrogate_params:
        parser.add_argument_group("surrogate").add_argument(
            "--surrogate-params",
            metavar="FILE",
            help="surrogate parameter file (TOML; --backend surrogate only): replaces the config's surrogate options; "
            "the surrogate flags given override it",
        )


def check_sampling_args(args) -> None:
    """``ValueError`` naming the flag for a sampling value out of range (values left ``None`` are not checked)."""
    t, p, m, s = (getattr(args, k, None) for k in ("temperature", "top_p", "max_tokens", "seed"))
    if t is not None and not t >= 0:
        raise InputError(f"--temperature must be >= 0; got {t}")
    if p is not None and not 0 < p <= 1:
        raise InputError(f"--top-p must be in (0, 1]; got {p}")
    if m is not None and m < 1:
        raise InputError(f"--max-tokens must be >= 1; got {m}")
    if s is not None and not 0 <= s <= INT64_MAX:
        raise InputError(f"--seed must be an integer in [0, 2^63 - 1]; got {s}")


def _check_ranges(args) -> None:
    for dest, flag in (
        ("concurrency", "--concurrency"),
        ("batch_size", "--batch-size"),
        ("max_model_len", "--max-model-len"),
    ):
        v = getattr(args, dest, None)
        if v is not None and v < 1:
            raise InputError(f"{flag} must be >= 1; got {v}")
    v = getattr(args, "max_retries", None)
    if v is not None and v < 0:
        raise InputError(f"--max-retries must be >= 0; got {v}")
    for dest, flag in (("timeout_s", "--timeout"), ("budget_s", "--request-budget")):
        v = getattr(args, dest, None)
        if v is not None and not 0 < v < math.inf:
            raise InputError(f"{flag} must be > 0 seconds and finite; got {v}")
    v = getattr(args, "gpu_memory_utilization", None)
    if v is not None and not 0 < v <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1]; got {v}")


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def build_backend(
    args, surrogate_factory: Callable[[], object], surrogate_flags: Mapping[str, str] | None = None
) -> tuple[object, dict | None]:
    """``(backend or factory, identity spec)`` from the parsed flags of :func:`add_backend_args`.

    ``surrogate_factory()`` builds the protocol's surrogate (``--backend surrogate``, the default) from
    ``args``; ``surrogate_flags`` maps its constructor parameters to the command's flags (``{"sigma":
    "--sigma"}``, ``{"noise": "--surrogate-noise"}``): those flags are refused with another backend, and a
    ``ValueError`` of the constructor names the flag instead of the parameter. The surrogate comes back
    constructed with spec ``None`` (the harness takes it from the instance).

    Any other backend comes back as a factory (``make_backend(name, **options)``, called by the harness
    only when work remains) with spec ``run_spec(identity_of(name, **options))``. ``--model`` defaults to
    :data:`DEFAULT_VLLM_MODEL` for vllm and is required for openai (a model name on the server) and hf (a
    local model directory, recorded as its absolute path). ``args.structured_output`` (a protocol flag,
    where the protocol has JSON schemas) applies to vllm and openai. The vllm engine seed is ``--seed``.
    """
    from mascot.backends import identity_of, make_backend, run_spec

    name = args.backend
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    sur_flags = dict(surrogate_flags or {})
    given = [flag for flag in sur_flags.values() if getattr(args, _dest(flag), None) is not None]
    if name != "surrogate" and given:
        raise InputError(f"{', '.join(given)}: surrogate options; they do not apply to --backend {name}")
    for dest, (flag, names) in _OPTIONS.items():
        v = getattr(args, dest, None)
        if _given(v) and name not in names:
            raise InputError(f"{flag} applies to --backend {'/'.join(names)} only, not {name}")
    structured = bool(getattr(args, "structured_output", False))
    if structured and name not in ("vllm", "openai"):
        raise InputError(f"--structured-output applies to --backend vllm/openai only, not {name}")
    if getattr(args, "no_probe", None) and name != "openai":
        raise InputError(f"--no-probe applies to --backend openai only, not {name}")
    params = getattr(args, "surrogate_params", None)
    if params is not None and name != "surrogate":
        raise InputError(f"--surrogate-params applies to --backend surrogate only, not {name}")
    _check_ranges(args)

    if name == "surrogate":
        if args.model is not None:
            raise InputError("--model does not apply to --backend surrogate (it has no model)")
        try:
            backend = surrogate_factory()
        except ValueError as e:  # name the flag, not the parameter
            msg = str(e)
            for param, flag in sur_flags.items():
                if msg.startswith(param + " "):
                    msg = flag + msg[len(param) :]
                    break
            raise InputError(msg) from None
        if params is not None:
            backend = _surrogate_from_params(
                backend,
                params,
                {p: getattr(args, _dest(f)) for p, f in sur_flags.items() if getattr(args, _dest(f), None) is not None},
            )
        return backend, None

    model = args.model or (DEFAULT_VLLM_MODEL if name == "vllm" else None)
    if model is None:
        what = "a model name on the server" if name == "openai" else "a local model directory"
        raise InputError(f"--backend {name} needs --model ({what})")
    if name == "hf":
        from mascot.backends.hf import check_model_dir  # no torch import

        try:
            check_model_dir(model)
        except FileNotFoundError as e:
            raise InputError(f"--model: {e}") from None
        model = str(Path(model).resolve())
        dev = getattr(args, "device", None)
        if dev is not None and not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?|xpu(:\d+)?", str(dev)):
            raise InputError(f"--device must be auto, cpu, mps, cuda or cuda:N (xpu, xpu:N); got {dev!r}")
        if dev is not None and str(dev).startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise InputError(f"--device {dev}: torch sees no CUDA device here (use cpu or auto)")
    options: dict = {"model": model}
    for dest, (_, names) in _OPTIONS.items():
        v = getattr(args, dest, None)
        if name in names and _given(v):
            options[dest] = v
    if name == "openai":  # provenance options (not in the identity): probe the server once per run
        options["probe"] = not getattr(args, "no_probe", None)
        options["probe_structured"] = structured
    if name == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:  # refused before a run directory is written
            raise InputError(
                "--backend vllm needs vLLM, which is not installed here; on a GPU node: pip install -e "
                '".[vllm]" (or use --backend openai with a `vllm serve` endpoint)'
            )
        options["structured_output"] = structured
        if getattr(args, "seed", None) is not None:
            options["seed"] = args.seed
    if name == "openai":  # what the backend would refuse, refused before a run directory is written
        from mascot.backends.openai import check_options

        key = check_options(**options)
        env = options.get("api_key_env")
        from mascot.backends.openai_options import is_secret

        # the options' values (a config's too) against the key this backend read, whatever its variable's name
        refuse_secrets([v for v in vars(args).values() if isinstance(v, str)], [key] if is_secret(key) else [])
        if env is not None and key is None:
            raise InputError(
                "the environment variable named by --api-key-env is not set (or empty); export it, or "
                "leave --api-key-env out for a server without a key (the name is not repeated here: "
                "a key pasted in its place must not reach a log)"
            )
    if name == "hf" and options.get("dtype") is not None:
        from mascot.backends.hf import DTYPES

        if options["dtype"] not in DTYPES:
            raise InputError(f"--dtype must be one of {', '.join(DTYPES)}; got {options['dtype']!r}")
    spec = run_spec(identity_of(name, **options))
    return (lambda: make_backend(name, **options)), spec


def _surrogate_from_params(default, path: str, given: dict):
    """The surrogate built by ``type(default).from_params(path, seed=default.seed, **given)`` (the protocol's
    surrogate class; ``given``: its options set by flags); errors name ``--surrogate-params``."""
    cls = type(default)
    from_params = getattr(cls, "from_params", None)
    if from_params is None:
        raise InputError(f"--surrogate-params: this command's surrogate ({cls.__name__}) takes no parameter file")
    overrides = dict(given)
    if hasattr(default, "seed"):
        overrides.setdefault("seed", default.seed)
    try:
        return from_params(path, **overrides)
    except (ValueError, FileNotFoundError, IsADirectoryError, PermissionError) as e:
        raise InputError(f"--surrogate-params {path}: {e}") from None


# sizes refused unless --allow-large (issue 33): what a run holds in memory (n_trials 1e8 grew to 5.5 GB with
# nothing said; --runs 1e8 sat building lanes) and the requests it sends a model (time and money)
MAX_LLM_REQUESTS = 100_000
#: the most re-asks (``--retries``) and HTTP retries (``--max-retries``) a run at a model takes without
#: ``--allow-large``: each multiplies the requests a failing model or server can cost
MAX_LLM_RETRIES = 20


def check_run_size(args, held: int, held_max: int, what: str, requests: int, lower: str) -> None:
    """Refuse, unless ``args.allow_large``: ``held`` units of ``what`` past ``held_max`` (all held in memory at
    once), ``--retries`` or ``--max-retries`` past :data:`MAX_LLM_RETRIES`, or past :data:`MAX_LLM_REQUESTS`
    first-try ``requests`` to a model (``lower``: the options that shrink the run)."""
    if args.allow_large:
        return
    if held > held_max:
        raise InputError(
            f"{held:,} {what} is more than {held_max:,}, all held in memory at once; split the run (--seed, --out) "
            "or pass --allow-large"
        )
    for flag, dest in (("--retries", "retries"), ("--max-retries", "max_retries")):
        v = getattr(args, dest, None)
        if args.backend != "surrogate" and v is not None and v > MAX_LLM_RETRIES:
            what = "unparsed or unanswered request" if flag == "--retries" else "request a server fails"
            raise InputError(
                f"{flag} {v:,} is more than {MAX_LLM_RETRIES}: every {what} could be sent {v + 1:,} times; lower "
                f"{flag} or pass --allow-large"
            )
    if args.backend != "surrogate" and requests > MAX_LLM_REQUESTS:
        raise InputError(
            f"this run sends up to {requests:,} requests to a model at their first tries (more than "
            f"{MAX_LLM_REQUESTS:,}); see --dry-run for its size, lower {lower}, or pass --allow-large"
        )


# ----------------------------------------------------------------------------- secrets in messages
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)


def secret_values(argv=None) -> list[str]:
    """The values of the environment's secrets that an error message must never show: the variable that
    ``--api-key-env`` names in ``argv`` (default ``sys.argv``), and every variable whose name holds KEY, TOKEN,
    SECRET or PASSWORD, where the value looks like a secret (:func:`mascot.backends.openai_options.is_secret`)."""
    import os

    from mascot.backends.openai_options import is_secret

    argv = list(sys.argv[1:] if argv is None else argv)
    names = {n for n in os.environ if _SECRET_NAME.search(n)}
    for i, a in enumerate(argv):
        if a == "--api-key-env" and i + 1 < len(argv):
            names.add(argv[i + 1])
        elif a.startswith("--api-key-env="):
            names.add(a.split("=", 1)[1])
    return [v for v in (os.environ.get(n) for n in sorted(names)) if v and is_secret(v)]


def redact_secrets(text: str, argv=None) -> str:
    """``text`` with every value of :func:`secret_values` masked (an error echoing an argument or a config value
    that holds the API key: argparse's "invalid int value", "unknown key", "file not found")."""
    return scrub(text, secret_values(argv))


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors never show a secret (argparse echoes the value it refused:
    ``--seed <key>`` printed the key; an outside tester). Its sub-parsers are of the same class."""

    def error(self, message):
        super().error(redact_secrets(message))


def refuse_secrets(argv, secrets=None) -> None:
    """Refuse a command whose arguments, or a file among them (a config), hold the value of a secret of the
    environment (``secrets``, default :func:`secret_values`): run directories are named from them and run records
    keep them (an outside tester's key became a run directory's name and entered run.json, through --out, a
    config's name or task, a sweep override; with any backend). The message names no value."""
    from mascot.backends.openai_options import contains_key

    secrets = secret_values(argv) if secrets is None else secrets
    if not secrets:
        return
    texts = list(argv)
    for a in argv:  # files given by path, whatever their suffix (config files: a sweep.cfg passed the check)
        p = Path(a)
        try:
            if p.is_file() and p.stat().st_size <= 1 << 20:
                texts.append(p.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
    if any(contains_key(t, s) for t in texts for s in secrets):
        raise InputError(
            "an argument or a config file of this command holds the value of an environment variable that keeps an "
            "API key (neither is shown): run directories are named from them and run records keep them; give the key "
            "only in its variable"
        )


def scrub(obj, secrets=None):
    """``obj`` (JSON-like: dicts, lists, strings) with every string's secrets masked (:func:`redact_secrets` for
    records shown to a reader: a run's requests that hold the key, an outside tester's edited log, were shown
    whole by ``mascot show``). ``secrets``: :func:`secret_values` unless given; none: ``obj`` itself."""
    from mascot.backends.openai_options import redact

    secrets = secret_values() if secrets is None else secrets
    if not secrets:
        return obj
    if isinstance(obj, str):
        for s in secrets:
            obj = redact(obj, s)
        return obj
    if isinstance(obj, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(scrub(v, secrets) for v in obj)
    return obj
