"""Snakemake's own CLI, each run in a fresh process forked from one that has already imported Snakemake.

A dry run of the smoke study takes about 2.5 s started afresh, and most of it is importing: Snakemake and its plugins
(the Slurm executor plugin alone imports pandas), and scipy.stats for the power plan. The test suite's hundreds of dry
runs fork instead from a multiprocessing fork server that did that once (0.8 s a run): every run is still Snakemake's
`main` in a process of its own, with the caller's environment, reading the Snakefile, the package and the config as
they are on disk, with its own stdout, stderr and exit status. Only Snakemake, its plugins and scipy are preloaded:
nothing of this project is imported before a run starts. `snakemake` forks a dry run and starts a run that executes
jobs, or one that needs another PYTHONPATH than this process's, as `python -m snakemake` of its own.
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_PRELOAD = ["snakemake.cli", "snakemake_executor_plugin_slurm", "snakemake_interface_executor_plugins.registry",
            "scipy.stats", "scipy.optimize"]
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(_PRELOAD)


def _snakemake_main(args: list[str], cwd: str, environment: dict[str, str], stdout: str, stderr: str) -> None:
    """The forked child: Snakemake's CLI on `args` in `cwd` and `environment`, its streams written to the two
    files."""
    os.environ.clear()
    os.environ.update(environment)  # the caller's now, not the fork server's when it started
    os.chdir(cwd)
    for fd, path in ((1, stdout), (2, stderr)):
        with open(path, "w") as stream:
            os.dup2(stream.fileno(), fd)
    import snakemake.cli

    sys.argv = [str(Path(snakemake.__file__).with_name("__main__.py")), *args]  # as `python -m snakemake` sets it

    code = 0
    try:
        snakemake.cli.main(args)
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        if not isinstance(exit.code, (int, type(None))):
            print(exit.code, file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def run(args: list[str], cwd: Path | str | None = None, timeout: float = 300,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m snakemake *args` in `cwd` (default: this process's) and environment `env` (default: this process's),
    as subprocess.run with capture_output=True and text=True would return it; raises subprocess.TimeoutExpired (after
    killing the run) past `timeout` seconds."""
    with tempfile.TemporaryDirectory(prefix="snakemake-run-") as streams:
        stdout, stderr = os.path.join(streams, "stdout"), os.path.join(streams, "stderr")
        for path in (stdout, stderr):
            Path(path).touch()  # a child that dies before it opens them leaves its exit status and no output
        process = _CONTEXT.Process(target=_snakemake_main,
                                   args=(list(args), str(cwd or os.getcwd()), dict(os.environ if env is None else env),
                                         stdout, stderr))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["snakemake", *args], timeout)
        return subprocess.CompletedProcess(["snakemake", *args], process.exitcode,
                                           Path(stdout).read_text(), Path(stderr).read_text())


def snakemake(args: list[str], cwd: Path | str | None = None, timeout: float | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m snakemake *args`, as subprocess.run with capture_output=True and text=True returns it: forked (`run`)
    where it is a dry run (`-n`) in this process's PYTHONPATH, else started afresh."""
    environment = dict(os.environ if env is None else env)
    if "-n" in args and environment.get("PYTHONPATH") == os.environ.get("PYTHONPATH"):
        return run(args, cwd, 300 if timeout is None else timeout, environment)
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True,
                          env=environment, timeout=timeout)
