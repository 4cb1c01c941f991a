"""Slurm submission: render job scripts from ``templates/`` and submit them.

For a sweep config, ``mascot slurm submit CONFIG --shards N`` submits an ``sbatch --array=0-(N-1)``
job (``cpu-array.sbatch``, or ``gpu-array.sbatch`` with ``--gpus``) whose task ``i`` runs
``mascot run CONFIG --shard i/N`` (requeue-safe: a restarted task resumes from the chunks on disk),
then a merge job (``merge.sbatch``) with ``--dependency=afterok:<array job>``.

For a trials config (a ``[trials]`` table, see ``mascot.cli.trials_config``) it submits one
requeue-safe job (``trials.sbatch``) running ``mascot trials --config CONFIG``: every stage of a step
is one batched backend call over all trials, so one GPU serves the whole run, and a requeued job
resumes from its committed steps. ``--dry-run`` prints the script(s).

Every value that enters a script is either checked against a safe character set (``#SBATCH`` values: the
job name, time, partition, memory; a refusal names the option) or ``shlex.quote``d (paths and the
interpreter on command lines), so no config field or option can add a line to a script.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template

from mascot.errors import InputError, SlurmError
from mascot.sweep.config import load_config
from mascot.sweep.runner import estimate_chunk_bytes

__all__ = ["render", "submit", "wait", "Submission"]


@dataclass
class Submission:
    array_script: str  # the sweep's array job, or the trials job
    merge_script: str  # "" for trials (one job, no merge)
    array_job: str | None = None
    merge_job: str | None = None
    out: str = ""
    merged: str = ""  # the sweep's merged dataset, or the trials' table2.csv
    kind: str = "sweep"


_SBATCH_VALUE = re.compile(r"^[A-Za-z0-9._:,+=@%/-]+$")


def _sbatch_value(option: str, value) -> str:
    """``value`` for an ``#SBATCH`` line (not shell-parsed, so it cannot be quoted): a safe character set only."""
    text = str(value)
    if not _SBATCH_VALUE.fullmatch(text):
        raise InputError(
            f"{option} {text!r} has characters an #SBATCH line cannot carry; use letters, digits "
            "and . _ : , + = @ % / -"
        )
    return text


def _log_dir(outp: Path) -> str:
    logs = str(outp / "slurm")
    if any(c.isspace() or not c.isprintable() for c in logs):
        raise InputError(
            f"the run directory {str(outp)!r} contains whitespace or control characters, which #SBATCH --output "
            "cannot carry"
        )
    if '"' in logs or "'" in logs:  # sbatch parses quotes in #SBATCH lines ('Unmatched "' at submission)
        raise InputError(
            f"the run directory {outp} contains a quote, which an #SBATCH --output line cannot carry (sbatch "
            "would refuse the script); choose another --out"
        )
    if "%" in logs or "\\" in logs:  # Slurm expands %j, %A, ... and backslash escapes in --output paths
        raise InputError(
            f"the run directory {outp} contains '%' or a backslash, which Slurm would expand in "
            "#SBATCH --output (logs would go elsewhere); choose another --out"
        )
    return logs


def _sbatch_lines(partition, mem) -> dict:
    return dict(
        partition_line=f"#SBATCH --partition={_sbatch_value('--partition', partition)}\n" if partition else "",
        mem_line=f"#SBATCH --mem={_sbatch_value('--mem', mem)}\n",
    )


def _template(name: str) -> Template:
    return Template(resources.files("mascot.cli").joinpath("templates", name).read_text())


def _trials_defaults(table: dict) -> tuple[int, int, str]:
    """(gpus, cpus, mem) a trials job needs by default: one GPU for vLLM (and hf on cuda)."""
    backend = table.get("backend", "surrogate")
    gpu = backend == "vllm" or (backend == "hf" and str(table.get("device", "")).startswith("cuda"))
    return (1, 8, "64G") if gpu else (0, 2, "8G")


def render_trials(
    config: str,
    out: str | None = None,
    partition: str | None = None,
    time: str = "04:00:00",
    gpus: int | None = None,
    cpus: int | None = None,
    mem: str | None = None,
) -> Submission:
    """The trials job script for a trials config (``mascot trials --config CONFIG``)."""
    from mascot.cli.trials_config import load_trials_config

    table = load_trials_config(config)
    d_gpus, d_cpus, d_mem = _trials_defaults(table)
    gpus, cpus, mem = (d_gpus if gpus is None else gpus), (d_cpus if cpus is None else cpus), mem or d_mem
    if gpus < 0 or cpus < 1:
        raise InputError("--gpus must be >= 0 and --cpus >= 1")
    if table.get("backend") == "vllm" and gpus == 0:
        raise InputError("the vllm backend needs a GPU: --gpus 1 (or more)")
    outp = Path(out or table.get("out") or f"runs/trials-{table.get('backend', 'surrogate')}").resolve()
    logs = _log_dir(outp)
    q = shlex.quote
    job = re.sub(r"[^A-Za-z0-9._-]", "_", outp.name if "trials" in outp.name else f"trials-{outp.name}")
    fields = dict(
        name=job,
        cpus=int(cpus),
        time=_sbatch_value("--time", time),
        logs=logs,
        workdir=q(str(Path.cwd())),
        python=q(sys.executable),
        config=q(str(Path(config).resolve())),
        out=q(str(outp)),
        gres_line=f"#SBATCH --gres=gpu:{int(gpus)}\n" if gpus else "",
        **_sbatch_lines(partition, mem),
    )
    script = _template("trials.sbatch").substitute(fields)
    return Submission(script, "", out=str(outp), merged=str(outp / "table2.csv"), kind="trials")


def render(
    config: str,
    shards: int | None = None,
    out: str | None = None,
    partition: str | None = None,
    time: str = "04:00:00",
    gpus: int | None = None,
    cpus: int | None = None,
    mem: str | None = None,
    array_job: str = "<ARRAY_JOB_ID>",
    overrides=(),
) -> Submission:
    """Job scripts for ``config``: a sweep's array + merge jobs, or a trials config's one job. ``overrides``: a
    sweep config's command-line ``KEY=VALUE`` items (:mod:`mascot.sweep.overrides`), checked here and passed
    to every array task, each quoted for the shell."""
    from mascot.cli.trials_config import is_trials_config

    if is_trials_config(config):
        if overrides:
            raise InputError("KEY=VALUE overrides apply to sweep configs; a trials config takes its options as flags")
        if shards not in (None, 1):
            raise InputError(
                "a trials config runs as one job (every stage is one batched call over all trials); drop --shards"
            )
        return render_trials(config, out, partition, time, gpus, cpus, mem)
    if shards is None:
        raise InputError("--shards is required for a sweep config (array size N; task i runs --shard i/N)")
    gpus = 0 if gpus is None else gpus
    cpus = 2 if cpus is None else cpus
    if int(shards) != shards or shards < 1:
        raise InputError(f"--shards must be a positive integer; got {shards!r}")
    if gpus < 0 or cpus < 1:
        raise InputError("--gpus must be >= 0 and --cpus >= 1")
    cfg = load_config(config, overrides)
    if shards > cfg.n_chunks:
        raise InputError(f"--shards {shards} exceeds the {cfg.n_chunks} chunks of {config}; use at most {cfg.n_chunks}")
    outp = Path(out or cfg.output_dir or f"runs/{cfg.name}").resolve()
    logs = _log_dir(outp)
    merged = outp / "merged.parquet"
    if mem is None:  # working memory estimate of a chunk, with headroom for JAX and the interpreter
        mem = f"{max(2048, int(3 * estimate_chunk_bytes(cfg) / 2**20) + 1024)}M"
    q = shlex.quote
    fields = dict(
        name=_sbatch_value("experiment.name", cfg.name),
        last=int(shards) - 1,
        shards=int(shards),
        cpus=int(cpus),
        time=_sbatch_value("--time", time),
        gpus=int(gpus),
        logs=logs,
        workdir=q(str(Path.cwd())),
        python=q(sys.executable),
        config=q(str(Path(config).resolve())),
        overrides="".join(" " + q(o) for o in overrides),
        out=q(str(outp)),
        merged=q(str(merged)),
        array_job=array_job if array_job == "<ARRAY_JOB_ID>" else _sbatch_value("array job id", array_job),
        SLURM_ARRAY_TASK_ID="${SLURM_ARRAY_TASK_ID}",
        **_sbatch_lines(partition, mem),
    )
    array = _template("gpu-array.sbatch" if gpus else "cpu-array.sbatch").substitute(fields)
    merge = _template("merge.sbatch").substitute(fields)
    return Submission(array, merge, out=str(outp), merged=str(merged))


def _sbatch(script: str, extra=()) -> str:
    exe = shutil.which("sbatch")
    if exe is None:
        raise SlurmError(
            "sbatch not found: Slurm is not installed here (try `--dry-run`, or "
            "slurm/local-cluster.sh to start a single-node cluster)"
        )
    res = subprocess.run([exe, "--parsable", *extra], input=script, capture_output=True, text=True)
    if res.returncode != 0:
        raise SlurmError(f"sbatch failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout.strip().split(";")[0]


def submit(config: str, shards: int | None = None, dry_run: bool = False, **kw) -> Submission:
    sub = render(config, shards, **kw)
    if dry_run:
        return sub
    if sub.kind == "sweep":  # an --out holding another run (another config or chunk size) is refused now, not
        # by every array task once the jobs start (the merge job then waited forever on a failed dependency)
        from mascot.sweep.store import RunDir

        run = RunDir(sub.out)
        Path(sub.out).mkdir(parents=True, exist_ok=True)
        if run.plan_file().is_file():
            run.plan()  # (a damaged or older plan is refused as `mascot run` refuses it)
        run.init(load_config(config, kw.get("overrides", ())))
    Path(sub.out, "slurm").mkdir(parents=True, exist_ok=True)
    sub.array_job = _sbatch(sub.array_script)
    if sub.kind == "trials":
        return sub
    sub.merge_script = render(config, shards, array_job=sub.array_job, **kw).merge_script
    sub.merge_job = _sbatch(sub.merge_script)
    return sub


def wait(job_ids, timeout: float = 3600.0, poll: float = 1.0) -> None:
    """Block until none of ``job_ids`` is in ``squeue`` any more (finished, failed or cancelled)."""
    import time

    exe = shutil.which("squeue")
    if exe is None:
        raise SlurmError("squeue not found")
    deadline = time.monotonic() + timeout
    ids = ",".join(j for j in job_ids if j)
    while time.monotonic() < deadline:
        res = subprocess.run([exe, "-h", "-j", ids], capture_output=True, text=True)
        if res.returncode == 0 and not res.stdout.strip():
            return
        time.sleep(poll)
    raise TimeoutError(f"Slurm jobs {ids} still queued or running after {timeout:.0f} s")
