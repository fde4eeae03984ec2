"""A real Hugging Face model directory for the verl backend's dry-run checks: a tiny Qwen2 (config.json and
safetensors weights, as save_pretrained writes them) and a word-level tokenizer; seconds to build, no download."""
from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM


def save_hf_model_dir(directory: Path, heads: int = 2, kv_heads: int = 1, positions: int = 32768,
                      max_shard_size: str = "50GB") -> Path:
    """A tiny Qwen2 with `heads` attention heads and `kv_heads` key-value heads (4 dimensions each) and `positions`
    positions (max_position_embeddings; Qwen2's default), saved in `directory` with its tokenizer; a `max_shard_size`
    below its ~3 KB of weights (save_pretrained's default: 50GB) saves them as shards named by
    model.safetensors.index.json."""
    config = Qwen2Config(hidden_size=4 * heads, intermediate_size=16, num_hidden_layers=1, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, vocab_size=4, max_position_embeddings=positions)
    Qwen2ForCausalLM(config).save_pretrained(directory, max_shard_size=max_shard_size)
    vocabulary = {"[UNK]": 0, "a": 1, "b": 2, "c": 3}
    PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel(vocabulary, unk_token="[UNK]"))).save_pretrained(
        directory)
    return directory
