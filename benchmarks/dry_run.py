"""Time `snakemake -n --quiet` on the study against a bare Snakefile of the same shape (the goal: ≤ 1.25×).

The bare Snakefile is generated from the study's own DAG: the same rules (names, so the profile's resources apply
alike), output patterns, wildcard constraints, jobs and dependency edges, each rule only touching its outputs (input
functions look a job's inputs up in a table). A third side, "bare + directives", is the same Snakefile with the study
rules' directives: the same input and params items (each function a table look-up of its value per job, with the same
signature), log and benchmark patterns, conda environment (a path, or a function where the study's is one), threads,
resources and a `script:` (never run in a dry run). Its ratio to the bare file is what Snakemake's handling of those
directives costs; the study's ratio to it is the cost of our own code (parse-time imports, config validation, the
`Study`, what our functions compute, the summary).

    python benchmarks/dry_run.py [--repeats 5] [--against REV] [--case paper] [--first] [--smoke]

Each case is timed from scratch (nothing built) and on a finished tree (every output touched, oldest first: nothing to
do), for the paper config under the Slurm profile and for the default config, each with `--quiet` (Snakemake's
default quiet set: no progress, no rule list) and with `--quiet all` (nothing but errors). The sides run alternately
in fresh processes; the script prints medians of wall-clock and of CPU seconds (the child's user + system time, which a
shared machine inflates less) and each side's ratio to the bare file (and each study side's to "bare + directives").
The script first checks that "bare + directives" plans the study's jobs with the same inputs, outputs and params repr.
With `--against`, the workflow as of git revision REV runs beside the working tree, and the script first checks that
both plan the same jobs with the same inputs, outputs and params (it exits non-zero if not), and that every side finds
nothing to do on the finished tree.
"From scratch" keeps what a dry run remembers in its working directory (REMEMBERED: the verl check's passed override
lists, the power plan's roots) from the first run on; `--first` also times the from-scratch `-n --quiet` with it
removed before every run: a working directory's first dry run.
`--smoke` times the default config once, to prove in seconds that the script runs.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "paper": ["--configfile", "config/paper.yaml", "--profile", "profiles/slurm"],
    "default": [],
}
# The bare Snakefile's twin whose rules carry the study rules' directives (`directives_snakefile`).
DIRECTIVES = "bare + directives"
# What a study's working directory needs besides its outputs (config paths are relative to it).
WORKDIR_ENTRIES = ("config", "profiles")
# What a dry run remembers in its working directory for the next (dataflex_rl/backends/verl/verl_config.py,
# dataflex_rl/study/mde_cache.py); `--first` removes it before every run.
REMEMBERED = Path(".snakemake") / "dataflex_rl"
FIRST = "first in its directory"


def dump_jobs(snakemake_args: list[str], into: Path) -> None:
    """Run the dry run in this process and write its DAG as JSON: each job's rule, wildcards, inputs, outputs and
    params (their repr, which Snakemake's params rerun trigger compares), each rule's patterns, and each rule's
    directives with the values of its callables per job (what `directives_snakefile` rebuilds)."""
    from snakemake import cli
    from snakemake.workflow import Workflow

    build_dag = Workflow._build_dag

    def build_and_dump(workflow: Workflow) -> None:
        build_dag(workflow)
        jobs = [{"rule": job.rule.name, "wildcards": dict(sorted(job.wildcards_dict.items())),
                 "input": sorted(map(str, job.input)), "output": sorted(map(str, job.output)),
                 "params": repr({name: job.params[name] for name in job.params.keys()})}
                for job in workflow.dag.jobs]
        rules = {rule.name: {"output": [str(o) for o in rule.output],
                             "directories": [str(o) for o in rule.output if o.is_directory],
                             "wildcard_constraints": rule.wildcard_constraints,
                             "target": rule.name == workflow.default_target}
                 for rule in workflow.rules}
        into.write_text(json.dumps({"jobs": sorted(jobs, key=json.dumps), "rules": rules,
                                    "wildcard_constraints": dict(workflow.wildcard_constraints),
                                    "directives": _directives(workflow)}, indent=1))

    Workflow._build_dag = build_and_dump
    cli.main(["-n", "--quiet", *snakemake_args])


def _function(item):
    """The function behind a rule's input, params, log or conda item, or None for a plain value."""
    from snakemake.io import AnnotatedString, _IOFile, is_callable

    if not is_callable(item):
        return None
    if isinstance(item, _IOFile):
        return item._file.callable
    return item.callable if isinstance(item, AnnotatedString) else item


def _plain(value):
    """A callable's value as JSON: strings, lists and mappings of them (anything else by its repr)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value) if isinstance(value, (str, Path)) else repr(value)


def _items(namedlist, paths: bool = True) -> list[dict]:
    """A rule's input, params or log items in order: name, function signature (None for a plain value), and a plain
    value as written (`paths`: a list item is a list of path patterns)."""
    from snakemake.common import get_function_params
    from snakemake.io import is_flagged

    items = []
    for name, item in namedlist._allitems():
        function = _function(item)
        entry = {"name": name, "args": None if function is None else list(get_function_params(function)),
                 "unpack": bool(is_flagged(item, "unpack"))}
        if function is None:
            entry["value"] = [str(f) for f in item] if paths and isinstance(item, list) else _plain(item)
        items.append(entry)
    return items


def _directives(workflow) -> dict:
    """Per rule: its input, params and log items (plain values as written; a callable's value per job, keyed by the
    job's wildcards), benchmark, conda environment (a path, or a function's value per job), threads, resources and
    whether it runs a script."""
    from snakemake.common import get_function_params

    directives = {}
    for rule in workflow.rules:
        entry = {"input": _items(rule.input), "params": _items(rule.params, paths=False), "log": _items(rule.log),
                 "benchmark": None if rule.benchmark is None else str(rule.benchmark),
                 "conda": None, "script": rule.script is not None, "threads": None, "resources": {}, "jobs": {}}
        conda = _function(rule.conda_env)
        if rule.conda_env is not None:
            entry["conda"] = {"args": list(get_function_params(conda))} if conda else {"value": str(rule.conda_env)}
        for key in rule.resources:
            raw = rule.resources[key].raw
            if key == "_cores" and not callable(raw):
                entry["threads"] = raw
            elif not key.startswith("_") and key != "tmpdir" and raw is not None and not callable(raw):
                entry["resources"][key] = raw
        directives[rule.name] = entry
    for job in workflow.dag.jobs:
        rule, entry = job.rule, directives[job.rule.name]
        wildcards = job.wildcards_dict
        values = {
            "input": [_plain(rule.apply_input_function(item, wildcards)[0]) if _function(item) else None
                      for _, item in rule.input._allitems()],
            "params": [_plain(job.params[i]) if _function(item) else None
                       for i, (_, item) in enumerate(rule.params._allitems())],
            "log": [str(job.log[i]) if _function(item) else None for i, (_, item) in enumerate(rule.log._allitems())],
        }
        if entry["conda"] and "args" in entry["conda"]:
            values["conda"] = str(rule.apply_input_function(rule.conda_env, wildcards, params=job.params,
                                                            input=job.input)[0])
        entry["jobs"][json.dumps(dict(sorted(wildcards.items())))] = values
    return directives


def planned(root: Path, snakemake_args: list[str], cwd: Path, snakefile: Path | None = None) -> dict:
    """The DAG of the workflow under `root` (or of `snakefile`, with `root` importable), dry-run in `cwd`, as
    `dump_jobs` writes it."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--dump", out.name, "--",
                        "-s", str(snakefile or root / "Snakefile"), *snakemake_args], cwd=cwd, env=_env(root),
                       check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def bare_snakefile(dag: dict) -> str:
    """A Snakefile of the same shape as `dag` whose rules only touch (or make) their outputs."""
    lines = ["import json", "", "INPUTS = json.loads(open(workflow.basedir + '/inputs.json').read())", "",
             "wildcard_constraints:\n" + "".join(f"    {k}={v!r},\n" for k, v in dag["wildcard_constraints"].items())]
    rules = sorted(dag["rules"].items(), key=lambda item: not item[1]["target"])  # the default target first
    for name, rule in rules:
        jobs = [job for job in dag["jobs"] if job["rule"] == name]
        if not jobs:
            continue
        make = " && ".join(f"mkdir -p {{output[{i}]}}" if out in rule["directories"] else f"touch {{output[{i}]}}"
                           for i, out in enumerate(rule["output"]))
        lines += [f"rule {name}:",
                  f"    input: lambda wc: INPUTS[{name!r}][json.dumps(dict(sorted(wc.items())))]"]
        lines += _shape(rule)
        lines += [f"    shell: {make!r}" if make else "", ""]
    return "\n".join(lines)


def _shape(rule: dict) -> list[str]:
    """A generated rule's output and wildcard_constraints lines, as the study rule's."""
    lines = []
    if rule["output"]:
        lines.append("    output: " + ", ".join(f"directory({o!r})" if o in rule["directories"] else repr(o)
                                               for o in rule["output"]))
    if rule["wildcard_constraints"]:
        lines.append("    wildcard_constraints: " + ", ".join(f"{k}={v!r}"
                                                             for k, v in rule["wildcard_constraints"].items()))
    return lines


def bare_inputs(dag: dict) -> dict:
    inputs: dict[str, dict[str, list[str]]] = {}
    for job in dag["jobs"]:
        inputs.setdefault(job["rule"], {})[json.dumps(job["wildcards"])] = job["input"]
    return inputs


def write_bare(dag: dict, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    (into / "Snakefile").write_text(bare_snakefile(dag))
    (into / "inputs.json").write_text(json.dumps(bare_inputs(dag)))
    return into / "Snakefile"


def directives_snakefile(dag: dict) -> str:
    """A Snakefile of the same shape as `bare_snakefile`'s whose rules carry the study rules' directives: the same
    input items (plain patterns as written, each function a table look-up, `unpack` kept), params (plain values as
    written, each function a look-up of its value per job, with the same signature, so derived params stay derived),
    log and benchmark patterns, conda environment (a path, or a function where the study's is one), threads,
    resources, and a `script:` (a file that a dry run never runs) where the study's rule has one."""
    lines = ["import json", "", "D = json.loads(open(workflow.basedir + '/directives.json').read())", "", "",
             "def key(wc):", "    return json.dumps(dict(sorted(wc.items())))", "", "",
             "def plain(rule, kind, start, end):",
             "    values = [item['value'] for item in D[rule][kind][start:end]]",
             "    return [path for value in values for path in ([value] if isinstance(value, str) else value)]", "", "",
             "wildcard_constraints:\n" + "".join(f"    {k}={v!r},\n" for k, v in dag["wildcard_constraints"].items())]
    rules = sorted(dag["rules"].items(), key=lambda item: not item[1]["target"])  # the default target first
    for name, rule in rules:
        if not any(job["rule"] == name for job in dag["jobs"]):
            continue
        directive = dag["directives"][name]
        lines.append(f"rule {name}:")
        for kind in ("input", "log"):
            if directive[kind]:
                lines.append(f"    {kind}: " + ", ".join(_directive_items(name, kind, directive[kind])))
        lines += _shape(rule)
        if directive["benchmark"]:
            lines.append(f"    benchmark: {directive['benchmark']!r}")
        conda = directive["conda"]
        if conda:
            lines.append(f"    conda: {_environment(conda['value'])!r}" if "value" in conda else
                         f"    conda: lambda {', '.join(conda['args'])}: "
                         f"D[{name!r}]['jobs'][key({conda['args'][0]})]['conda']")
        if directive["threads"] not in (None, 1):
            lines.append(f"    threads: {directive['threads']!r}")
        if directive["resources"]:
            lines.append("    resources: " + ", ".join(f"{k}={v!r}" for k, v in directive["resources"].items()))
        if directive["params"]:
            lines.append("    params: " + ", ".join(_directive_items(name, "params", directive["params"])))
        if directive["script"]:
            lines.append(f"    script: 'scripts/{name}.py'")
        lines.append("")
    return "\n".join(lines)


def _directive_items(rule: str, kind: str, items: list[dict]) -> list[str]:
    """The items of one directive as `directives_snakefile` writes them: plain values as written in the study, read
    from the table (a run of unnamed plain paths as one list: the study's are one list Snakemake flattens), functions
    as a look-up of their value per job under the same parameter names."""
    written, index = [], 0
    while index < len(items):
        item = items[index]
        if item["args"] is None and item["name"] is None and kind != "params":
            end = next((i for i in range(index, len(items)) if items[i]["args"] or items[i]["name"]), len(items))
            written.append(f"plain({rule!r}, {kind!r}, {index}, {end})")
            index = end
            continue
        if item["args"] is None:  # read from the table at parse time, as the study computes it (no literal to parse)
            value = f"D[{rule!r}][{kind!r}][{index}]['value']"
        else:
            args = item["args"]
            value = f"lambda {', '.join(args)}: D[{rule!r}]['jobs'][key({args[0]})][{kind!r}][{index}]"
            value = f"unpack({value})" if item["unpack"] else value
        written.append(f"{item['name']}={value}" if item["name"] else value)
        index += 1
    return written


def _environment(path: str) -> str:
    """Where the generated Snakefile's copy of a conda environment file is, relative to it."""
    return f"envs/{Path(path).name}"


def write_directives(dag: dict, into: Path) -> Path:
    """`directives_snakefile(dag)` with its table, a placeholder per conda environment file and a one-line script
    per rule that has a script."""
    into.mkdir(parents=True, exist_ok=True)
    directives = json.loads(json.dumps(dag["directives"]))
    environments = set()
    for directive in directives.values():
        if directive["conda"] and "value" in directive["conda"]:
            environments.add(_environment(directive["conda"]["value"]))
        for values in directive["jobs"].values():
            if "conda" in values:
                values["conda"] = _environment(values["conda"])
                environments.add(values["conda"])
        if directive["script"]:
            (into / "scripts").mkdir(exist_ok=True)
    for name, directive in directives.items():
        if directive["script"]:
            (into / "scripts" / f"{name}.py").write_text("pass\n")
    for environment in environments:
        (into / environment).parent.mkdir(parents=True, exist_ok=True)
        (into / environment).write_text("channels: [conda-forge]\ndependencies: [python]\n")
    (into / "Snakefile").write_text(directives_snakefile(dag))
    (into / "directives.json").write_text(json.dumps(directives))
    return into / "Snakefile"


def finish_tree(dag: dict, workdir: Path) -> None:
    """Touch every output of `dag` under `workdir`, each job's a second newer than its inputs': nothing to do."""
    producer = {out: job for job in dag["jobs"] for out in job["output"]}
    directories = {out for rule in dag["rules"].values() for out in rule["directories"]}
    level: dict[int, int] = {}

    def depth(job: dict) -> int:
        key = id(job)
        if key not in level:
            level[key] = 1 + max((depth(producer[i]) for i in job["input"] if i in producer), default=0)
        return level[key]

    start = time.time()  # newer than the workflow's scripts too (Snakemake reruns a job whose script is newer)
    for job in sorted(dag["jobs"], key=depth):
        for out in job["output"]:
            path = workdir / out
            if out in directories or any(re.fullmatch(_pattern(d), out) for d in directories):
                path.mkdir(parents=True, exist_ok=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                _finished_file(path, out, job)
            os.utime(path, (start + depth(job), start + depth(job)))


def _finished_file(path: Path, out: str, job: dict) -> None:
    """An empty file, but for what the workflow reads while it builds the DAG (dataflex_rl/artefacts/readable.py,
    dataflex_rl/artefacts/gates.py): a provenance record, the records table, a quarantine gate's report and a
    benchmark's items hold what a real study's do (a score's record the fingerprint of its slice, a gate's report that
    of its data, a parquet file a footer), or the dry run would plan to rebuild them as damaged or stale."""
    from dataflex_rl.artefacts.gates import DATA_FINGERPRINT
    from dataflex_rl.artefacts.layout import PROVENANCE, RECORDS

    if out.endswith(PROVENANCE):
        recorded = _score_fingerprint(job, out) if job["rule"] == "score" else ""
        path.write_text(json.dumps({"fingerprint": recorded, "settings": {}, "outputs": {}}))
    elif job["rule"] == "quarantine_gate":
        path.write_text(json.dumps({DATA_FINGERPRINT: ast.literal_eval(job["params"])["data_fingerprint"]}))
    elif out == RECORDS or (job["rule"] == "benchmark_items" and out.endswith(".parquet")):
        import pandas as pd

        pd.DataFrame({"run_id": []}).to_parquet(path)
    else:
        path.touch()


def _score_fingerprint(job: dict, record: str) -> str:
    """The fingerprint of the slice a score job's params give the benchmark of its provenance record `record`."""
    from dataflex_rl.artefacts.layout import PROVENANCE
    from dataflex_rl.artefacts.provenance import fingerprint

    benchmark = Path(record).name.removesuffix(f".{PROVENANCE}")
    return next(fingerprint(s) for s in ast.literal_eval(job["params"])["settings"] if s["benchmark"] == benchmark)


def _pattern(output_pattern: str) -> str:
    """A regex of an output pattern's paths (its wildcards any text)."""
    parts = re.split(r"\{[^}]*\}", output_pattern)
    return "[^/]+".join(map(re.escape, parts))


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(root)}


def timed(command: list[str], cwd: Path, root: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system, of the child) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=_env(root), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def extract_tree(revision: str, into: Path) -> Path:
    """The repository as of git revision `revision`, extracted under `into`."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", revision],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def copy_working_tree(into: Path) -> Path:
    """The working tree's files (tracked and untracked, not ignored) copied under `into`: on the same file system as
    the revision it is timed against."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"], check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in (name for name in files if name and (REPO / name).is_file()):
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return into


def workdir(base: Path, name: str) -> Path:
    """A fresh working directory holding the config and profiles the study reads."""
    path = base / name
    path.mkdir()
    for entry in WORKDIR_ENTRIES:
        (path / entry).symlink_to(REPO / entry)
    return path


def compare_dags(label: str, before: dict, after: dict) -> bool:
    """Print and return whether both plan the same jobs (rule, wildcards, inputs, outputs, params repr)."""
    old = {json.dumps(job, sort_keys=True) for job in before["jobs"]}
    new = {json.dumps(job, sort_keys=True) for job in after["jobs"]}
    print(f"{label}: {len(new)} jobs; {len(old - new)} only before, {len(new - old)} only after"
          + ("" if old == new else f"; e.g. {sorted(old ^ new)[0][:300]}"))
    return old == new


def measure(case: str, repeats: int, sides: dict[str, Path], base: Path, first: bool = False) -> bool:
    """Time one config's dry runs (from scratch, then on a finished tree, and with `first` from scratch with nothing
    remembered) of each side (a label and its repository root, the working tree last); True if every side plans the
    same DAG."""
    args = CASES[case]
    scratch = workdir(base, f"{case}-scratch")
    dags = {side: planned(root, args, scratch) for side, root in sides.items()}
    same = all(compare_dags(f"{case} DAG, {side} vs working tree", dags[side], dags["working tree"])
               for side in sides if side != "working tree")
    bare = write_bare(dags["working tree"], base / f"{case}-bare")
    directives = write_directives(dags["working tree"], base / f"{case}-directives")
    if not compare_dags(f"{case} DAG, {DIRECTIVES} vs working tree",
                        planned(sides["working tree"], args, scratch, directives), dags["working tree"]):
        sys.exit(f"the {DIRECTIVES} Snakefile of {case} does not plan the study's jobs")
    finished = workdir(base, f"{case}-finished")
    finish_tree(dags["working tree"], finished)
    snakefiles = {**{side: root / "Snakefile" for side, root in sides.items()}, DIRECTIVES: directives, "bare": bare}
    for side, snakefile in snakefiles.items():
        if side == "bare":
            continue
        plan = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(snakefile), "-n", *args], cwd=finished,
                              env=_env(sides.get(side, sides["working tree"])), capture_output=True, text=True,
                              check=True)
        if "Nothing to be done" not in plan.stdout + plan.stderr:
            sys.exit(f"{side}: the finished tree of {case} is not finished:\n{plan.stdout[-2000:]}")
    commands = {("from scratch", "--list-rules (parsing only)"): (scratch, ["--list-rules"])}
    for tree, cwd in (("from scratch", scratch), ("finished tree", finished)):
        for quiet in ([], ["all"]):
            commands[tree, f"-n --quiet{' all' if quiet else ''}"] = (cwd, ["-n", "--quiet", *quiet])
    if first:
        commands[FIRST, "-n --quiet"] = (scratch, ["-n", "--quiet"])
    for (tree, label), (cwd, flags) in commands.items():
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in snakefiles}
        for _ in range(repeats):
            for side, snakefile in snakefiles.items():
                if tree == FIRST:
                    shutil.rmtree(cwd / REMEMBERED, ignore_errors=True)
                command = [sys.executable, "-m", "snakemake", "-s", str(snakefile), *flags, *args]
                times[side].append(timed(command, cwd, sides.get(side, sides["working tree"])))
        _report(f"{case}, {tree}: snakemake {label}", times)
    return same


def _report(label: str, times: dict[str, list[tuple[float, float]]]) -> None:
    wall = {side: statistics.median(w for w, _ in runs) for side, runs in times.items()}
    cpu = {side: statistics.median(c for _, c in runs) for side, runs in times.items()}
    repeats = len(next(iter(times.values())))
    print(f"{label} (median of {repeats}, alternating):")
    for side in times:
        ratio = "" if side == "bare" else f"  = {wall[side] / wall['bare']:.2f}× bare wall, " \
                                          f"{cpu[side] / cpu['bare']:.2f}× bare CPU"
        if side not in ("bare", DIRECTIVES):
            ratio += f"; {cpu[side] / cpu[DIRECTIVES]:.2f}× {DIRECTIVES} CPU"
        print(f"  {side:>17}: {wall[side]:6.2f} s wall, {cpu[side]:6.2f} s CPU{ratio}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--against", metavar="REV", help="also time the workflow as of git revision REV")
    parser.add_argument("--case", action="append", choices=list(CASES), help="only this config (repeatable)")
    parser.add_argument("--first", action="store_true",
                        help=f"also time the first dry run in a working directory ({REMEMBERED} removed)")
    parser.add_argument("--smoke", action="store_true", help="the default config once (proves the script runs)")
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("snakemake_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump:
        dump_jobs(args.snakemake_args, args.dump)
        return
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        sides = {args.against: extract_tree(args.against, Path(tmp) / "before")} if args.against else {}
        sides["working tree"] = copy_working_tree(Path(tmp) / "after") if args.against else REPO
        cases = ["default"] if args.smoke else args.case or list(CASES)
        same = [measure(case, 1 if args.smoke else args.repeats, sides, Path(tmp), args.first) for case in cases]
    if not all(same):
        sys.exit(f"the DAG differs from {args.against}'s")


if __name__ == "__main__":
    main()
