"""Time regenerating every table and figure from a 591-run record file (the study's goal: seconds).

591 runs = 3 models × (1 untrained + 14 methods × 14 seeds), 12 paper benchmarks each (7,092 record rows); methods are
compared with `baseline`. Prints the seconds for reading the records, for the tables and figures, and in total.
    python benchmarks/tables_from_records.py [--resamples 9999] [--keep DIR]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dataflex_rl.atomic import write_parquet
from dataflex_rl.records_import import load_records
from dataflex_rl.report.outputs import FIGURES, TABLES
from dataflex_rl.report.regenerate import regenerate
from dataflex_rl.stats.simulate import simulate_records

MODELS = [f"model-{i}" for i in range(3)]
METHODS = ["baseline"] + [f"method-{i}" for i in range(13)]
SEEDS = list(range(1, 15))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=9999, help="paired bootstrap resamples per comparison")
    parser.add_argument("--keep", type=Path, help="write the outputs here instead of a temporary directory")
    args = parser.parse_args()

    records = simulate_records(MODELS, METHODS, SEEDS, rng=0)
    runs = records["run_id"].nunique()
    assert runs == 591, runs
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp) / "tables"
        path = Path(tmp) / "records.parquet"
        write_parquet(path, records)
        start = time.perf_counter()
        loaded = load_records(path)
        read = time.perf_counter()
        regenerate(loaded, out, controls={m: "baseline" for m in METHODS[1:]}, bootstrap_resamples=args.resamples)
        done = time.perf_counter()
    print(f"{runs} runs, {len(records)} record rows: {len(TABLES)} tables × 3 formats and {len(FIGURES)} figures")
    print(f"read records {read - start:.2f} s; tables and figures {done - read:.2f} s; total {done - start:.2f} s")


if __name__ == "__main__":
    main()
