"""Multi-agent protocols run on any backend: ``state_tracking`` (the SR paper's 12-step task on chain/star/
mesh), ``deliberation`` (the consensus paper's budgeted deliberation, Sec. V-C) and ``debate`` (the article's
voting and iterative debate). Each has its config, prompts, parsing, harness, surrogate agents and records;
``rundir`` holds what their run directories share."""

from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.protocols.MODULE after import mascot)
