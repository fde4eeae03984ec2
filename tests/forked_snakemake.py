"""Snakemake's own CLI, each run in a fresh process forked from one that has already imported Snakemake.

A dry run of the smoke study takes about a second, and most of it is importing Snakemake and collecting its plugins
(the Slurm executor plugin alone imports pandas), not the Snakefile. The test suite's hundreds of dry runs fork
instead from a multiprocessing fork server that did that once: every run is still Snakemake's `main` in a process of
its own, reading the Snakefile, the package and the config as they are on disk, with its own stdout, stderr and
exit status. Only Snakemake and its plugins are preloaded: nothing of this project is imported before a run starts.
A run that needs its own environment (another PYTHONPATH, say) still starts a `python -m snakemake` of its own.
"""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

_PRELOAD = ["snakemake.cli", "snakemake_executor_plugin_slurm", "snakemake_interface_executor_plugins.registry"]
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(_PRELOAD)


def _snakemake_main(args: list[str], cwd: str, stdout: str, stderr: str) -> None:
    """The forked child: Snakemake's CLI on `args` in `cwd`, its streams written to the two files."""
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


def run(args: list[str], cwd: Path | str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m snakemake *args` in `cwd` (default: this process's), as subprocess.run with capture_output=True and
    text=True would return it; raises subprocess.TimeoutExpired (after killing the run) past `timeout` seconds."""
    with tempfile.TemporaryDirectory(prefix="snakemake-run-") as streams:
        stdout, stderr = os.path.join(streams, "stdout"), os.path.join(streams, "stderr")
        for path in (stdout, stderr):
            Path(path).touch()  # a child that dies before it opens them leaves its exit status and no output
        process = _CONTEXT.Process(target=_snakemake_main,
                                   args=(list(args), str(cwd or os.getcwd()), stdout, stderr))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["snakemake", *args], timeout)
        return subprocess.CompletedProcess(["snakemake", *args], process.exitcode,
                                           Path(stdout).read_text(), Path(stderr).read_text())
