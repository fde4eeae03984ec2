"""The README keeps exactly two set-up commands at the top, and CI runs the second one verbatim."""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    commands = re.findall(r"```bash\n(.+?)\n```", (REPO / "README.md").read_text())
    assert len(commands[:2]) == 2 and "snakemake" in commands[0] and "pytest" in commands[1]
    assert commands[1] in (REPO / ".ci/run").read_text().splitlines()
