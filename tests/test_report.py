import math

import pandas as pd

from dataflex_rl.report.figures import forest_plot
from dataflex_rl.report.tables import format_cell, latex_table_body, markdown_table, write_table

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _comparison():
    return pd.DataFrame({"model": "tiny", "method": ["difffilter", "dump_ucb", "gfpo"],
                         "control": ["baseline", "static", "baseline"], "n_seeds": [3, 3, 1],
                         "delta_mean": [1.234567, -0.5, 2.0], "ci_low": [0.2, -1.75, math.nan],
                         "ci_high": [2.3, 0.75, math.nan], "p": [0.0004, 0.41, math.nan]})


def test_write_table_csv_and_markdown(tmp_path):
    frame = _comparison()
    write_table(frame, tmp_path / "compare")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "compare.csv"), frame)
    lines = (tmp_path / "compare.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "| model | method | control | n_seeds | delta_mean | ci_low | ci_high | p |"
    assert lines[1] == "|:---|:---|:---|---:|---:|---:|---:|---:|"
    assert lines[2] == "| tiny | difffilter | baseline | 3 | 1.23 | 0.20 | 2.30 | 0.0004 |"
    assert lines[4].endswith("| — | — | — |")
    assert len(lines) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["compare.csv", "compare.md"]


def test_write_table_latex_escapes_every_special_character_and_matches_the_single_format_calls(tmp_path):
    frame = pd.DataFrame({"name_x": ["a|b\\c", "{50%}", "$#&~^"], "v": [0.001, math.nan, 12.0]})
    write_table(frame, tmp_path / "t", latex=True)
    tex = (tmp_path / "t.tex").read_text(encoding="utf-8")
    assert tex.splitlines() == [r"name\_x & v \\", r"\midrule", r"a|b\textbackslash{}c & 0.001 \\", r"\{50\%\} & -- \\",
                                r"\$\#\&\textasciitilde{}\textasciicircum{} & 12.00 \\"]
    assert tex == latex_table_body(frame)
    assert (tmp_path / "t.md").read_text(encoding="utf-8") == markdown_table(frame)
    assert markdown_table(frame).splitlines()[2] == "| a\\|b\\c | 0.001 |"


def test_format_cell_escapes_and_keeps_small_values():
    assert format_cell("a|b") == "a\\|b"
    assert format_cell(-0.001) == "-0.001"
    assert format_cell(0.0) == "0.00"
    assert format_cell(pd.NA) == "—"


def test_forest_plot_writes_png(tmp_path):
    path = tmp_path / "figures" / "forest.png"
    forest_plot(_comparison(), path, "DB-12")
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    assert [p.name for p in path.parent.iterdir()] == ["forest.png"]
