"""Time regenerating every table and figure from a 591-run record file (the study's goal: seconds).

591 runs = 3 models × (1 untrained + 14 methods × 14 seeds), 12 paper benchmarks each (7,092 record rows); methods are
compared with `baseline`. Each measurement runs in a fresh process (as the `tables` job does) and times reading the
records plus writing every table and figure.

    python benchmarks/tables_from_records.py [--resamples 9999] [--keep DIR]
    python benchmarks/tables_from_records.py --against REV [--repeats 5]

With `--against`, the package as of git revision REV is extracted into a temporary directory and the two sides run
alternately, `--repeats` times each; the script prints both sides' medians of wall-clock and of CPU seconds (the
process's own, which a machine shared with other jobs inflates less) and their ratios, and checks that both sides wrote
the same files with the same bytes.
"""
from __future__ import annotations

import argparse
import filecmp
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = [f"model-{i}" for i in range(3)]
METHODS = ["baseline"] + [f"method-{i}" for i in range(13)]
SEEDS = list(range(1, 15))


def regenerate_once(out: Path, resamples: int) -> dict[str, float | int]:
    """Simulate the records, write them, then time reading them back and regenerating everything under `out`."""
    from dataflex_rl.artefacts.atomic import write_parquet
    from dataflex_rl.records.imported import load_records
    from dataflex_rl.report.regenerate import regenerate
    from dataflex_rl.stats.simulate import simulate_records

    records = simulate_records(MODELS, METHODS, SEEDS, rng=0)
    runs = records["run_id"].nunique()
    assert runs == 591, runs
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records.parquet"
        write_parquet(path, records)
        start, cpu_start = time.perf_counter(), time.process_time()
        loaded = load_records(path)
        read = time.perf_counter()
        regenerate(loaded, out, controls={m: "baseline" for m in METHODS[1:]}, bootstrap_resamples=resamples)
        done, cpu_done = time.perf_counter(), time.process_time()
    return {"runs": runs, "rows": len(records), "read": read - start, "regenerate": done - read, "total": done - start,
            "cpu": cpu_done - cpu_start}


def run_side(package_root: Path, out: Path, resamples: int) -> dict[str, float | int]:
    """`regenerate_once` in a fresh interpreter that imports dataflex_rl from `package_root`."""
    env = dict(os.environ, PYTHONPATH=str(package_root))
    result = subprocess.run([sys.executable, __file__, "--once", str(out), "--resamples", str(resamples)],
                            env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def extract_package(revision: str, into: Path) -> Path:
    """The dataflex_rl package as of `revision`, extracted under `into` (a plain copy: no checkout is touched)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision, "dataflex_rl"],
                             capture_output=True, check=True).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def differing_files(a: Path, b: Path) -> list[str]:
    """Relative paths present on one side only or with different bytes."""
    names = {p.relative_to(a) for p in a.rglob("*") if p.is_file()} | {p.relative_to(b) for p in b.rglob("*")
                                                                       if p.is_file()}
    return sorted(str(n) for n in names if not ((a / n).is_file() and (b / n).is_file()
                                                and filecmp.cmp(a / n, b / n, shallow=False)))


def compare(revision: str, repeats: int, resamples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sides = {revision: extract_package(revision, tmp / "old"), "working tree": REPO}
        seconds: dict[str, list[float]] = {side: [] for side in sides}
        cpu: dict[str, list[float]] = {side: [] for side in sides}
        for repeat in range(repeats):
            for side, root in sides.items():
                result = run_side(root, tmp / "out" / side.replace(" ", "_"), resamples)
                seconds[side].append(result["total"])
                cpu[side].append(result["cpu"])
            print(f"repeat {repeat + 1}: " + ", ".join(f"{side} {seconds[side][-1]:.2f} s ({cpu[side][-1]:.2f} s CPU)"
                                                      for side in sides), flush=True)
        for name, measure in (("wall-clock", seconds), ("CPU", cpu)):
            old, new = (statistics.median(measure[side]) for side in sides)
            print(f"median {name} of {repeats} (alternating): {revision} {old:.2f} s, working tree {new:.2f} s; "
                  f"{revision}/working tree = {old / new:.2f}")
        differing = differing_files(tmp / "out" / revision, tmp / "out" / "working_tree")
        files = sum(1 for p in (tmp / "out" / "working_tree").rglob("*") if p.is_file())
        print(f"outputs: {files} files, " + (f"{len(differing)} differ: {differing}" if differing else
                                             "byte-identical on both sides"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=9999, help="paired bootstrap resamples per comparison")
    parser.add_argument("--keep", type=Path, help="write the outputs here instead of a temporary directory")
    parser.add_argument("--against", metavar="REV", help="also time the package as of this git revision, alternating")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per side with --against")
    parser.add_argument("--once", type=Path, help=argparse.SUPPRESS)  # one side's measurement, as JSON
    args = parser.parse_args()

    if args.once:
        print(json.dumps(regenerate_once(args.once, args.resamples)))
    elif args.against:
        compare(args.against, args.repeats, args.resamples)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run_side(REPO, args.keep or Path(tmp) / "tables", args.resamples)
        from dataflex_rl.report.outputs import FIGURES, TABLES

        print(f"{result['runs']} runs, {result['rows']} record rows: {len(TABLES)} tables × 3 formats and "
              f"{len(FIGURES)} figures")
        print(f"read records {result['read']:.2f} s; tables and figures {result['regenerate']:.2f} s; "
              f"total {result['total']:.2f} s ({result['cpu']:.2f} s CPU)")


if __name__ == "__main__":
    main()
