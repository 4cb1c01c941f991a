"""A tiny random-weight Qwen2 chat model, built at test time (no download): ``build_tiny_qwen2(path)``.

The tokenizer is a byte-level BPE (every string encodes; no unknown tokens) trained on a small corpus of
the words and JSON that appear in state-tracking prompts, with Qwen's special tokens ``<|endoftext|>``
(pad), ``<|im_start|>`` and ``<|im_end|>`` (eos) and a Qwen-style chat template. The model is
``Qwen2ForCausalLM`` with 2 layers of width 32, random weights from a fixed torch seed.

``always_stop=True`` wires the last layer so that every position's logits put (by a wide margin) all the
mass on ``<|im_end|>``: every reply is empty with ``finish_reason == "stop"`` and one completion token,
which exercises the end-of-sequence path deterministically, greedy or sampled.

Used by tests/test_llm_backends.py, the trial-harness tests and benchmarks/bench_hf_batching.py.
"""

from __future__ import annotations

import os

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN2_PRETOKENIZE_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_CORPUS = [
    "You are agent 3 of 5 in a state-tracking task. Reply with the next state as JSON only.",
    "You are a helpful assistant. Update the state using the rule and the observation.",
    "system user assistant state step trial role agent rule observation neighbours reply",
    'The current state is {"x": 12, "y": -3, "z": 0.5, "step": 4}. What is the next state?',
    '{"state": {"a": 1, "b": 2, "c": [1, 2, 3]}, "step": 7, "done": false, "value": null}',
    '{"x": 0, "y": 1, "z": 2, "w": 3, "v": 4, "u": 5, "t": 6, "s": 7, "r": 8, "q": 9}',
    "Your neighbours reported: agent 1 says 14, agent 2 says 15, agent 4 says 13.",
    "Deliberate, vote and debate. The answer must be a JSON object with the key state.",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 25 50 100 -1 -2 0.1 0.25 0.5",
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,:;!?'\"()[]{}<>+-*/=_#@%&|~^$",
]


def build_tiny_tokenizer(path: str | os.PathLike, vocab_size: int = 384):
    """Train the byte-level BPE tokenizer and save it (transformers format) into ``path``; returns it."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    # Qwen2's own pipeline (NFC, its split regex -- one digit per token --, byte level), so the files mean
    # the same to the raw `tokenizers` library, to transformers 4.x (which reads tokenizer.json as is) and
    # to transformers 5.x (which rebuilds this pipeline for model_type qwen2).
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=512,
    )
    fast.save_pretrained(os.fspath(path))
    return fast


def build_tiny_qwen2(
    path: str | os.PathLike,
    *,
    seed: int = 0,
    hidden_size: int = 32,
    intermediate_size: int = 64,
    num_hidden_layers: int = 2,
    num_attention_heads: int = 4,
    num_key_value_heads: int = 2,
    initializer_range: float = 0.2,
    always_stop: bool = False,
) -> str:
    """Build tokenizer + random-weight ``Qwen2ForCausalLM`` into directory ``path``; returns ``path``.

    ``initializer_range`` is larger than Qwen's 0.02 so that greedy argmaxes are separated by clear
    margins (batched and single-request greedy decoding then agree exactly despite float rounding).
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    tok = build_tiny_tokenizer(path)
    vocab = len(tok)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=512,
        initializer_range=initializer_range,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).eval()
    if always_stop:
        with torch.no_grad():
            attn = model.model.layers[-1].self_attn
            # v = bias (constant at every position) -> attention output constant -> o_proj adds a large
            # constant vector along e_0 to the residual stream; after the final RMSNorm every hidden
            # state points along e_0, and lm_head's eos row is the only row with weight there.
            attn.v_proj.weight.zero_()
            attn.v_proj.bias.fill_(1.0)
            attn.o_proj.weight.zero_()
            attn.o_proj.weight[0, :] = 1e3
            model.lm_head.weight[:, 0] = 0.0
            model.lm_head.weight[eos_id, :] = 0.0
            model.lm_head.weight[eos_id, 0] = 100.0
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    model.save_pretrained(path)
    return path
