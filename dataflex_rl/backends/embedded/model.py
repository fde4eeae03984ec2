"""The embedded backend's tiny model: a BPE tokenizer trained locally and a ~1M-parameter Qwen2 causal LM.

No hub access exists, so both are built from scratch, deterministically from the corpus text and a seed.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from dataflex_rl.backends.embedded.settings import ModelShape

EOS = "<|endoftext|>"
PAD = "<|pad|>"


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE with every digit its own token (so numbers are spelled digit by digit, as arithmetic needs)."""
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r" ?\d| ?[^\s\d\w]+| ?[^\s\d\W]+|\s+"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOS, PAD], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, pad_token=PAD, padding_side="left")


def build_model(shape: ModelShape, tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        num_key_value_heads=shape.num_key_value_heads,
        max_position_embeddings=shape.max_position_embeddings,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def save_model(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerFast, directory: str | Path) -> None:
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def load_model(directory: str | Path) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    model = Qwen2ForCausalLM.from_pretrained(directory, dtype=torch.float32)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(directory, padding_side="left")
    model.eval()
    return model, tokenizer
