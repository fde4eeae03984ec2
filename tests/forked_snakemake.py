"""Snakemake's command line run in a process of its own that does not import Snakemake again.

Each run is `snakemake.cli.main(argv)`, what `python -m snakemake` calls, in a process forked from multiprocessing's
fork server: a fresh interpreter, started once, that imported Snakemake's CLI and nothing of the caller's. The run gets
its own argv, working directory, environment and output files, as a subprocess would; it only skips the CLI's import,
most of a refused dry run's time (about 1.5 s of 2.5 s).
"""
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# Snakemake's CLI and the modules it imports while it runs (python -X importtime of a dry run)
PRELOAD = ["snakemake.cli", "snakemake.report", "smart_open", "jsonschema.validators"]
FORKS = multiprocessing.get_context("forkserver")
FORKS.set_forkserver_preload(PRELOAD)


def _snakemake_main(argv: list[str], cwd: str, env: dict[str, str], stdout: str, stderr: str) -> None:
    """In the forked process: Snakemake's CLI, its output in the two files; its exit status is the process's."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for fd, path in ((1, stdout), (2, stderr)):
        with open(path, "wb") as file:
            os.dup2(file.fileno(), fd)
    sys.argv = ["snakemake", *argv]
    from snakemake.cli import main

    main(argv)


def run_snakemake(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
                  timeout: float | None = None) -> subprocess.CompletedProcess:
    """`python -m snakemake *argv` as subprocess.run(..., capture_output=True, text=True, timeout=timeout) returns
    it."""
    with tempfile.TemporaryDirectory() as scratch:
        stdout, stderr = Path(scratch) / "stdout", Path(scratch) / "stderr"
        process = FORKS.Process(target=_snakemake_main, args=(
            argv, str(cwd or os.getcwd()), dict(os.environ if env is None else env), str(stdout), str(stderr)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["snakemake", *argv], timeout)
        return subprocess.CompletedProcess(["snakemake", *argv], process.exitcode,
                                           stdout.read_text(encoding="utf-8"), stderr.read_text(encoding="utf-8"))
