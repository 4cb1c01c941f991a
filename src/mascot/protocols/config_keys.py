"""The keys of the protocol config files (``mascot deliberate FILE``, ``mascot debate FILE``), one row per
key with its type, default, allowed values and meaning: what ``mascot params deliberate|debate`` prints and the
documentation's configuration page shows. Defaults are read from the config dataclasses, and
``tests/test_params.py`` checks that these rows name exactly the keys the loaders accept, so neither can drift."""

from __future__ import annotations

import inspect
from dataclasses import fields

__all__ = ["deliberation_rows", "debate_rows"]


def _row(key, type_, default, range_, meaning):
    return dict(key=key, type=type_, default=default, range=range_, unit="", meaning=meaning, simulated_by="")


def _defaults(cls):
    """Field values of the dataclass's default instance (factories called)."""
    inst = cls()
    return {f.name: getattr(inst, f.name) for f in fields(cls)}


def _init_defaults(cls) -> dict:
    """Keyword defaults of ``cls``'s constructor (a surrogate backend's options)."""
    return {k: v.default for k, v in inspect.signature(cls.__init__).parameters.items()}


def _sampling_rows(s) -> list[dict]:
    """The ``[sampling]`` table's keys (both protocols), with the config's default decoding parameters ``s``."""
    return [
        _row("sampling.temperature", "float", s.temperature, ">= 0", "decoding temperature"),
        _row("sampling.top_p", "float", s.top_p, "(0, 1]", "nucleus sampling"),
        _row("sampling.max_tokens", "int", s.max_tokens, ">= 1", "reply limit in tokens"),
        _row("sampling.seed", "int", s.seed, "", "a base seed for backends that honour one"),
    ]


def deliberation_rows() -> list[dict]:
    from mascot.protocols.deliberation.config import DeliberationConfig, MonitorConfig
    from mascot.protocols.deliberation.surrogate import SurrogateDeliberationBackend

    d = _defaults(DeliberationConfig)
    m = _defaults(MonitorConfig)
    sur = _init_defaults(SurrogateDeliberationBackend)
    return [
        _row("name", "str", d["name"], "", "the study's name (recorded with the run)"),
        _row(
            "task",
            "str",
            "(the paper's app-architecture task)",
            "non-empty",
            "the project the agents plan; required in a file of one's own",
        ),
        _row(
            "roles",
            "array of tables",
            "(the paper's five roles)",
            "unique names",
            "the agents' roles: [[roles]] with name, prompt (required), title, bias, prior; required in a file of one's own",
        ),
        _row("roles[].name", "str", "-", "unique", "the role's key"),
        _row("roles[].prompt", "str", "-", "", "the role sentence opening its system prompt"),
        _row("roles[].title", "str", "the name", "", "how prompts call the agent"),
        _row("roles[].bias", "str", "", "", "a short description of its leaning (recorded, not prompted)"),
        _row(
            "roles[].prior",
            "list of float",
            "none",
            "one per axis, in [0, 1]",
            "the role's typical vector (the surrogate's start; the fallback when round 0 does not parse)",
        ),
        _row(
            "axes",
            "array of tables or strings",
            "(the paper's six axes)",
            "unique names",
            "the preference axes: [[axes]] with name, low, high (or a list of names)",
        ),
        _row("axes[].name", "str", "-", "unique", "the axis"),
        _row("axes[].low", "str", "low", "", "what 0 means on it"),
        _row("axes[].high", "str", "high", "", "what 1 means on it"),
        _row("n_agents", "int", "one per role", ">= 2", "agents (roles cycle when there are more agents than roles)"),
        _row(
            "weights.complete_self",
            "float",
            d["complete_self"],
            "[0, 1]",
            "the complete graph's self-weight (Table III generalised to N)",
        ),
        _row("weights.ring_self", "float", d["ring_self"], "[0, 1]", "the ring's self-weight"),
        _row(
            "weights.W1",
            "matrix",
            "complete_weights(N, complete_self)",
            "doubly stochastic N x N",
            "mode 1's weight matrix, given in full",
        ),
        _row(
            "weights.W2",
            "matrix",
            "ring_weights(N, ring_self)",
            "doubly stochastic N x N",
            "mode 2's weight matrix, given in full",
        ),
        _row("strategies", "list of str", ", ".join(d["strategies"]), "adaptive, complete, ring", "the policies run"),
        _row(
            "eta",
            "float",
            d["eta"],
            ">= eps when adaptive runs",
            "the switching threshold on D (read by adaptive only)",
        ),
        _row("eps", "float", d["eps"], "> 0", "the consensus tolerance: stop when D <= eps"),
        _row("b0", "float", d["b0"], ">= 0", "the token budget of a run"),
        _row("max_rounds", "int", d["max_rounds"], ">= 1", "rounds before a run stops unfinished"),
        _row(
            "budget_rule",
            "str",
            d["budget_rule"],
            "spent, predicted",
            "spent: stop once the tokens spent exceed b0; predicted: refuse a round the remaining budget cannot pay",
        ),
        _row("retries", "int", d["retries"], ">= 0", "re-asks of an agent whose reply did not parse"),
        _row("runs", "int", d["runs"], ">= 1", "independent runs per strategy"),
        _row("seed", "int", d["seed"], "0 .. 2^63 - 1", "the run's seed"),
        _row("charge_initial", "bool", d["charge_initial"], "", "count round 0's tokens against the budget"),
        _row("shared_initial", "bool", d["shared_initial"], "", "every strategy starts from the same round-0 replies"),
        _row("token_scale", "float", d["token_scale"], "> 0", "a factor on counted tokens (a model's price ratio)"),
        _row("structured_output", "bool", d["structured_output"], "", "ask the backend for JSON-schema output"),
        _row(
            "x0",
            "matrix",
            "none",
            "N rows of one value per axis, in [0, 1]",
            "fixed initial vectors instead of asking in round 0",
        ),
        *_sampling_rows(d["sampling"]),
        _row("monitor.enabled", "bool", m["enabled"], "", "stop a lane when the online certificate check fails"),
        _row("monitor.n0", "float", m["n0"], ">= 0", "the prior's weight in pseudo-rounds"),
        _row("monitor.warmup", "int", m["warmup"], ">= 0", "no monitor stop before this round"),
        _row(
            "monitor.ceil",
            "bool",
            m["ceil"],
            "",
            "check Theorem 1's B* (true) or the fractional point estimate (false)",
        ),
        _row("monitor.prior_lambda1", "float", "lambda(W1)", "(0, 1]", "prior contraction rate of mode 1"),
        _row("monitor.prior_lambda2", "float", "lambda(W2)", "(0, 1]", "prior contraction rate of mode 2"),
        _row("surrogate.noise", "float", sur["noise"], ">= 0", "surrogate agents: per-round noise s.d."),
        _row(
            "surrogate.compliance",
            "float",
            sur["compliance"],
            "[0, 1]",
            "surrogate agents: how far each moves toward the weighted average",
        ),
        _row(
            "surrogate.initial_spread",
            "float",
            sur["initial_spread"],
            ">= 0",
            "surrogate agents: spread around the role prior in round 0",
        ),
        _row(
            "surrogate.malformed",
            "float",
            sur["malformed"],
            "[0, 1]",
            "surrogate agents: probability of an unusable reply",
        ),
        _row(
            "surrogate.reasoning_words",
            "int",
            sur["reasoning_words"],
            ">= 0",
            "surrogate agents: words of reasoning per reply",
        ),
        _row(
            "surrogate.fenced",
            "float",
            sur["fenced"],
            "[0, 1]",
            "surrogate agents: probability of a fenced JSON reply after a preamble",
        ),
        _row("surrogate.seed", "int", sur["seed"], ">= 0", "surrogate agents: seed mixed into every request's"),
    ]


def debate_rows() -> list[dict]:
    from mascot.protocols.debate.config import DebateConfig
    from mascot.protocols.debate.surrogate import SurrogateDebateBackend

    d = _defaults(DebateConfig)
    sur = _init_defaults(SurrogateDebateBackend)
    return [
        _row("name", "str", d["name"], "", "the study's name (recorded with the run)"),
        _row("task", "str", "(the article's code-review task)", "non-empty", "what the agents judge PASS or FAIL"),
        _row(
            "agents",
            "array of tables",
            "(the article's three personas)",
            "unique names",
            "[[agents]] with name, description (required) and prior_pass; required in a file of one's own",
        ),
        _row("agents[].name", "str", "-", "unique", "the persona's name (in its system prompt)"),
        _row("agents[].description", "str", "-", "", "the persona's description (in its system prompt)"),
        _row(
            "agents[].prior_pass",
            "float",
            0.5,
            "[0, 1]",
            "surrogate only: probability that the persona first votes PASS",
        ),
        _row("max_rounds", "int", d["max_rounds"], ">= 1", "debate rounds before the final vote"),
        _row("runs", "int", d["runs"], ">= 1", "independent debates"),
        _row(
            "final_rule",
            "str",
            d["final_rule"],
            "majority, weighted",
            "the vote after the last round (weighted needs ask_confidence)",
        ),
        _row(
            "ask_confidence",
            "bool",
            d["ask_confidence"],
            "",
            "ask each agent for [CONFIDENCE: x] (the weighted vote's weights)",
        ),
        _row("seed", "int", d["seed"], "0 .. 2^63 - 1", "the run's seed"),
        *_sampling_rows(d["sampling"]),
        _row(
            "surrogate.persuasion",
            "float",
            sur["persuasion"],
            "[0, 1]",
            "surrogate agents: probability of adopting the others' majority",
        ),
        _row(
            "surrogate.malformed",
            "float",
            sur["malformed"],
            "[0, 1]",
            "surrogate agents: probability of an untagged reply",
        ),
        _row("surrogate.seed", "int", sur["seed"], ">= 0", "surrogate agents: seed mixed into every request's"),
        _row(
            "surrogate.confidence_low", "float", sur["confidence_low"], "[0, 1]", "surrogate agents: lowest confidence"
        ),
        _row(
            "surrogate.confidence_high",
            "float",
            sur["confidence_high"],
            "[0, 1]",
            "surrogate agents: highest confidence",
        ),
    ]
