"""Decontamination's candidate search: the containment detector's prefix index (dataflex_rl/corpus/decontam.py) against
MinHash-LSH (datasketch) as the candidate filter in front of the same exact containment check, on corpora that grow
from the paper's size to a million prompts, at equal recall on planted copies.

The benchmark items are the real ones the tests hold (tests/planted_copies.py: the fixtures, and the shared public
copies when present) plus 250 procedural items of each of the paper's 12 sources: ~5.5k items. The corpus is N
prompts drawn from the paper's 12 generators (N/12 each, seeded, repeats kept: the generators' problem space is smaller
than a million) plus one planted copy of every item, its edit kind cycling through tests/planted_copies.py's EDITS
(wrapped, prefixed, re-cased, a word dropped or changed, in markup, ...). Recall is the share of the planted copies
flagged; "same verdicts" says whether every prompt's verdict (its item, kind and scores) equals containment's.

The three candidate searches, each followed by _ItemIndex's exact check (so they can only lose hits, never add any):
* containment: the inverted index over each item's rarest n-grams, which provably proposes every item that can pass;
* lsh-jaccard: datasketch MinHashLSH over the items' word 3-gram sets, queried with each prompt's MinHash. It
  estimates Jaccard, which a long wrapper divides down, so its threshold must sit below the smallest Jaccard of a
  true hit (LSH_JACCARD_THRESHOLD, chosen as the highest that keeps the verdicts on the planted copies);
* lsh-ensemble: datasketch MinHashLSHEnsemble, the LSH for containment, over the prompts' n-gram sets (it answers
  |query & set| / |query|, so the items are the queries), LSH_ENSEMBLE_THRESHOLD likewise.

Each measurement runs in its own process (its peak RSS is its own, its corpus drawn inside it and not timed); at the
paper's size the three alternate for --repeats rounds and the figures are medians; the scaling steps run once each.

    python benchmarks/decontamination.py            # 15k prompts, 3 rounds; then the paper's 60k once
    python benchmarks/decontamination.py --large    # scaling steps 60k, 240k and 1M prompts (an hour and more)
    python benchmarks/decontamination.py --steps 240000 --sides lsh-jaccard   # steps and sides of your choice
    python benchmarks/decontamination.py --smoke    # one small pass of each, to prove the script runs

The LSH sides need `datasketch` (pip install datasketch); it is not a dependency of the package.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from dataflex_rl.item_sources.registry import get_source  # noqa: E402
from dataflex_rl.item_sources.sources import generate_items  # noqa: E402
from dataflex_rl.corpus.decontam import _grams, _ItemIndex, _normal_forms  # noqa: E402
from planted_copies import EDITS, PROCEDURAL_SOURCES, planted, procedural_items, real_items  # noqa: E402

THRESHOLD = 0.8  # the default study's containment threshold
NUM_PERM = 128
LSH_JACCARD_THRESHOLD = 0.03  # 0.05 (32 bands of 1 row) already loses a planted copy, 0.1 thirteen
LSH_ENSEMBLE_THRESHOLD = 0.5  # 0.6 loses five planted copies, 0.8 sixty-three
SIDES = ("containment", "lsh-jaccard", "lsh-ensemble")


def benchmark_items() -> pd.DataFrame:
    return pd.concat([real_items(), procedural_items(250)], ignore_index=True)


def corpus(n_prompts: int, items: pd.DataFrame, seed: int = 1) -> pd.DataFrame:
    """N generator prompts, then one planted copy of each item (source "planted")."""
    per_source = -(-n_prompts // len(PROCEDURAL_SOURCES))
    drawn = [row["prompt"] for name in PROCEDURAL_SOURCES
             for row in generate_items(get_source(name), per_source, seed, "train")][:n_prompts]
    kinds = list(EDITS)
    copies = pd.concat([planted(items.iloc[k::len(kinds)], kind) for k, kind in enumerate(kinds)], ignore_index=True)
    return pd.DataFrame({"prompt": drawn + copies["prompt"].tolist(),
                         "planted": [False] * len(drawn) + [True] * len(copies)})


def _grams_of(prompt: str) -> frozenset[str]:
    return _grams(_normal_forms(prompt)[1])


class _JaccardLSHIndex(_ItemIndex):
    """Candidates: the items whose MinHash shares a band with the prompt's (MinHashLSH over the items)."""

    def __init__(self, prompts, threshold):
        from datasketch import MinHash, MinHashLSH
        super().__init__(prompts, threshold)
        self._permutations = MinHash(num_perm=NUM_PERM, seed=1).permutations
        self._lsh = MinHashLSH(threshold=LSH_JACCARD_THRESHOLD, num_perm=NUM_PERM)
        for j, grams in enumerate(self.grams):
            if grams:
                self._lsh.insert(j, self._signature(grams))

    def _signature(self, grams):
        from datasketch import MinHash
        signature = MinHash(num_perm=NUM_PERM, permutations=self._permutations, scheme="affine32")
        signature.update_batch([g.encode() for g in grams])
        return signature

    def _candidates(self, grams):
        return sorted(self._lsh.query(self._signature(grams))) if grams else []


class _EnsembleLSHIndex(_ItemIndex):
    """Candidates: the items whose MinHash, as a query, finds the prompt in a MinHashLSHEnsemble over the prompts."""

    def __init__(self, prompts, threshold):
        super().__init__(prompts, threshold)
        self._proposed: dict[frozenset[str], set[int]] = {}

    def propose(self, prompt_grams: list[frozenset[str]]) -> None:
        from datasketch import MinHash, MinHashLSHEnsemble
        keyed = [grams for grams in prompt_grams if grams]
        signatures = MinHash.bulk([[g.encode() for g in grams] for grams in keyed], num_perm=NUM_PERM, seed=1)
        ensemble = MinHashLSHEnsemble(threshold=LSH_ENSEMBLE_THRESHOLD, num_perm=NUM_PERM, num_part=16)
        ensemble.index((k, signature, len(grams)) for k, (signature, grams) in enumerate(zip(signatures, keyed)))
        item_signatures = MinHash.bulk([[g.encode() for g in grams] for grams in self.grams], num_perm=NUM_PERM,
                                       seed=1)
        for j, (signature, grams) in enumerate(zip(item_signatures, self.grams)):
            if grams:
                for k in ensemble.query(signature, len(grams)):
                    self._proposed.setdefault(keyed[k], set()).add(j)

    def _candidates(self, grams):
        return sorted(self._proposed.get(grams, ()))


def _measure(side: str, n_prompts: int) -> dict:
    items = benchmark_items()
    rows = corpus(n_prompts, items)
    prompts = rows["prompt"].tolist()
    start = time.perf_counter()
    cpu = time.process_time()
    index = {"containment": _ItemIndex, "lsh-jaccard": _JaccardLSHIndex,
             "lsh-ensemble": _EnsembleLSHIndex}[side](items["prompt"].tolist(), THRESHOLD)
    if side == "lsh-ensemble":
        index.propose([_grams_of(p) for p in prompts])
    verdicts = [index.match(p) for p in prompts]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    flagged = [v is not None for v in verdicts]
    planted_flags = [f for f, is_planted in zip(flagged, rows["planted"]) if is_planted]
    return {"side": side, "prompts": len(prompts), "items": len(items), "seconds": seconds, "cpu": cpu,
            "flagged": sum(flagged), "planted": len(planted_flags), "planted_flagged": sum(planted_flags),
            "verdicts": hashlib.sha256(repr(verdicts).encode()).hexdigest(),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _run(side: str, n_prompts: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", side, str(n_prompts)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def _row(label: str, m: dict, reference: dict) -> str:
    return (f"| {label} | {m['seconds']:.2f} | {1e6 * m['seconds'] / m['prompts']:.0f} | {m['peak_rss_mib']:.0f} | "
            f"{m['planted_flagged']}/{m['planted']} ({m['planted_flagged'] / m['planted']:.3f}) | {m['flagged']} | "
            f"{'yes' if m['verdicts'] == reference['verdicts'] else 'NO'} |")


HEADER = ("| {first} | seconds | µs per prompt | peak RSS (MiB) | planted copies flagged (recall) | prompts flagged | "
          "same verdicts as containment |\n|---|---|---|---|---|---|---|")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one small pass of each measurement")
    parser.add_argument("--large", action="store_true", help="scaling steps up to 1M prompts")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the side-by-side run (0: none)")
    parser.add_argument("--steps", type=lambda text: [int(n) for n in text.split(",")],
                        help="the scaling steps' prompt counts, comma-separated (instead of the default's or --large's)")
    parser.add_argument("--sides", type=lambda text: text.split(","), default=list(SIDES),
                        help=f"the candidate searches of the scaling steps, comma-separated (of {', '.join(SIDES)})")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        side, n_prompts = args.worker
        print(json.dumps(_measure(side, int(n_prompts))))
        return

    n_prompts, repeats = (2000, 1) if args.smoke else (15_000, args.repeats)
    steps = [8000] if args.smoke else args.steps or [60_000] + ([240_000, 1_000_000] if args.large else [])
    if repeats:
        _side_by_side(n_prompts, repeats)
    print("\nscaling, one run per step and side:")
    print(HEADER.format(first="prompts drawn, side"))
    for n in steps:
        reference = _run("containment", n)
        print(_row(f"{n:,}, containment", reference, reference), flush=True)
        for side in SIDES[1:]:
            if side in args.sides:
                print(_row(f"{n:,}, {side}", _run(side, n), reference), flush=True)


def _side_by_side(n_prompts: int, repeats: int) -> None:
    """The three searches in rotating order for `repeats` rounds: medians and their ratios to containment."""
    runs: dict[str, list[dict]] = {side: [] for side in SIDES}
    for r in range(repeats):
        for side in SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]:
            runs[side].append(_run(side, n_prompts))
    median = {side: {**measured[0], **{key: statistics.median(m[key] for m in measured)
                                       for key in ("seconds", "cpu", "peak_rss_mib")}}
              for side, measured in runs.items()}
    first = median["containment"]
    print(f"{first['prompts']:,} prompts ({n_prompts:,} drawn + {first['planted']:,} planted) x {first['items']:,} "
          f"items, median of {repeats} rounds (rotating order); LSH: {NUM_PERM} permutations, Jaccard threshold "
          f"{LSH_JACCARD_THRESHOLD}, ensemble containment threshold {LSH_ENSEMBLE_THRESHOLD}")
    print(HEADER.format(first="candidate search"))
    for side in SIDES:
        print(_row(side, median[side], first))
    for side in SIDES[1:]:
        print(f"{side} / containment: time x {median[side]['seconds'] / first['seconds']:.2f}, "
              f"CPU x {median[side]['cpu'] / first['cpu']:.2f}, peak RSS x "
              f"{median[side]['peak_rss_mib'] / first['peak_rss_mib']:.2f}")

if __name__ == "__main__":
    main()
