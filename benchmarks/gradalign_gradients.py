"""Time GradAlign's per-group gradients: one backward per group (`loop`) against torch.func `vmap(grad)` (`vmap`).

A randomly initialised model of the embedded default's shape (hidden 128, 4 layers, vocab 1024) samples K rollouts of
≤ max_new_tokens for N prompts of ~20 tokens; rewards are seeded coin flips. The two methods run alternately, each
repeat timing both, and the medians are printed beside the largest |loop − vmap| entry. One thread, like a job.
    python benchmarks/gradalign_gradients.py [--groups 320] [--rollouts 8] [--max-new-tokens 8] [--repeats 3]
    python benchmarks/gradalign_gradients.py --smoke      # a small shape and 8 groups: seconds
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from dataflex_rl.backends.embedded.generation import decode
from dataflex_rl.backends.embedded.model import build_model, train_tokenizer
from dataflex_rl.backends.embedded.settings import ModelShape
from dataflex_rl.prompt_selection.gradients import ParameterLayout, group_gradients
from dataflex_rl.prompt_selection.scores import zero_advantage

DEFAULT = ModelShape(hidden_size=128, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=512, vocab_size=1024)
SMOKE = ModelShape(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=64, vocab_size=384)


def _rollout(shape: ModelShape, groups: int, rollouts: int, max_new_tokens: int):
    texts = [f"Calculate {i} plus {3 * i + 1}, then subtract {i % 7}.\nAnswer: {4 * i + 1 - i % 7}"
             for i in range(3000)]
    tokenizer = train_tokenizer(texts, shape.vocab_size)
    model = build_model(shape, tokenizer, seed=0).eval()
    prompts = [tokenizer(text.split("Answer:")[0] + "Answer:").input_ids for text in texts[:groups]]
    generated = decode(model, prompts, max_new_tokens=max_new_tokens, eos_id=tokenizer.eos_token_id,
                       pad_id=tokenizer.pad_token_id, repeats=rollouts, generator=torch.Generator().manual_seed(0))
    rewards = torch.randint(0, 2, (groups, rollouts), generator=torch.Generator().manual_seed(1)).float()
    return model, generated, rewards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=320, help="N prompt groups (the default's candidates M)")
    parser.add_argument("--rollouts", type=int, default=8, help="K rollouts per group (k_r)")
    parser.add_argument("--max-new-tokens", type=int, default=8)
    parser.add_argument("--chunk", type=int, default=8, help="groups per vmap call")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repeats of both methods")
    parser.add_argument("--smoke", action="store_true", help="a small shape, 8 groups, one repeat")
    args = parser.parse_args()
    shape = SMOKE if args.smoke else DEFAULT
    groups, repeats = (8, 1) if args.smoke else (args.groups, args.repeats)
    torch.set_num_threads(1)
    model, generated, rewards = _rollout(shape, groups, args.rollouts, args.max_new_tokens)
    live = int((~zero_advantage(rewards)).sum())
    print(f"{ParameterLayout.of(model).size:,} parameters; N={groups} groups ({live} with non-zero advantages), "
          f"K={args.rollouts}, prompt {generated.prompt_ids.shape[1]} + response {generated.response_ids.shape[1]} "
          f"tokens (mean response {generated.response_mask.sum(-1).float().mean():.1f}); vmap chunk {args.chunk}")
    seconds: dict[str, list[float]] = {"loop": [], "vmap": []}
    rows = {}
    for _ in range(repeats):
        for method in seconds:
            start = time.perf_counter()
            rows[method] = group_gradients(model, generated, rewards, method=method, chunk=args.chunk)
            seconds[method].append(time.perf_counter() - start)
    loop, fast = (statistics.median(seconds[m]) for m in ("loop", "vmap"))
    print(f"loop {loop:.2f} s, vmap {fast:.2f} s (median of {repeats}; loop/vmap = {loop / fast:.2f}); "
          f"max |loop − vmap| = {(rows['loop'] - rows['vmap']).abs().max():.2e}, "
          f"max |loop| = {rows['loop'].abs().max():.2e}")


if __name__ == "__main__":
    main()
