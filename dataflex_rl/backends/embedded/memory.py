"""Peak resident memory of an embedded train or score job, estimated at dry-run time (torch-free) from the model
shape, the batch and the lengths, so that a batch that cannot fit in the job's `mem_mb` is refused before it starts.

Every prompt is taken at the longest a job accepts: a train job's at the prompt-token cap that its corpus is checked
against before the first step (dataflex_rl.corpus.training_fit; default max_position_embeddings − max_new_tokens), a
score job's at the prompt-token cap its benchmarks are checked against at its start (dataflex_rl.evaluate.benchmark_fit;
default max_position_embeddings − evaluation.max_new_tokens). The estimate thus bounds the worst batch a corpus or a
benchmark can send, and the model's buffers are counted as if all were alive at once. Float32 throughout,
as the embedded backend trains and decodes. The process itself (Python, torch, transformers, the job's modules)
costs `PROCESS_MB`, measured. benchmarks/embedded_memory.py measures real jobs beside this estimate (its docstring
has the calibration), and tests/test_resource_fit.py asserts measured ≤ estimate ≤ 2 × measured.
"""
from __future__ import annotations

from dataclasses import dataclass

from dataflex_rl.backends.embedded.settings import ModelShape
from dataflex_rl.prompt_selection.candidates import SelectionSize

# VmHWM of a job process that has imported torch 2.13 (CPU), transformers 5.10 and the job's modules: 436 MB measured,
# 466-473 MB once it has loaded and run the smallest model (allocator arenas, the tokenizer); rounded up.
PROCESS_MB = 500
_FLOAT = 4
# The embedded tokenizer is byte-level BPE: its 256 byte tokens and 2 special tokens even below `vocab_size`.
_MIN_VOCAB = 256 + 2


@dataclass(frozen=True)
class _Dims:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_width: int  # num_key_value_heads × head_dim: the width of the K and V projections and of a cache entry
    vocab: int
    positions: int

    @classmethod
    def of(cls, shape: ModelShape) -> "_Dims":
        head_dim = shape.hidden_size // shape.num_attention_heads
        return cls(shape.hidden_size, shape.intermediate_size, shape.num_hidden_layers, shape.num_attention_heads,
                   shape.num_key_value_heads * head_dim, max(shape.vocab_size, _MIN_VOCAB),
                   shape.max_position_embeddings)


def parameter_count(shape: ModelShape) -> int:
    """Parameters of the embedded Qwen2 (tied embeddings): per layer Q and O (h × h), K and V (h × kv_width), the
    Q/K/V biases, the gated MLP (3 × h × intermediate) and two RMSNorms; plus the embedding and the final norm."""
    d = _Dims.of(shape)
    attention = 2 * d.hidden * d.hidden + 2 * d.hidden * d.kv_width + d.hidden + 2 * d.kv_width
    layer = attention + 3 * d.hidden * d.intermediate + 2 * d.hidden
    return d.vocab * d.hidden + d.layers * layer + d.hidden


def _pass_floats(d: _Dims, prompt_rows: int, prompt_len: int, response_rows: int, response_len: int, *,
                 activation_floats: int, for_backward: bool) -> int:
    """The buffers of one pass over `prompt_rows` prompts and `response_rows` responses attending to them: per layer
    the activations of every token (`activation_floats` each), the attention scores of each head (and their softmax,
    for a backward pass) and the keys and values expanded to every head (grouped-query attention repeats them) —
    every layer's kept for a backward pass, one layer's at a time without — beside every layer's cache; then the
    logits over the vocabulary."""
    tokens = prompt_rows * prompt_len + response_rows * response_len
    keys = prompt_len + response_len
    scores = d.heads * (prompt_rows * prompt_len * prompt_len + response_rows * response_len * keys)
    cached = prompt_rows * prompt_len + response_rows * keys
    per_layer = tokens * activation_floats + (2 if for_backward else 1) * scores + 2 * d.hidden * cached
    cache = d.layers * 2 * d.kv_width * cached
    return (d.layers if for_backward else 1) * per_layer + cache + 2 * tokens * d.vocab


# What the embedded probe batches (backends/embedded/probe.py DECODE_PROMPTS; prompt_selection.gradients' vmap chunk).
_PROBE_DECODE_PROMPTS = 64
_PROBE_GRADIENT_GROUPS = 8


def _round_floats(d: _Dims, parameters: int, selection: SelectionSize, max_new_tokens: int, prompt_tokens: int) -> int:
    """A selection round, in two phases that do not overlap: the decoding of one batch of rollouts; then the
    candidates' gradient rows [M, P] and a transient of their size, beside one vmap chunk's per-group gradients and
    its packed backward pass (the prompt once, then the k responses side by side)."""
    packed = prompt_tokens + selection.rollouts * max_new_tokens
    chunk = _pass_floats(d, _PROBE_GRADIENT_GROUPS, packed, 0, 0, activation_floats=12 * d.hidden + 5 * d.intermediate,
                         for_backward=True)
    prompts = min(selection.candidates, _PROBE_DECODE_PROMPTS)
    decode = _pass_floats(d, prompts, prompt_tokens, prompts * selection.rollouts, max_new_tokens,
                          activation_floats=2 * d.hidden + 3 * d.intermediate, for_backward=False)
    return max(decode, (2 * selection.candidates + _PROBE_GRADIENT_GROUPS) * parameters + chunk)


def train_peak_mb(shape: ModelShape, prompts_per_step: int, rollouts: int, max_new_tokens: int,
                  prompt_tokens: int, selection: SelectionSize | None = None) -> float:
    """A GRPO step of the embedded trainer on prompts of up to `prompt_tokens`: the policy, the frozen reference, the
    gradients and AdamW's two moments (5 × the parameters), the policy pass kept for backward, and beside it the
    reference pass and the rollouts' decoding (each as large as the backward pass's transient buffers); with a prompt
    selection, the larger of that step and a selection round (`_round_floats`), which runs between steps."""
    d = _Dims.of(shape)
    parameters = parameter_count(shape)
    batch = (prompts_per_step, prompt_tokens, prompts_per_step * rollouts, max_new_tokens)
    policy = _pass_floats(d, *batch, activation_floats=12 * d.hidden + 5 * d.intermediate, for_backward=True)
    no_grad = _pass_floats(d, *batch, activation_floats=2 * d.hidden + 3 * d.intermediate, for_backward=False)
    step = policy + 2 * no_grad
    if selection is not None:
        step = max(step, _round_floats(d, parameters, selection, max_new_tokens, prompt_tokens))
    floats = 5 * parameters + step
    return PROCESS_MB + floats * _FLOAT / 2**20


def score_peak_mb(shape: ModelShape, batch_size: int, max_new_tokens: int, prompt_tokens: int) -> float:
    """Greedy decoding of one batch of `batch_size` prompts of up to `prompt_tokens`: the weights, the pass over the
    prompts and the growing cache (copied as it grows)."""
    d = _Dims.of(shape)
    decode = _pass_floats(d, batch_size, prompt_tokens, batch_size, max_new_tokens,
                          activation_floats=2 * d.hidden + 3 * d.intermediate, for_backward=False)
    floats = parameter_count(shape) + decode + 2 * d.layers * d.kv_width * batch_size * (prompt_tokens + max_new_tokens)
    return PROCESS_MB + floats * _FLOAT / 2**20
