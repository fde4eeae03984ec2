"""The selection round's memory rules measured on the GPU at hand, each printed beside the dry run's estimate: torch and
transformers only (no verl, vLLM or Ray), no download, under 8 minutes on one H100.

- GPU: a random-weight bf16 model of each shipped prompt-selection model's declared architecture (the configs'
  `models.<m>.architecture`), one group of the probe's backward (probe_gradients.group_alignment, the round's scoring
  pass: its weights, gradient, unit direction and mean on the GPU) at micro_batch 1 and the config's own, for
  responses of 1k, 4k and 8k tokens (up to the model's max_new_tokens) after the prompt allowance:
  `max_memory_allocated` and `max_memory_reserved` against probe_settings.probe_memory. Where the whole model's
  estimate is beyond this GPU, the model keeps the most layers whose largest case fits (the estimate is linear in the
  layers; the other terms, one layer's and the logit chunk's, are the whole model's), and the table says so.
- Host: the peak RSS of the gradient accumulation over two replicas (probe_shards.summed_gradient on ("cuda:0",
  "cuda:0"): the threads and the one host buffer) against probe_settings.round_host_memory for a round with no engine.
- The GPU's total memory against each shipped config's declared gpu_memory_gb and what the dry run counts of it.

`--reduced` runs the same code on the CPU at toy sizes (the architectures shrunk, 16- and 32-token responses, the
GPU-only columns empty) so that CI keeps it working (tests/test_gpu_calibrate.py); `--out` writes the rows as JSON.
Usage: python tests/gpu/calibrate.py [--reduced] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from dataflex_rl.backends.verl import probe_gradients, probe_shards  # noqa: E402
from dataflex_rl.backends.verl.gpu_memory import release_cached  # noqa: E402
from dataflex_rl.backends.verl.overrides import DEFAULT_PROMPT_TOKENS  # noqa: E402
from dataflex_rl.backends.verl.probe_gradients import GroupTokens  # noqa: E402
from dataflex_rl.backends.verl.gpu_types import usable_gib  # noqa: E402
from dataflex_rl.backends.verl.probe_settings import GIB, ModelShape, probe_memory, round_host_memory  # noqa: E402

# (config file, model key, transformers config class) of every shipped model that declares a probe
CASES = (("config/campaigns/gradalign_verl.yaml", "qwen3-8b-base", "Qwen3Config"),
         ("config/campaigns/gradalign_verl.yaml", "qwen2.5-math-1.5b", "Qwen2Config"))
# the configs whose declared GPU memory the GPU's own is compared with
DECLARING = ("config/campaigns/gradalign_verl.yaml", "config/paper.yaml", "config/one_gpu.yaml")
RESPONSE_TOKENS = (1024, 4096, 8192)
FIT = 0.85  # of the GPU's memory, the most a case's estimate may take (the allocator's rounding beside it)
REDUCED = {"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "vocab_size": 512,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}


@dataclass(frozen=True)
class Model:
    """A shipped model as the calibration builds it: its architecture (config.json's keys), its probe's micro_batch,
    its response cap (max_new_tokens) and the prompt allowance."""

    name: str
    config_class: str
    architecture: dict
    micro_batch: int
    max_new_tokens: int
    prompt_tokens: int


def _yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text()) or {}


def shipped_models(reduced: bool) -> list[Model]:
    """CASES as their configs declare them (the paper config under the campaign for the study's lengths); `reduced`:
    the architectures shrunk to REDUCED, 16- and 32-token responses after 8 prompt tokens."""
    paper = _yaml("config/paper.yaml")
    models = []
    for path, key, config_class in CASES:
        config = _yaml(path)
        entry = config["models"][key]
        study_tokens = (config.get("training") or {}).get("max_new_tokens") or paper["training"]["max_new_tokens"]
        tokens = (entry.get("training") or {}).get("max_new_tokens") or study_tokens
        architecture = dict(entry["architecture"])
        if reduced:
            architecture = dict(REDUCED)
        models.append(Model(key, config_class, architecture, int(entry["probe"]["micro_batch"]),
                            32 if reduced else int(tokens), 8 if reduced else DEFAULT_PROMPT_TOKENS))
    return models


def _config(model: Model, layers: int | None = None):
    import transformers

    keys = {**model.architecture, **({"num_hidden_layers": layers} if layers else {})}
    return getattr(transformers, model.config_class)(**keys, tie_word_embeddings=False, use_cache=False,
                                                     attn_implementation="sdpa")


def parameter_count(model: Model, layers: int) -> int:
    """The parameters of `model` at `layers` layers, built on torch's meta device (nothing allocated)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        built = AutoModelForCausalLM.from_config(_config(model, layers))
    return sum(p.numel() for p in built.parameters())


def estimate(model: Model, layers: int, micro_batch: int, response_tokens: int):
    shape = replace(ModelShape.of(model.architecture), layers=layers)
    return probe_memory(parameter_count(model, layers), shape, micro_batch, model.prompt_tokens, response_tokens)


def lengths(model: Model, reduced: bool) -> list[int]:
    if reduced:
        return [16, 32]
    return sorted({min(tokens, model.max_new_tokens) for tokens in RESPONSE_TOKENS})


def layers_that_fit(model: Model, total: int | None) -> int:
    """The model's own layers, or the most whose largest case's estimate is within FIT of the GPU's `total` bytes."""
    layers = model.architecture["num_hidden_layers"]
    if total is None:
        return layers
    largest = max(lengths(model, False))
    while layers > 1 and estimate(model, layers, model.micro_batch, largest).total > FIT * total:
        layers -= 1
    return layers


def build(model: Model, layers: int, device: str):
    """A random-weight bf16 causal LM of the model's architecture at `layers` layers, built on `device`."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(_config(model, layers), dtype=torch.bfloat16).eval()


def one_group(model: Model, micro_batch: int, response_tokens: int) -> tuple[list[GroupTokens], torch.Tensor]:
    """One prompt of the prompt allowance with 2 × micro_batch responses of `response_tokens` each (two micro-batches:
    the allocator's reuse between them counts), rewards alternating 1, 0 (no zero-advantage group)."""
    generator = torch.Generator().manual_seed(micro_batch * 100_003 + response_tokens)
    vocab = model.architecture["vocab_size"]
    prompt = tuple(torch.randint(1, vocab, (model.prompt_tokens,), generator=generator).tolist())
    responses = tuple(tuple(torch.randint(1, vocab, (response_tokens,), generator=generator).tolist())
                      for _ in range(2 * micro_batch))
    rewards = torch.tensor([[float(k % 2 == 0) for k in range(2 * micro_batch)]])
    return [GroupTokens(prompt, responses)], rewards


def measure_backward(hf_model, model: Model, layers: int, micro_batch: int, response_tokens: int,
                     device: str) -> dict:
    """One group's probe backward (group_alignment) on `hf_model`: its peak allocated and reserved bytes (CUDA) and
    seconds, beside probe_memory's estimate and its terms."""
    groups, rewards = one_group(model, micro_batch, response_tokens)
    size = sum(p.numel() for p in hf_model.parameters())
    direction = torch.nn.functional.normalize(torch.randn(size, generator=torch.Generator().manual_seed(1)), dim=0)
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    probe_gradients.group_alignment(hf_model, groups, rewards, direction.to(device), normalise_candidates=True,
                                    micro_batch=micro_batch)
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    guess = estimate(model, layers, micro_batch, response_tokens)
    row = {"model": model.name, "layers": layers, "of_layers": model.architecture["num_hidden_layers"],
           "micro_batch": micro_batch, "prompt_tokens": model.prompt_tokens, "response_tokens": response_tokens,
           "seconds": round(seconds, 2), "estimate_bytes": guess.total, "estimate_terms_bytes": asdict(guess),
           "allocated_bytes": torch.cuda.max_memory_allocated() if cuda else None,
           "reserved_bytes": torch.cuda.max_memory_reserved() if cuda else None}
    if cuda:
        row["allocated_over_estimate"] = row["allocated_bytes"] / guess.total
        row["reserved_over_estimate"] = row["reserved_bytes"] / guess.total
    return row


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux: clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def measure_host(model: Model, layers: int, devices: tuple[str, ...], response_tokens: int) -> dict:
    """The host's peak RSS over probe_shards.summed_gradient of one group on a replica per `devices`, from before the
    model was built (so it counts the model on the host), against round_host_memory with no engine."""
    import gc

    gc.collect()
    _reset_peak_rss()
    before = _status_kib("VmRSS") * 1024
    hf_model = build(model, layers, "cpu")
    groups, rewards = one_group(model, 1, response_tokens)
    with probe_shards.replicas(hf_model, devices) as replicas:
        probe_shards.summed_gradient(replicas, groups, rewards, micro_batch=1)
    peak = _status_kib("VmHWM") * 1024 - before
    size = sum(p.numel() for p in hf_model.parameters())
    formula = round_host_memory(size, engines=0)
    del hf_model
    return {"model": model.name, "layers": layers, "parameters": size, "devices": list(devices),
            "peak_rss_bytes": peak, "estimate_bytes": formula.total, "estimate_terms_bytes": asdict(formula),
            "peak_over_estimate": peak / formula.total}


def gpu_totals() -> list[dict]:
    """Each CUDA device's total memory, as torch reports it, beside what each shipped config declares and what the
    dry run and the job's check count of that declaration (gpu_types.usable_gib)."""
    rows = []
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        declared = []
        for path in DECLARING:
            for key, entry in (_yaml(path).get("models") or {}).items():
                declared_gb = ((entry or {}).get("probe") or {}).get("gpu_memory_gb") if isinstance(entry, dict) else None
                if declared_gb:
                    counted = usable_gib(declared_gb)
                    declared.append({"config": path, "model": key, "gpu_memory_gb": declared_gb,
                                     "counted_gib": counted, "within_this_gpu": counted * GIB <= properties.total_memory})
        rows.append({"device": index, "name": properties.name, "total_mib": properties.total_memory / (1 << 20),
                     "total_gib": properties.total_memory / GIB, "declared": declared})
    return rows


def size(count: int) -> str:
    """Bytes in GiB from 1 GiB up, else MiB (the reduced form's sizes)."""
    return f"{count / GIB:.2f} GiB" if count >= GIB else f"{count / (1 << 20):.2f} MiB"


def _terms(terms: dict) -> str:
    return ", ".join(f"{name} {size(count)}" for name, count in terms.items())


def _print_backward(row: dict) -> None:
    measured = ("" if row["allocated_bytes"] is None else
                f"allocated {size(row['allocated_bytes'])} ({row['allocated_over_estimate']:.2f}×), reserved "
                f"{size(row['reserved_bytes'])} ({row['reserved_over_estimate']:.2f}×), ")
    print(f"backward {row['model']} layers {row['layers']}/{row['of_layers']} micro_batch {row['micro_batch']} "
          f"{row['prompt_tokens']}+{row['response_tokens']} tokens: {measured}estimate {size(row['estimate_bytes'])} "
          f"({_terms(row['estimate_terms_bytes'])}), {row['seconds']} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reduced", action="store_true", help="toy sizes on the CPU (CI)")
    parser.add_argument("--out", type=Path, help="write calibration.json here")
    args = parser.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.reduced
    device = "cuda:0" if cuda else "cpu"
    total = torch.cuda.get_device_properties(0).total_memory if cuda else None
    result: dict = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "reduced": args.reduced,
                    "torch": torch.__version__, "backward": [], "host": [], "gpus": gpu_totals() if cuda else []}
    for row in result["gpus"]:
        print(f"GPU {row['device']} {row['name']}: {row['total_mib']:.0f} MiB = {row['total_gib']:.2f} GiB; "
              + "; ".join(f"{d['model']} ({d['config']}) declares {d['gpu_memory_gb']:g} GB, counted as "
                          f"{d['counted_gib']:.1f} GiB: {'within' if d['within_this_gpu'] else 'BEYOND'} this GPU"
                          for d in row["declared"]), flush=True)
    models = shipped_models(args.reduced)
    for model in models:
        layers = layers_that_fit(model, total)
        hf_model = build(model, layers, device)
        for micro_batch in sorted({1, model.micro_batch}):
            for tokens in lengths(model, args.reduced):
                row = measure_backward(hf_model, model, layers, micro_batch, tokens, device)
                result["backward"].append(row)
                _print_backward(row)
        del hf_model
        release_cached([device])
    smallest = min(models, key=lambda m: parameter_count(m, m.architecture["num_hidden_layers"]))
    devices = (device, device)
    host = measure_host(smallest, smallest.architecture["num_hidden_layers"], devices, lengths(smallest,
                                                                                               args.reduced)[0])
    result["host"].append(host)
    print(f"host {host['model']} ({host['parameters']:,} parameters, replicas on {','.join(devices)}): peak RSS "
          f"{size(host['peak_rss_bytes'])}, estimate {size(host['estimate_bytes'])} ({host['peak_over_estimate']:.2f}×; "
          f"{_terms(host['estimate_terms_bytes'])})", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "calibration.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
