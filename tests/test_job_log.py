import sys

import pytest

from dataflex_rl.artefacts.job_log import job_log


def test_the_error_that_stops_a_job_is_in_its_log(tmp_path):
    log = tmp_path / "job.log"
    with pytest.raises(ValueError, match="benchmark 'b'"):
        with job_log(str(log)):
            print("progress 1/2", file=sys.stderr)
            raise ValueError("benchmark 'b': no items")
    text = log.read_text()
    assert text.startswith("progress 1/2\n") and text.rstrip().endswith("ValueError: benchmark 'b': no items")
    assert "Traceback (most recent call last)" in text


def test_a_successful_job_log_holds_only_its_stderr(tmp_path):
    log = tmp_path / "job.log"
    with job_log(str(log)):
        print("done", file=sys.stderr)
    assert log.read_text() == "done\n"
