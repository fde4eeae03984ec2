"""Per-job start-up: what each workflow script imports, and how much of the smoke run's jobs it is.

Each rule runs its workflow script in a fresh Python process (Snakemake's `script:`), so every job pays its imports
again. The script prints, per workflow script, the wall-clock seconds of a fresh interpreter importing what the script
imports at module level (its top-level `import` lines; medians of alternating repeats, beside a bare interpreter and
Snakemake's script preamble) and which heavy packages that loads. Then it runs the smoke study in a temporary copy of
the working tree (`snakemake --cores 2 --configfile config/smoke.yaml`), prints its wall-clock seconds and, per rule,
its jobs' wall-clock seconds (from Snakemake's metadata), and runs one kept job of each rule again under
`python -X importtime` to show how many of its seconds go to imports, the lazy ones inside the job included.

    python benchmarks/startup.py [--repeats 5] [--configfile config/smoke.yaml] [--smoke]

`--smoke` times the imports once and skips the study, to prove in seconds that the script runs.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from dry_run import REPO, _env, copy_working_tree, timed

SCRIPTS = REPO / "workflow_scripts"
HEAVY = ("torch", "transformers", "pandas", "scipy", "matplotlib", "reasoning_gym")
REFERENCES = {"(bare interpreter)": "pass", "(Snakemake's script preamble)": "import snakemake.script"}
# one module of `-X importtime`: cumulative microseconds, the indent (one space for a top-level import), the name
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \|( +)(\S+)$")


def workflow_imports(script: Path) -> str:
    """The module-level import statements of a workflow script, as source."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    return "\n".join(ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom)))


def loaded_heavy(code: str) -> list[str]:
    """The heavy packages a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=_env(REPO), capture_output=True, text=True,
                            check=True)
    return result.stdout.split()


def import_seconds(codes: dict[str, str], repeats: int) -> dict[str, float]:
    """Median wall-clock seconds of a fresh interpreter running each code, the codes alternating within a repeat."""
    seconds: dict[str, list[float]] = defaultdict(list)
    for _ in range(repeats):
        for name, code in codes.items():
            seconds[name].append(timed([sys.executable, "-c", code], REPO, REPO)[0])
    return {name: statistics.median(values) for name, values in seconds.items()}


def report_imports(repeats: int) -> None:
    codes = {**REFERENCES, **{path.stem: workflow_imports(path) for path in sorted(SCRIPTS.glob("*.py"))}}
    seconds = import_seconds(codes, repeats)
    print(f"module-level imports, fresh interpreter, median of {repeats} (wall-clock s):")
    for name, code in codes.items():
        print(f"  {name:30s} {seconds[name]:6.2f}  {' '.join(loaded_heavy(code)) or '-'}")


def job_times(workdir: Path) -> dict[str, list[float]]:
    """Each rule's jobs' wall-clock seconds, from Snakemake's metadata (one record per output file, so per job hash)."""
    jobs = {}
    for record in (workdir / ".snakemake/metadata").iterdir():
        meta = json.loads(record.read_text())
        jobs[meta["rule"], meta["job_hash"]] = meta["endtime"] - meta["starttime"]
    per_rule: dict[str, list[float]] = defaultdict(list)
    for (rule, _), seconds in jobs.items():
        per_rule[rule].append(seconds)
    return per_rule


def job_imports(workdir: Path, kept: Path) -> tuple[float, float, list[str]]:
    """Wall-clock seconds of a kept job script run again, the seconds `-X importtime` counts in its top-level
    imports (every import the job makes, lazy ones included, each counted once with what it pulls in), and the heavy
    packages among them."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-X", "importtime", str(kept)], cwd=workdir, env=_env(workdir),
                            capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    imports = [match for line in result.stderr.splitlines() if (match := IMPORT_LINE.match(line))]
    top_level = sum(int(match[1]) for match in imports if match[2] == " ") / 1e6
    return wall, top_level, [name for name in HEAVY if name in {match[3] for match in imports}]


def report_study(configfile: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = copy_working_tree(Path(tmp))
        command = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", configfile, "--quiet",
                   "--skip-script-cleanup"]
        wall, cpu = timed(command, workdir, workdir)
        per_rule = job_times(workdir)
        print(f"\nsnakemake --cores 2 --configfile {configfile}: {wall:.1f} s wall-clock ({cpu:.1f} s CPU), "
              f"{sum(map(len, per_rule.values()))} jobs")
        kept = {path.name.split(".")[-2]: path for path in sorted((workdir / ".snakemake/scripts").glob("*.py"))}
        print(f"{'rule':18s} {'jobs':>4s} {'median job s':>12s} {'sum s':>7s} {'one job again s':>15s} "
              f"{'its imports s':>13s}  heavy packages it imported")
        for rule, seconds in sorted(per_rule.items(), key=lambda item: -sum(item[1])):
            again, imports, heavy = job_imports(workdir, kept[rule])
            print(f"{rule:18s} {len(seconds):4d} {statistics.median(seconds):12.2f} {sum(seconds):7.1f} "
                  f"{again:15.2f} {imports:13.2f}  {' '.join(heavy) or '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--configfile", default="config/smoke.yaml")
    parser.add_argument("--smoke", action="store_true", help="imports once, no study")
    args = parser.parse_args()
    report_imports(1 if args.smoke else args.repeats)
    if not args.smoke:
        report_study(args.configfile)


if __name__ == "__main__":
    main()
