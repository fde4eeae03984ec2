"""Remove training prompts that copy an evaluation item, exactly or nearly.

A benchmark item that leaks into the training corpus inflates every method's score on it, so the comparison would
measure memorisation. Two tests run on a normalised text:

* exact: the normalised texts hash to the same blake2b digest (catches case, whitespace, punctuation edits and
  multiple-choice items whose options were reordered or relabelled);
* near: MinHash-LSH over word 3-gram shingles proposes candidates, and a candidate is flagged only if the exact
  Jaccard of the two shingle sets reaches the threshold AND both texts contain the same multiset of numbers.

The number test exists because procedural generators (reasoning-gym) emit siblings from one template that differ only
in their numbers; they share most shingles, yet each is a different problem and must stay in the corpus.
"""
from __future__ import annotations

import hashlib
import os
import re
import unicodedata
import zlib
from collections import Counter
from typing import Sequence

import pandas as pd
from datasketch import LeanMinHash, MinHash, MinHashLSH

from dataflex_rl.atomic import write_json, write_parquet

NGRAM = 3
MAX_EXAMPLES = 20

# A multiple-choice label at the start of a line: "A)", "(B)", "C.", "D:" (A-J covers MMLU-Pro's ten options).
_OPTION_LABEL = re.compile(r"^\s*\(?([a-j])[).:]\s+")
# Arithmetic operators change the problem ("5 + 3" vs "5 - 3"), so they survive as tokens instead of being dropped.
_OPERATOR = re.compile(r"([+\-*/=<>^%×÷])")
# "-" is a minus only beside a number ("5 - 3", "-7"); elsewhere it is a hyphen or dash ("well-known", "text -- the").
_DASH = re.compile(r"(?<!\d)(?<!\d )-+(?! ?\d)")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# Every other non-word character becomes a space, except a decimal point between digits ("3.5" is not "35").
_OTHER_PUNCT = re.compile(r"(?!(?<=\d)\.(?=\d))[^\w\s+\-*/=<>^%×÷]|_")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def normalize_text(text: str) -> str:
    """Canonical form under which trivially edited copies compare equal.

    NFKC + casefold; option labels stripped and option lines sorted after the stem, so that reordered or relabelled
    choices give the same text; apostrophes deleted ("don't" = "dont"); other punctuation dropped except arithmetic
    operators (a "-" counts as minus only beside a number) and decimal points; whitespace collapsed.
    """
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2212", "-")
    stem, options = [], []
    for line in text.splitlines():
        label = _OPTION_LABEL.match(line)
        if label:
            options.append(line[label.end():].strip())
        else:
            stem.append(line)
    text = "\n".join(stem + sorted(options))
    text = text.replace("'", "").replace("\u2019", "")
    text = _DASH.sub(" ", text)
    text = _THOUSANDS_COMMA.sub("", text)
    text = _OPERATOR.sub(r" \1 ", text)
    text = _OTHER_PUNCT.sub(" ", text)
    return " ".join(text.split())


class _Texts:
    """Normalised texts with what both tests need: digest, number multiset and word-shingle list."""

    def __init__(self, prompts):
        self.norm = [normalize_text(str(p)) for p in prompts]
        self.digest = [hashlib.blake2b(t.encode(), digest_size=16).digest() for t in self.norm]
        self.numbers = [tuple(sorted(_NUMBER.findall(t))) for t in self.norm]
        self.shingles = [_shingles(t) for t in self.norm]


def _shingles(norm: str) -> list[bytes]:
    """Word 3-grams; a text shorter than 3 words is one shingle of all its words (such texts are, in practice, only
    ever matched by the exact test: one changed word already moves a short text below any useful threshold)."""
    words = norm.encode().split()
    if len(words) < NGRAM:
        return [b" ".join(words)] if words else []
    return list(map(b" ".join, zip(*(words[i:] for i in range(NGRAM)))))


def _sketches(shingle_lists: list[list[bytes]], num_perm: int, seed: int) -> list[LeanMinHash]:
    # crc32 is a C call per shingle (sha1, the default, costs a Python wrapper each); MinHash's affine32 scheme
    # re-mixes the input hash with the MurmurHash3 finalizer, and candidates are re-checked exactly below.
    bulk = MinHash.bulk(shingle_lists, num_perm=num_perm, seed=seed, hashfunc=zlib.crc32)
    return [LeanMinHash(m) for m in bulk]


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def decontaminate(
    corpus: pd.DataFrame,
    benchmarks: pd.DataFrame,
    threshold: float = 0.8,
    num_perm: int = 128,
    seed: int = 1,
) -> tuple[pd.DataFrame, dict]:
    """Drop corpus rows whose prompt copies a benchmark prompt; return (kept rows, JSON-serialisable audit).

    The kept rows keep the corpus's order and columns. Each flagged row is attributed to one benchmark item: the first
    exact match, else the near candidate of highest Jaccard (ties to the earlier benchmark row), so per-benchmark counts
    sum to the number removed.
    """
    bench = _Texts(benchmarks["prompt"].tolist())
    rows = _Texts(corpus["prompt"].tolist())
    bench_names = benchmarks["benchmark"].tolist()

    exact_index: dict[bytes, int] = {}
    for j, (digest, norm) in enumerate(zip(bench.digest, bench.norm)):
        if norm:  # an empty prompt carries no content to leak
            exact_index.setdefault(digest, j)

    # match[i] = (benchmark row, kind, jaccard)
    match: dict[int, tuple[int, str, float]] = {}
    for i, digest in enumerate(rows.digest):
        if rows.norm[i] and digest in exact_index:
            match[i] = (exact_index[digest], "exact", 1.0)

    pending = [i for i in range(len(rows.norm)) if i not in match and rows.shingles[i]]
    if pending and bench.norm:
        # The LSH only proposes candidates, all re-checked exactly, so it is tuned for recall: at threshold 0.8 and 128
        # permutations, datasketch's default weights propose a pair of Jaccard 0.8 (0.85) with p = 0.40 (0.69);
        # weights (0.1, 0.9) with p = 0.87 (0.97), for ~10% more run time.
        lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=(0.1, 0.9))
        bench_sets = [set(s) for s in bench.shingles]
        with lsh.insertion_session() as session:
            for j, sketch in enumerate(_sketches(bench.shingles, num_perm, seed)):
                if bench.shingles[j]:
                    session.insert(j, sketch, check_duplication=False)
        for i, sketch in zip(pending, _sketches([rows.shingles[i] for i in pending], num_perm, seed)):
            row_set, best = set(rows.shingles[i]), None
            for j in sorted(lsh.query(sketch)):
                if rows.numbers[i] != bench.numbers[j]:
                    continue
                score = _jaccard(row_set, bench_sets[j])
                if score >= threshold and (best is None or score > best[2]):
                    best = (j, "near", score)
            if best is not None:
                match[i] = best

    flagged = sorted(match)
    kinds = Counter(kind for _, kind, _ in match.values())
    per_benchmark = {name: 0 for name in bench_names}
    for j, _, _ in match.values():
        per_benchmark[bench_names[j]] += 1

    corpus_ids, corpus_prompts = corpus["id"].tolist(), corpus["prompt"].tolist()
    bench_ids, bench_prompts = benchmarks["id"].tolist(), benchmarks["prompt"].tolist()
    examples = [
        {
            "corpus_id": corpus_ids[i],
            "prompt": corpus_prompts[i],
            "benchmark": bench_names[match[i][0]],
            "benchmark_id": bench_ids[match[i][0]],
            "benchmark_prompt": bench_prompts[match[i][0]],
            "kind": match[i][1],
            "jaccard": round(match[i][2], 4),
        }
        for i in flagged[:MAX_EXAMPLES]
    ]
    keep = [i not in match for i in range(len(corpus))]
    kept = corpus.loc[keep].reset_index(drop=True)
    audit = {
        "params": {"threshold": threshold, "num_perm": num_perm, "seed": seed, "ngram": NGRAM},
        "counts": {
            "corpus_rows": len(corpus),
            "exact_hits": kinds["exact"],
            "near_hits": kinds["near"],
            "removed": len(flagged),
            "kept": len(kept),
        },
        "per_benchmark": per_benchmark,
        "examples": examples,
    }
    return kept, audit


def decontaminate_files(
    corpus_path: str | os.PathLike,
    benchmark_paths: Sequence[str | os.PathLike],
    out_corpus: str | os.PathLike,
    out_audit: str | os.PathLike,
    **params,
) -> dict:
    """File-level entry for the corpus rule: parquet in (one file per benchmark), cleaned parquet and JSON audit out
    (both written atomically)."""
    benchmarks = pd.concat([pd.read_parquet(path) for path in benchmark_paths], ignore_index=True)
    kept, audit = decontaminate(pd.read_parquet(corpus_path), benchmarks, **params)
    write_parquet(out_corpus, kept)
    write_json(out_audit, audit)
    return audit
