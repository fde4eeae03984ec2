"""Decontamination speed: the containment detector (dataflex_rl/decontam.py) against the MinHash-LSH Jaccard detector
it replaced, on 15k training prompts x 5k benchmark items, then the containment detector alone on 15k to 1M prompts.

The texts are synthetic (seeded): items of 15-60 words drawn from a 5,000-word vocabulary with numbers, prompts of the
same kind, one in ten a copy of an item wrapped in an instruction. Each measurement runs in its own process, so that
its peak RSS is its own; the two detectors alternate, and each figure is the median of the repeats.

    python benchmarks/decontamination.py            # 3 repeats, scaling to 1M prompts
    python benchmarks/decontamination.py --smoke    # one small pass of each, to prove the script runs

The MinHash side needs `datasketch` (pip install datasketch); it is not a dependency of the package.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time

import pandas as pd

VOCABULARY = 5000
WRAPPER = "Below is an instruction. Solve it, answer with the final result only.\n\n{item}\n\nThink step by step."


def _text(rng: random.Random) -> str:
    words = [f"w{rng.randrange(VOCABULARY)}" if rng.random() < 0.85 else str(rng.randrange(1000))
             for _ in range(rng.randrange(15, 60))]
    return " ".join(words) + "?"


def synthetic(n_prompts: int, n_items: int, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(corpus, benchmark items): every tenth prompt holds an item, wrapped."""
    rng = random.Random(seed)
    items = [_text(rng) for _ in range(n_items)]
    prompts = [WRAPPER.format(item=rng.choice(items)) if k % 10 == 0 else _text(rng) for k in range(n_prompts)]
    corpus = pd.DataFrame({"id": [f"p{k}" for k in range(n_prompts)], "domain": "math", "source": "synthetic",
                           "prompt": prompts, "answer": "0", "answer_format": "int"})
    benchmarks = pd.DataFrame({"benchmark": "synthetic", "id": [f"b{k}" for k in range(n_items)], "prompt": items,
                               "answer": "0", "domain": "math"})
    return corpus, benchmarks


def minhash_jaccard(corpus: pd.DataFrame, benchmarks: pd.DataFrame, threshold: float = 0.8,
                    num_perm: int = 128) -> int:
    """The replaced detector, for comparison: MinHash-LSH over word 3-gram shingles proposes pairs, and a pair counts
    when the exact Jaccard of the shingle sets reaches the threshold and the number multisets agree. Returns the number
    of prompts flagged."""
    from datasketch import MinHash, MinHashLSH

    from dataflex_rl.decontam import normalize_text

    def shingles(text: str) -> set[bytes]:
        words = normalize_text(text).split()
        return {" ".join(words[i:i + 3]).encode() for i in range(max(len(words) - 2, 1))}

    def numbers(text: str) -> list[str]:
        return sorted(w for w in normalize_text(text).split() if w.replace(".", "", 1).isdigit())

    def signature(grams: set[bytes]) -> MinHash:
        minhash = MinHash(num_perm=num_perm, seed=1)
        minhash.update_batch(list(grams))
        return minhash

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    items = [shingles(t) for t in benchmarks["prompt"]]
    item_numbers = [numbers(t) for t in benchmarks["prompt"]]
    for j, grams in enumerate(items):
        lsh.insert(j, signature(grams))
    flagged = 0
    for text in corpus["prompt"]:
        grams = shingles(text)
        flagged += any(len(grams & items[j]) / len(grams | items[j]) >= threshold and item_numbers[j] == numbers(text)
                       for j in lsh.query(signature(grams)))
    return flagged


def _measure(side: str, n_prompts: int, n_items: int) -> dict:
    from dataflex_rl.decontam import decontaminate

    corpus, benchmarks = synthetic(n_prompts, n_items)
    start = time.perf_counter()
    if side == "containment":
        flagged = decontaminate(corpus, benchmarks)[1]["counts"]["removed"]
    else:
        flagged = minhash_jaccard(corpus, benchmarks)
    return {"side": side, "prompts": n_prompts, "items": n_items, "seconds": time.perf_counter() - start,
            "flagged": flagged, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _run(side: str, n_prompts: int, n_items: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", side, str(n_prompts), str(n_items)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one small pass of each measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        side, n_prompts, n_items = args.worker
        print(json.dumps(_measure(side, int(n_prompts), int(n_items))))
        return

    n_prompts, n_items, repeats = (2000, 500, 1) if args.smoke else (15_000, 5_000, args.repeats)
    steps = [2000, 8000] if args.smoke else [15_000, 62_500, 250_000, 1_000_000]
    runs: dict[str, list[dict]] = {"containment": [], "minhash": []}
    for r in range(repeats):
        for side in (["containment", "minhash"] if r % 2 == 0 else ["minhash", "containment"]):
            runs[side].append(_run(side, n_prompts, n_items))
    print(f"{n_prompts} prompts x {n_items} items, median of {repeats} (alternating):")
    print(f"| detector | seconds | peak RSS (MiB) | prompts flagged (of {n_prompts // 10} planted) |")
    print("|---|---|---|---|")
    for side, measured in runs.items():
        print(f"| {side} | {statistics.median(m['seconds'] for m in measured):.2f} | "
              f"{statistics.median(m['peak_rss_mib'] for m in measured):.0f} | {measured[0]['flagged']} |")
    ratio = statistics.median(m["seconds"] for m in runs["minhash"]) / statistics.median(
        m["seconds"] for m in runs["containment"])
    print(f"containment is {ratio:.1f}x as fast as MinHash-LSH\n")
    print(f"containment detector, {n_items} items, one run per step:")
    print("| prompts | seconds | prompts per second | peak RSS (MiB) |")
    print("|---|---|---|---|")
    for n in steps:
        m = _run("containment", n, n_items)
        print(f"| {n:,} | {m['seconds']:.2f} | {n / m['seconds']:,.0f} | {m['peak_rss_mib']:.0f} |")


if __name__ == "__main__":
    main()
