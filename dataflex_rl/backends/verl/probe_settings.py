"""A verl model's probe settings (`models.<m>.probe`) and what a selection round asks of the train job's machine;
torch-free (the dry run reads it).

The round's backward passes run on each of the job's GPUs (probe_shards.py): a replica's weights and one group's
gradient in the model's dtype (bf16: 2 + 2 bytes a parameter), and, in fp32, the unit validation gradient and the
share's mean scored gradient that the streamed score accumulates (4 + 4): 12 bytes a parameter, ~92 GiB for an 8.2B
model; and the activations and logits of one micro-batch (`probe_memory`, where the model's config.json can be read).
On the host (`round_host_memory`): the HF model between backward passes (2), every round engine's weights, which vLLM
keeps in pinned host memory while it sleeps (2 for each engine: 16 on 8 GPUs at tensor_parallel_size 1), the
validation gradient and its unit direction (4 + 4), and the one fp32 sum that every replica adds its gradient into,
block by block and in the replicas' order (4): 30 bytes a parameter on 8 GPUs, ~229 GiB for an 8.2B model. The
options that need whole per-group gradients at once hold them on the host besides, fp32: a projection the M
candidates', normalised validation groups the |P_v| groups' (33 GB a group at 8B parameters, which only a small model
can afford); the dry run counts them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from dataflex_rl.backends.verl.gpu_types import MARGIN_GIB, counted, usable_gib
from dataflex_rl.prompt_selection.candidates import GRADIENT_BLOCK

if TYPE_CHECKING:
    from dataflex_rl.policies.methods import MethodSpec

GIB = 1 << 30
MB = 1 << 20  # Snakemake's mem_mb, as the dry run reads it
DTYPE_BYTES = 2  # bf16 weights and gradients, as the released scorer ran its model
GPU_BYTES_PER_PARAMETER = 2 * DTYPE_BYTES + 4 + 4
# elements of a gradient that the host handles at once: each replica's gradient is copied from its device and added
# into the round's one fp32 sum one block at a time (probe_gradients.HostSum), and each module's part of the score is
# summed in fp64 one block at a time (scores.module_contributions); one value for both (candidates.GRADIENT_BLOCK)
HOST_BLOCK = GRADIENT_BLOCK
GPU_HEADROOM = 0.9  # of a GPU's memory: CUDA context, allocator fragmentation
# tokens of a micro-batch whose logits one chunk of the probe's log-probs holds (probe_gradients.response_logp)
LOGIT_CHUNK_TOKENS = 1024
# bytes a logit of a chunk at its backward's peak: its fp32 log-softmax kept for the backward (4), the gradient the
# target gather scatters into (4) and the log-softmax's input gradient (4); measured on the CPU: 12.0-12.2
LOGIT_BYTES = 12
# bytes a token of each GPU's mask: the padded micro-batch's boolean [B, 1, S, S] attention mask (1, for the whole
# backward) and the bf16 additive bias that SDPA converts it to in the layer it runs (2; not measured: the CPU kernel)
MASK_BYTES = 1 + DTYPE_BYTES


@dataclass(frozen=True)
class ProbeSettings:
    """`gpu_memory_gb`: the memory of one of the train job's GPUs (default 80: an A100/H100-80GB); `parameters`: the
    model's parameter count where its config.json cannot be read at dry run (a hub name not in the local cache);
    `micro_batch`: responses per forward and backward of the probe (default 1; the released scorer used 8)."""

    gpu_memory_gb: float = 80.0
    parameters: int | None = None
    micro_batch: int = 1


@dataclass(frozen=True)
class ModelShape:
    """What the activation estimate reads of a decoder's config.json (`head_dim` where it names one, else hidden /
    heads; `num_key_value_heads` absent: one per head)."""

    hidden: int
    intermediate: int
    layers: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int

    @classmethod
    def of(cls, config: Mapping[str, Any] | None) -> ModelShape | None:
        """The shape of a config.json's model (a multimodal config's `text_config`), None where a key is missing."""
        if isinstance(config, Mapping) and "hidden_size" not in config and isinstance(config.get("text_config"),
                                                                                      Mapping):
            config = config["text_config"]
        if not isinstance(config, Mapping):
            return None
        keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size", "num_attention_heads")
        values = [config.get(key) for key in keys]
        if not all(isinstance(value, int) and value > 0 for value in values):
            return None
        hidden, intermediate, layers, vocab, heads = values
        kv_heads, head_dim = config.get("num_key_value_heads") or heads, config.get("head_dim") or hidden // heads
        if not (isinstance(kv_heads, int) and isinstance(head_dim, int) and kv_heads > 0 and head_dim > 0):
            return None
        return cls(hidden, intermediate, layers, vocab, heads, kv_heads, head_dim)

    @property
    def layer_bytes(self) -> int:
        """One decoder layer's activations that autograd keeps for its backward, bytes a token, as Hugging Face's
        Llama/Qwen layers run in bf16 (H hidden, I intermediate, A = heads × head_dim, K = KV heads × head_dim):
        - its two RMSNorms: each its input's fp32 copy (4H) and the bf16 normalised (2H): 12H;
        - attention: q and k through Qwen3's q/k RMSNorms (fp32 inputs 4A + 4K, bf16 outputs 2A + 2K), rotary's
          rotate_half copies (2A + 2K) and the rotated q, k (2A + 2K), v (2K), the attention output and o_proj's
          contiguous input (2A + 2A): 14A + 12K (SDPA's per-head logsumexp, 4 bytes a head, left out);
        - the MLP: gate, SiLU(gate), up and their product (2I each): 8I.
        12H + 8I + 14A + 12K: an upper bound for a layer without q/k norms (Llama, Qwen2: 4A + 4K less). Qwen3-8B:
        12·4096 + 8·12288 + 14·4096 + 12·1024 = 217,088 bytes."""
        attention, key_value = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return 12 * self.hidden + 8 * self.intermediate + 14 * attention + 12 * key_value


@dataclass(frozen=True)
class ProbeMemory:
    """One GPU's bytes at the peak of a micro-batch's backward (probe_memory)."""

    parameters: int  # 12 bytes a parameter
    held: int  # the checkpointed layers' inputs and the final norm's, for the whole backward
    mask: int  # the padded micro-batch's attention mask and its bias
    layer: int  # one layer's recomputed activations and the gradients through it
    logits: int  # one chunk of logits

    @property
    def total(self) -> int:
        """The layer's and the logit chunk's peaks come one after the other in the backward (the chunks first)."""
        return self.parameters + self.held + self.mask + max(self.layer, self.logits)


def probe_memory(parameters: int, shape: ModelShape, micro_batch: int, prompt_tokens: int,
                 response_tokens: int) -> ProbeMemory:
    """An estimate of one GPU's memory at the peak of a selection round's backward pass (probe_gradients: gradient
    checkpointing, chunked log-probs), for `micro_batch` responses B of up to `response_tokens` W after a prompt of up
    to `prompt_tokens`: the micro-batch is padded to S = prompt + W tokens a sequence, T = B·S tokens. Bytes:
    - parameters: 12 a parameter (GPU_BYTES_PER_PARAMETER);
    - held through the backward: each checkpointed layer's input hidden states in bf16 (L × 2H a token) and the final
      norm's (its fp32 input 4H, its bf16 output 2H, the decoder's last hidden states 2H): T × (2HL + 8H);
    - the mask: B × S² × 3 (MASK_BYTES);
    - one layer recomputed in the backward: T × (layer_bytes + 6H), 6H for the gradients in flight through it;
    - one logit chunk: B × min(W, max(1, LOGIT_CHUNK_TOKENS // B)) tokens × V × 12 (LOGIT_BYTES);
    the peak holds the parameters, the held states, the mask and the larger of the last two. Measured on the CPU on
    tiny Qwen3s in bf16 (tests/test_verl_probe_settings.py): the held states and a layer's activations within a few
    percent of these, the logit chunk at 12.0-12.2 bytes a logit; calibrated on no GPU, whose allocator rounding and
    kernels' workspaces the 10% headroom has to cover."""
    sequence = prompt_tokens + response_tokens
    tokens = micro_batch * sequence
    hidden = shape.hidden
    chunk = micro_batch * min(response_tokens, max(1, LOGIT_CHUNK_TOKENS // micro_batch))
    return ProbeMemory(parameters=parameters * GPU_BYTES_PER_PARAMETER,
                       held=tokens * DTYPE_BYTES * hidden * (shape.layers + 4),
                       mask=micro_batch * sequence * sequence * MASK_BYTES,
                       layer=tokens * (shape.layer_bytes + 6 * hidden),
                       logits=chunk * shape.vocab * LOGIT_BYTES)


def _gpu_limit(settings: ProbeSettings) -> float:
    """The bytes a round may use of one GPU: GPU_HEADROOM of the declared size counted as gpu_types.usable_gib."""
    return GPU_HEADROOM * usable_gib(settings.gpu_memory_gb) * GIB


def _largest(fits, upper: int) -> int:
    """The largest n in 1 … upper with fits(n) (fits decreasing in n), 0 where none."""
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _activation_errors(key: str, parameters: int, settings: ProbeSettings, shape: ModelShape, prompt_tokens: int,
                       response_tokens: int, length_key: str) -> list[str]:
    """probe_memory's refusal, with its arithmetic and the fixes that fit: the largest micro-batch; where not even
    one response fits, the longest response at micro_batch 1 (the setting `length_key`); GPUs of the size it needs."""
    limit, batch = _gpu_limit(settings), settings.micro_batch
    memory = probe_memory(parameters, shape, batch, prompt_tokens, response_tokens)
    if memory.total <= limit:
        return []
    sequence = prompt_tokens + response_tokens
    chunk = memory.logits // (shape.vocab * LOGIT_BYTES)

    def fits(micro_batch: int, response: int) -> bool:
        return probe_memory(parameters, shape, micro_batch, prompt_tokens, response).total <= limit

    fixes = []
    if memory.parameters > limit:
        head = f"{key}.probe.gpu_memory_gb: {settings.gpu_memory_gb:g}"
    else:
        head = f"{key}.probe.micro_batch: {batch}"
        largest = _largest(lambda b: fits(b, response_tokens), batch - 1)
        longest = 0 if largest else _largest(lambda w: fits(1, w), response_tokens - 1)
        fixes += ([f"lower {key}.probe.micro_batch to {largest} (the largest that fits)"] if largest else []) + (
            [f"lower {length_key} to {longest} (at micro_batch 1)"] if longest else [])
    fixes.append(f"train on GPUs of ≥ {math.ceil(memory.total / GPU_HEADROOM / GIB + MARGIN_GIB)} GB (and say so "
                 f"in {key}.probe.gpu_memory_gb)")
    if memory.parameters > limit:
        fixes.append("use a smaller model")
    return [f"{head}, but a selection round's backward passes need an estimated {memory.total / GIB:.1f} GiB on one "
            f"GPU, beyond {limit / GIB:.1f} GiB ({GPU_HEADROOM:.0%} of {key}.probe.gpu_memory_gb "
            f"{counted(settings.gpu_memory_gb)}): {parameters:.3g} parameters × {GPU_BYTES_PER_PARAMETER} bytes (bf16 "
            f"weights and gradient, fp32 validation and mean gradients) = {memory.parameters / GIB:.1f} GiB; micro_batch "
            f"{batch} × ({prompt_tokens} prompt + {response_tokens} response tokens) = {batch * sequence} tokens, "
            f"holding their {shape.layers} checkpointed layers' inputs and the final norm's, 2 × {shape.hidden} × "
            f"({shape.layers} + 4) bytes a token = {memory.held / GIB:.1f} GiB; the attention mask, {batch} × "
            f"{sequence}² × {MASK_BYTES} bytes = {memory.mask / GIB:.1f} GiB; and the larger of one layer recomputed, "
            f"{shape.layer_bytes} + 6 × {shape.hidden} bytes a token = {memory.layer / GIB:.1f} GiB, and one logit "
            f"chunk, {chunk} tokens × {shape.vocab} × {LOGIT_BYTES} bytes = {memory.logits / GIB:.1f} GiB (an "
            f"estimate from its shape: dataflex_rl/backends/verl/probe_settings.py, calibrated on the CPU, on "
            f"no GPU) — " + ", or ".join(fixes)]


@dataclass(frozen=True)
class RoundHostMemory:
    """The host's bytes at a selection round's peak (round_host_memory), term by term."""

    model: int  # the HF model between backward passes, bf16
    engines: int  # the sleeping round engines' weights, pinned bf16, one copy an engine
    validation: int  # g_v and its unit direction, fp32
    accumulation: int  # the one fp32 sum the replicas add their gradients (or means) into
    transient: int  # the blocks in flight: one block's host copy, or its fp64 products for the module shares
    gradient_rows: int  # whole fp32 per-group gradients held at once (a projection, normalised validation groups)

    @property
    def total(self) -> int:
        return (self.model + self.engines + self.validation + self.accumulation + self.transient
                + self.gradient_rows)


def round_host_memory(parameters: int, engines: int, gradient_rows: int = 0) -> RoundHostMemory:
    """The host memory of a selection round of a `parameters`-parameter model with `engines` sleeping vLLM engines
    (the train job's GPUs // rollout.tensor_parallel_size: round_engines.device_groups) and `gradient_rows` whole
    per-group gradients held at once. Its peak comes after the candidates' backward passes, when the policy takes the
    module shares of the mean (policies.prompt_selection._aligned); bytes:
    - model: 2 a parameter. The HF model (bf16) is back on the CPU between passes (probe_shards.replicas); during a
      pass its weights are on the first GPU and the other replicas' are copied there from GPU to GPU, never through
      the host.
    - engines: 2 a parameter for each engine. vLLM's sleep (level 1) backs the weights up in pinned host memory
      (its CuMemAllocator), a tensor-parallel engine's workers each their share, and pinned pages count against the
      job's memory cgroup as any other.
    - validation: 4 + 4 a parameter. The round keeps g_v (the validation rollouts' summed gradient, or `align`'s
      candidates') and the policy the unit direction it scores against (scores.unit_vector).
    - accumulation: 4 a parameter. probe_shards.summed_gradient and group_alignment preallocate one fp32 [P] sum that
      each replica adds its gradient (its share's mean) into on the host, in the replicas' order: no replica's whole
      vector and no concatenation exist on the host (probe_gradients.HostSum). The summed gradient becomes g_v, the
      mean stays until the module shares are taken.
    - transient: 24 × HOST_BLOCK bytes. A gradient crosses to the host one block at a time (its fp32 copy, and its
      scaled copy for a share's mean: 8 bytes an element), and each module's share of the score is summed one block
      at a time in fp64 (both blocks and their product: 24).
    - gradient_rows: 4 a parameter each: the M candidates' rows under a projection, the |P_v| validation groups' with
      normalise_validation_groups (probe_shards.group_gradients writes each group's row in place).
    Left out: the engines' processes themselves and the decoded rollouts, which do not scale with the parameters."""
    return RoundHostMemory(model=DTYPE_BYTES * parameters, engines=DTYPE_BYTES * parameters * engines,
                           validation=(4 + 4) * parameters, accumulation=4 * parameters, transient=24 * HOST_BLOCK,
                           gradient_rows=4 * parameters * gradient_rows)


def probe_memory_errors(key: str, parameters: int, settings: ProbeSettings, host_mb: int,
                        gradient_rows: int = 0, shape: ModelShape | None = None, prompt_tokens: int = 0,
                        response_tokens: int = 0, length_key: str = "training.max_new_tokens",
                        engines: int = 1) -> list[str]:
    """Why a selection round of a `parameters`-parameter model cannot run on the train job's GPUs of
    `settings.gpu_memory_gb` and its `host_mb` of memory, with `engines` round engines asleep during its backward
    passes and `gradient_rows` whole fp32 gradients on the host besides (a projection, normalised validation groups:
    prompt_selection.candidates.SelectionSize); the host's bytes are round_host_memory's. With the model's `shape`
    (its config.json) the GPU's bytes are probe_memory's for `settings.micro_batch` responses of up to
    `response_tokens` (the setting `length_key`: the study's, or the model's own) after prompts of up to
    `prompt_tokens`; without it the parameters' alone, which the refusal says."""
    gpu = parameters * GPU_BYTES_PER_PARAMETER
    if shape is not None:
        errors = _activation_errors(key, parameters, settings, shape, prompt_tokens, response_tokens, length_key)
    elif gpu > _gpu_limit(settings):
        unread = ("; an estimate without the activations and logits, which need the model's shape: its config.json "
                  "or a declared architecture")
        errors = [f"{key}.probe.gpu_memory_gb: {settings.gpu_memory_gb:g}, but a selection round's backward "
                      f"passes need {gpu / GIB:.0f} GiB on one GPU for {parameters:.3g} parameters (bf16 weights and "
                      f"gradient, fp32 validation and mean gradients: {GPU_BYTES_PER_PARAMETER} bytes a parameter, "
                      f"within {GPU_HEADROOM:.0%} of the GPU{unread}) — train on GPUs of ≥ "
                      f"{gpu / GPU_HEADROOM / GIB:.0f} GiB (and say so in {key}.probe.gpu_memory_gb), or use a "
                      f"smaller model"]
    else:
        errors = []
    host = round_host_memory(parameters, engines, gradient_rows)
    if host.total > host_mb * MB:
        errors.append(_host_error(key, parameters, engines, gradient_rows, host, host_mb))
    return errors



def _host_error(key: str, parameters: int, engines: int, gradient_rows: int, host: RoundHostMemory,
                host_mb: int) -> str:
    def mb(size: int) -> str:
        return f"{size / MB:.0f} MB"

    needed = -(-host.total // MB)
    rows = (f"; {gradient_rows} whole fp32 gradients of its groups ({mb(host.gradient_rows)}: a projection_dim holds "
            f"the M candidates', normalise_validation_groups the |P_v| validation groups')"
            if gradient_rows else "")
    fix = f" — set {key}.resources.train.mem_mb to at least {needed}" + (
        ", or leave those options out (every other reduction streams one group at a time)" if gradient_rows else "")
    return (f"resources of rule train: mem_mb={host_mb}, but a selection round of {key} holds {mb(host.total)} on the "
            f"host at its peak, for {parameters:.3g} parameters: the HF model between backward passes (bf16, "
            f"{mb(host.model)}); the weights of its {engines} sleeping vLLM engine(s), pinned bf16 copies "
            f"({engines} × 2 bytes a parameter, {mb(host.engines)}); the validation gradient and its unit direction "
            f"(fp32, {mb(host.validation)}); the fp32 sum the replicas add their gradients into "
            f"({mb(host.accumulation)}); the blocks in flight ({mb(host.transient)}){rows} "
            f"(dataflex_rl/backends/verl/probe_settings.py: round_host_memory){fix}")


def check_selection_options(method: MethodSpec) -> list[str]:
    """What of a prompt-selection method's options the verl backend cannot run, each saying why."""
    if method.params.get("precondition") == "adam":
        return ["params.precondition: 'adam' divides g_v by Adam's second moment, which on the verl backend lives in "
                "the FSDP optimiser shards of the run's checkpoint, not in the merged weights the probe scores; the "
                "released loop never enabled it — use precondition: none (the default) on verl"]
    return []
