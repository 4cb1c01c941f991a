"""The errors mascot raises on purpose (imports nothing of mascot).

Every error mascot raises about its input or its environment is a :class:`MascotError`, and subclasses the
builtin a caller would expect (``ValueError`` for bad input, ``FileNotFoundError`` for a missing file,
``RuntimeError`` for a run that cannot go on, ``ConnectionError`` for a server nobody runs). The command line
prints a ``MascotError`` as one line (exit 2 for bad input, 1 otherwise) and lets anything else, a bug in
mascot among them, show its traceback.

::

    MascotError
    +-- InputError (ValueError)            a value, option, file or config that cannot be used
    |   +-- ConfigError                    a config file (sweep, trials, deliberation, debate)
    |   +-- NotFoundError (FileNotFoundError)
    |   +-- RunDirError                    a run directory that is not this run's, or damaged
    +-- RunError (RuntimeError)            a run that cannot go on
        +-- MissingChunksError             a merge before every chunk is complete
        +-- DirectoryLocked                another process holds the run directory
        +-- ServiceError                   an external program or service failed
            +-- BackendError               an LLM backend failed or answered wrongly
            |   +-- BackendUnreachable (ConnectionError)
            +-- SlurmError                 sbatch or squeue failed
"""

from __future__ import annotations

__all__ = [
    "MascotError",
    "InputError",
    "ConfigError",
    "NotFoundError",
    "RunDirError",
    "RunError",
    "MissingChunksError",
    "DirectoryLocked",
    "ServiceError",
    "BackendError",
    "BackendUnreachable",
    "SlurmError",
    "exit_code",
]


class MascotError(Exception):
    """Base of every error mascot raises on purpose; its message is meant for the user, in one line."""


class InputError(MascotError, ValueError):
    """A value, option, file or config that cannot be used; the message names it and what is accepted."""


class ConfigError(InputError):
    """A config file that cannot be run; the message names the offending key."""


class NotFoundError(InputError, FileNotFoundError):
    """A file or directory that should be there and is not."""


class RunDirError(InputError):
    """A run directory that cannot be used for this run: another run's, damaged, or made by an older mascot."""


class RunError(MascotError, RuntimeError):
    """A run that cannot go on (nothing wrong with the input itself)."""


class MissingChunksError(RunError):
    """A merge or report asked for before every chunk of the run is complete."""


class DirectoryLocked(RunError):
    """Another live process holds this run directory's lock (the message names it)."""


class ServiceError(RunError):
    """An external program or service failed."""


class BackendError(ServiceError):
    """An LLM backend failed, or answered something that cannot be a result."""


class BackendUnreachable(BackendError, ConnectionError):
    """The backend's server cannot be reached."""


class SlurmError(ServiceError):
    """sbatch or squeue failed, or is not installed."""


def refuse_traced(**values) -> None:
    """Raise an :class:`InputError` naming the first of ``values`` (name -> value) that is a JAX tracer:
    ``mascot.theory``'s float64 numpy references take concrete values (inside ``jax.jit`` they said "must be a
    real number; got JitTracer", or raised JAX's TracerArrayConversionError). Checked by class name, so this
    module does not import JAX."""
    for name, value in values.items():
        if any(c.__name__ == "Tracer" for c in type(value).__mro__):
            raise InputError(
                f"{name} is traced (inside jax.jit, vmap or grad): mascot.theory's functions are float64 numpy "
                "references that take concrete values; call them outside the transformation, or use the traceable "
                "core (mascot.rollout, mascot.sr_spectra, mascot.kernels)"
            )


def exit_code(e: MascotError) -> int:
    """The command line's exit status for ``e``: 2 for bad input, 1 otherwise."""
    return 2 if isinstance(e, InputError) else 1
