"""The model the vLLM tests score: the embedded tiny Qwen2 after a short supervised warm-up on a Yes/No task
(syllogism), so that sampled answers are right some of the time and wrong the rest, with positions enough for the
score job's context (scoring.PROMPT_TOKENS + the answer) and a chat template whose turn end is not its EOS.

The warm-up teaches the model to end an answer with `<|endoftext|>`. The folder is then re-labelled as a base
checkpoint whose template closes the assistant's turn with that token while its EOS is another one (`<|pad|>`,
never emitted): as with Qwen2.5's base tokenizer, an engine that stops at EOS alone runs every answer to the cap.
The user's turn is the bare prompt, so the model sees what it was warmed up on. Heads of 32 dimensions: vLLM's CPU
attention kernels refuse 16."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import torch
from transformers import PreTrainedTokenizerFast

from dataflex_rl.backends.embedded.base_model import build_base_model
from dataflex_rl.backends.embedded.settings import ModelShape, WarmupSettings
from dataflex_rl.corpus.build import build_corpus

TEMPLATE = "{question}\nAnswer:"
TURN_END, EOS = "<|endoftext|>", "<|pad|>"
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['content'] }}{% if m['role'] == 'assistant' %}" + TURN_END +
                 "{% endif %}{% endfor %}")
SHAPE = ModelShape(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=2048, vocab_size=400)
WARMUP = WarmupSettings(steps=150, batch_size=16, learning_rate=3e-3)


def build_vllm_test_model(root: Path) -> tuple[Path, pd.DataFrame]:
    """(the model folder, the items it was warmed up on); seconds on one core."""
    torch.set_num_threads(1)
    corpus, _ = build_corpus(["syllogism"], 120, seed=1)
    corpus.to_parquet(root / "corpus.parquet")
    model_dir = root / "model"
    build_base_model(root / "corpus.parquet", model_dir, SHAPE, WARMUP, TEMPLATE, progress=False)
    relabel_turn_end(model_dir)
    return model_dir, corpus


def relabel_turn_end(model_dir: Path) -> None:
    """An embedded base folder re-labelled as a base checkpoint whose template closes the assistant's turn with
    TURN_END (the token its warm-up ends answers with) while its EOS is another token (EOS, never emitted)."""
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    tokenizer.eos_token, tokenizer.chat_template = EOS, CHAT_TEMPLATE
    tokenizer.save_pretrained(model_dir)
    for name in ("config.json", "generation_config.json"):
        path = model_dir / name
        if path.exists():
            config = json.loads(path.read_text())
            config["eos_token_id"] = tokenizer.eos_token_id
            path.write_text(json.dumps(config, indent=2))
