"""The documents' printed constants, as plain data (imports nothing of mascot).

Numbers and texts that the source documents print, kept in one place so that code, tests and reports
cite them instead of retyping them. Where a document only describes something in words (a role's prompt,
the ends of an axis), the entry is mascot's wording of that description and says so. Protocols turn these
records into their own types (``Role``, ``Axis``, ``DebateAgent``).

Consensus paper ("A Control-Theoretic Approach for Resource-Aware Consensus in Multi-Agent AI"), Sec. V-C:
the live LLM deliberation -- :data:`DELIBERATION_TASK`, :data:`DELIBERATION_AXES`, :data:`DELIBERATION_ROLES`,
:data:`DELIBERATION_SETTINGS`, :data:`DELIBERATION_STRATEGIES`, :data:`TABLE_VIII` and
:data:`CLAUDE_COMPLETE_ESTIMATES`.

Voting/debate article ("Multi-Agent Consensus: Architecting Voting & Debate Topologies in LLM Swarms"):
the code-review debate -- :data:`ARTICLE_TASK`, :data:`ARTICLE_AGENTS`.
"""

from __future__ import annotations

__all__ = [
    "DELIBERATION_TASK",
    "DELIBERATION_AXES",
    "DELIBERATION_ROLES",
    "DELIBERATION_SETTINGS",
    "DELIBERATION_STRATEGIES",
    "TABLE_VIII",
    "CLAUDE_COMPLETE_ESTIMATES",
    "ARTICLE_TASK",
    "ARTICLE_AGENTS",
]

# ============================================================================ consensus paper, Sec. V-C
#: The project the agents plan (Sec. V-C describes it: an emergency medical tracking app, a two-week launch,
#: a tiny infrastructure budget, millions of requests, top-secret patient data; the sentence is mascot's).
DELIBERATION_TASK = (
    "Plan the cloud software architecture for an emergency medical tracking app. The app must launch in "
    "two weeks, on a tiny infrastructure budget, while serving millions of requests, and it stores "
    "top-secret patient data that needs maximum security."
)

#: The six architectural axes of the design-preference vector (Sec. V, after Table II: service coupling, API style,
#: database strategy, deployment, authentication, observability), ``(name, low, high)``: what 0 and 1 mean
#: on each axis is mascot's wording.
DELIBERATION_AXES = (
    ("service coupling", "a single monolith", "fine-grained microservices"),
    ("API style", "simple synchronous REST", "event-driven asynchronous messaging (queues, gRPC streams)"),
    ("database strategy", "one relational SQL database", "distributed NoSQL stores"),
    ("deployment", "managed PaaS / serverless", "self-managed Kubernetes clusters"),
    ("authentication", "basic login", "zero-trust, MFA and full regulatory compliance"),
    ("observability", "basic logs", "full metrics, distributed tracing and alerting"),
)

#: Table II's five roles (``name``, ``title``, dominant ``bias`` as printed). ``prompt`` extends the paper's
#: example ("You are the Project Planner. You demand compromises in scalability to meet the deadline...")
#: to every role; ``prior`` (one entry per axis) is mascot's typical vector of the role (the surrogate's
#: starting point and the fallback for an unparsable first reply), not a printed value.
DELIBERATION_ROLES = (
    {
        "name": "Planner",
        "title": "Project Planner",
        "bias": "Balanced; timeline feasibility",
        "prompt": "You are the Project Planner. You demand compromises in scalability to meet the deadline, and you "
        "favour a balanced plan the team can actually ship in two weeks.",
        "prior": (0.30, 0.40, 0.40, 0.30, 0.50, 0.40),
    },
    {
        "name": "Architect",
        "title": "Software Architect",
        "bias": "Microservices, containers, scalability",
        "prompt": "You are the Software Architect. You insist on microservices, containers and an architecture that "
        "scales to millions of requests.",
        "prior": (0.95, 0.85, 0.70, 0.90, 0.60, 0.70),
    },
    {
        "name": "Security",
        "title": "Security Reviewer",
        "bias": "Authentication, compliance, tracing",
        "prompt": "You are the Security Reviewer. You demand strong authentication, regulatory compliance for "
        "top-secret medical data, and end-to-end tracing of every access.",
        "prior": (0.40, 0.30, 0.20, 0.50, 1.00, 0.95),
    },
    {
        "name": "CostOptimizer",
        "title": "Cost Optimizer",
        "bias": "Simpler stack, NoSQL, lower cost",
        "prompt": "You are the Cost Optimizer. You push for the simplest and cheapest stack, NoSQL storage and the "
        "lowest possible infrastructure bill.",
        "prior": (0.05, 0.10, 0.90, 0.05, 0.30, 0.10),
    },
    {
        "name": "DevOps",
        "title": "DevOps Engineer",
        "bias": "CI/CD, observability, K8s",
        "prompt": "You are the DevOps Engineer. You insist on CI/CD pipelines, Kubernetes and full observability.",
        "prior": (0.70, 0.60, 0.50, 1.00, 0.60, 1.00),
    },
)

#: Sec. V-C's live settings: switching threshold, consensus tolerance, initial token budget.
DELIBERATION_SETTINGS = {"eta": 0.2, "eps": 0.05, "b0": 100_000.0}

#: Sec. V-C's three strategies and the mode each fixes: "(i) adaptive, switching between Mode 1 and Mode 2"
#: (``None``: Def. 8 decides), "(ii) complete-only (Mode 1), and (iii) ring-only (Mode 2)" (Table III: mode 1 =
#: complete K5, mode 2 = ring C5). The deliberation's records use these names; Algorithm 1 and the consensus
#: kernels call the fixed strategies ``mode1`` / ``mode2``.
DELIBERATION_STRATEGIES = {"adaptive": None, "complete": 1, "ring": 2}

#: Table I's GPQA Diamond scores as printed (percent), and the question count Sec. I gives for that set.
TABLE_I_GPQA = {
    "GPT-5.5": 93.18,
    "Gemini 3.1 Pro": 95.45,
    "Claude Opus 4.8": 92.42,
    "DeepSeek R1": 71.5,
    "LLaMa 4 Mav.": 67.1,
}
GPQA_DIAMOND_QUESTIONS_AS_PRINTED = 448

#: Table VIII as printed: ``(model, strategy) -> rounds, tokens, D(0), D_final``.
TABLE_VIII = {
    ("GPT-5.4-Mini", "adaptive"): {"rounds": 9, "tokens": 41727, "d0": 0.7778, "d_final": 0.0409},
    ("GPT-5.4-Mini", "complete"): {"rounds": 12, "tokens": 67593, "d0": 0.8019, "d_final": 0.0450},
    ("GPT-5.4-Mini", "ring"): {"rounds": 17, "tokens": 60858, "d0": 0.7570, "d_final": 0.0285},
    ("Gemini 2.5-Flash", "adaptive"): {"rounds": 14, "tokens": 92129, "d0": 0.7361, "d_final": 0.0403},
    ("Gemini 2.5-Flash", "complete"): {"rounds": 9, "tokens": 94984, "d0": 0.7158, "d_final": 0.0430},
    ("Gemini 2.5-Flash", "ring"): {"rounds": 18, "tokens": 88141, "d0": 0.7430, "d_final": 0.0419},
    ("Claude Opus-4.8", "adaptive"): {"rounds": 11, "tokens": 84944, "d0": 0.7240, "d_final": 0.0456},
    ("Claude Opus-4.8", "complete"): {"rounds": 9, "tokens": 108227, "d0": 0.6864, "d_final": 0.0549},
    ("Claude Opus-4.8", "ring"): {"rounds": 13, "tokens": 81364, "d0": 0.7193, "d_final": 0.0401},
}

#: The paper's post-hoc estimates for the Claude complete-only run (Sec. V-C): average rate ``lambda1 ~
#: 0.7574`` and cost ``c1 ~ 12,025`` per round; mode 2 is never selected, so ``eta = eps = 0.05``.
CLAUDE_COMPLETE_ESTIMATES = {"lambda1": 0.7574, "c1": 12025.0, "eta": 0.05, "eps": 0.05}

# ============================================================================ voting/debate article
#: The article's code-review task, verbatim.
ARTICLE_TASK = "def execute_calculation(exp): return eval(exp) # Fast execution path"

#: The article's three personas (``name``, ``description`` verbatim). ``prior_pass`` is mascot's (the
#: surrogate's probability that the persona first votes PASS), not printed.
ARTICLE_AGENTS = (
    {
        "name": "Security Agent",
        "description": "Focuses on vulnerabilities, injections, and safe library usage.",
        "prior_pass": 0.05,
    },
    {
        "name": "Performance Agent",
        "description": "Focuses on time-complexity, memory layouts, and execution bottlenecks.",
        "prior_pass": 0.85,
    },
    {
        "name": "Quality Agent",
        "description": "Focuses on exception handling, code styling, and readability.",
        "prior_pass": 0.3,
    },
)

# ============================================================================ consensus paper, Sec. V-A / V-B
#: Table III as printed: mode 1 = complete K5 (``w_ii = 0.4``, ``w_ij = 0.15``), mode 2 = ring C5 (``w_ii = 0.6``,
#: ``w_ij = 0.2`` for ``j = i +- 1``); the costs are Sec. V-A's ``c1 = 600`` (5 x 4 x 30 tokens) and ``c2 = 100``
#: (5 x 2 x 10 tokens).
CONSENSUS_TABLE_III = {
    1: {"graph": "complete K5", "self": 0.4, "other": 0.15, "cost": 600.0},
    2: {"graph": "ring C5", "self": 0.6, "neighbour": 0.2, "cost": 100.0},
}

#: Table IV as printed (two decimals): the initial beliefs X0, one row per agent a1..a5, one column per axis.
CONSENSUS_TABLE_IV = (
    (0.57, 0.54, 0.57, 0.13, 0.55, 0.52),
    (0.39, 0.22, 0.57, 0.09, 0.74, 0.57),
    (0.56, 0.31, 0.46, 0.58, 0.48, 0.75),
    (0.79, 0.44, 0.40, 0.28, 0.64, 0.56),
    (0.33, 0.63, 0.37, 0.49, 0.53, 0.66),
)

#: Sec. V-A / V-B settings as printed (``D0`` is Table V's D(0); the text says "D(0) ~ 0.30"; ``lambda2`` is printed
#: "~ 0.724"; Theorem 1's numbers as printed, K1 and K2 swapped relative to eq. 11; Corollary 1's chain numbers).
CONSENSUS_SETTINGS = {
    "D0": 0.3009,
    "eta": 0.1,
    "eps": 0.03,
    "b0": 2000.0,
    "b0_tight": 650.0,
    "c1": 600.0,
    "c2": 100.0,
    "lambda1": 0.25,
    "lambda2": 0.724,
    "K1": 4,
    "K2": 1,
    "K_star": 5,
    "B_star": 1000.0,
    "log_ratio": 4.29,
    "K_cmpl": 2,
    "K_ring": 8,
    "B_cmpl": 1200.0,
    "B_ring": 800.0,
    "d3_bound": 0.0394,
}

#: Table V as printed: ``(k, D(k), sigma_k, c_sigma_k, b_k, decision)``. ``sigma`` is printed swapped relative to
#: Table III (2 for the complete round); the decision is the printed one in ASCII ("D > eta: complete K5").
CONSENSUS_TABLE_V = (
    (0, 0.3009, 2, 600.0, 2000.0, "D > eta: complete K5"),
    (1, 0.0752, 1, 100.0, 1400.0, "D <= eta: ring C5"),
    (2, 0.0381, 1, 100.0, 1300.0, "D > eps: ring continues"),
    (3, 0.0254, None, None, 1200.0, "D <= eps: consensus"),
)

#: Table VI as printed: ``strategy -> (b0, rounds, tokens, D_final, in Omega_eps)``; the tight run's rounds are
#: printed "—" (``None``) and Sec. V-B says it triggers BudgetFail.
CONSENSUS_TABLE_VI = {
    "adaptive": (2000.0, 3, 800.0, 0.0254, True),
    "complete-only": (2000.0, 2, 1200.0, 0.0188, True),
    "ring-only": (2000.0, 6, 600.0, 0.0274, True),
    "tight": (650.0, None, 600.0, 0.0752, False),
}

__all__ += [
    "CONSENSUS_TABLE_III",
    "CONSENSUS_TABLE_IV",
    "CONSENSUS_SETTINGS",
    "CONSENSUS_TABLE_V",
    "CONSENSUS_TABLE_VI",
]

# ============================================================================ SR paper (predictive maps)
#: Table 1 (gamma = 0.9): (rho, Delta, kappa) per topology.
SR_TABLE1 = {  # gamma = 0.9
    "chain": (1.00, 0.00, 9.95),
    "star": (10.00, 9.00, 28.61),
    "mesh": (10.00, 9.23, 13.00),
}
# Table 2: mean +- s.d. over 100 trials (Qwen2.5-7B-Instruct), and its Spearman r_s column
SR_TABLE2 = {
    "E_ceg": {"chain": (2094.34, 843.05), "mesh": (1241.00, 950.01), "star": (1184.24, 951.91)},
    "R_cdr": {"chain": (0.27, 0.08), "mesh": (-1.66, 42.25), "star": (-3.44, 2.40)},
    "F_ps": {"chain": (237.82, 190.51), "mesh": (247.42, 198.51), "star": (443.64, 307.45)},
}
SR_TABLE2_RS = {"rho": -1.00, "delta": +0.50, "kappa": +1.00}
# values the paper prints in the passages the errata discuss (quoted, never used as results)
SR_QUOTES = {
    "rho_c_upper": 0.06,  # A.4: "the inferred upper bound is rho_c <~ 0.06"
    "eq8_worst": 98.5,  # A.6: "approximately 98.5"
    "eq8_factor": 3.4,  # A.6: "a factor of 3.4 above the benign-star value"
    "kappa_benign": 28.6,  # A.6: "kappa ~ 28.6 from Table 1"
    "T_task": 12,  # Sec. 4: 12-step task
    "gpu_memory_gb": 32,  # App. D: "a single NVIDIA A100 (32 GB)"
    "max_tokens": 250,  # App. D's command: --max_tokens 250
}
#: The memory sizes NVIDIA sells the A100 with (GB), read from NVIDIA's A100 data sheet (40 GB and 80 GB, PCIe
#: and SXM), not from the paper.
A100_MEMORY_GB = (40, 80)
#: Qwen2.5-7B-Instruct's shape, read from its config.json (bfloat16 weights, word embeddings not tied; the q, k
#: and v projections carry biases), not from the paper.
QWEN25_7B_INSTRUCT = dict(
    vocab_size=152064,
    hidden_size=3584,
    intermediate_size=18944,
    num_hidden_layers=28,
    num_attention_heads=28,
    num_key_value_heads=4,
    max_position_embeddings=32768,
    tie_word_embeddings=False,
)
__all__ += ["SR_TABLE1", "SR_TABLE2", "SR_TABLE2_RS", "SR_QUOTES", "A100_MEMORY_GB", "QWEN25_7B_INSTRUCT"]
