"""LLM agents: one backend interface (surrogate, vllm, openai, hf), prompts, parsing, and the trial
harnesses built on them. Heavy dependencies (vLLM, torch, transformers) are imported lazily."""

from mascot.llm.base import BACKENDS, Backend, Request, Response, Sampling, make_backend  # noqa: F401
