"""The paper's benchmarks on public copies of the real files, in the formats people download them in
(../shared/data/real-benchmarks: its README gives each file's source and licence; never copied into the repository;
skipped where the folder is absent), and the containers those copies do not cover on hand-made files.

Expected sizes are the paper's (registry.py: the authors' scored sizes); the 2-person K&K file holds 10 puzzles. The
answers models write are built per item from its gold, here, without the answer formats' own calibration forms."""
import json
import re
import subprocess
import warnings
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest
import yaml

from config_edits import set_key
from dataflex_rl.artefacts import layout
from dataflex_rl.item_sources.loaders import BenchmarkSizeWarning, local_source, paper_subset, read_table
from dataflex_rl.item_sources.readers import BenchmarkSchemaError
from dataflex_rl.item_sources.registry import get_benchmark
from dataflex_rl.artefacts.items import LETTERS, item_metadata
from dataflex_rl.corpus.build import load_benchmark_file
from dataflex_rl.verify.verifiers import get_verifier

import forked_snakemake

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).parents[2] / "shared/data/real-benchmarks"
FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} is absent (public copies of the benchmarks)")


def _bbh(task: str) -> list[str]:
    return [f"bbh-{task.replace('_', '-')}/bbh_{task}_{n}_objects.json" for n in ("three", "five", "seven")]


# Each benchmark's shared file(s), and the number of items it must give.
SHARED_FILES = {
    "MATH-500": (["math-500/budgetthinker_math500_test_ori.jsonl"], 500),
    "AIME-2024": (["aime-2024/qwen25math_aime24_test.jsonl"], 30),
    "OlympiadBench": (["olympiadbench/qwen25math_olympiadbench_test.jsonl"], 675),
    "Minerva-Math": (["minerva-math/qwen25math_minerva_math_test.jsonl"], 272),
    "GSM8K": (["gsm8k/qwen25math_gsm8k_test.jsonl"], 1319),
    "Knights&Knaves": (["knights-knaves/mem-kk-logic_test_clean_people2_num10.jsonl"], 10),
    "BBH-logical-deduction": (_bbh("logical_deduction"), 750),
    "BBH-tracking-shuffled-objects": (_bbh("tracking_shuffled_objects"), 750),
    "MMLU-Pro-chemistry": (["mmlu-pro-chemistry/mmlu-pro_gpt4o_chemistry_result.json"], 500),
    "MMLU-Pro-physics": (["mmlu-pro-physics/mmlu-pro_gpt4o_physics_result.json"], 500),
}
PRESENT = list(SHARED_FILES)
# The 2-person K&K puzzles are not the paper's 7/8-person files: the test points K&K at them under their own name.
KK_2_PERSON = "data/benchmarks/knights-and-knaves/test/people2_num10.jsonl"


def _shared_items(name: str) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkSizeWarning)
        return load_benchmark_file(get_benchmark(name), [SHARED / path for path in SHARED_FILES[name][0]])


# --- the real rules on the paper config -------------------------------------------------------------------------


def _paper_workdir(tmp_path: Path) -> Path:
    """A working directory holding config.yaml (config/paper.yaml, K&K pointed at the 2-person file) with the shared
    files linked at the config's relative paths; ZebraLogic's and GPQA's files are absent (hub fallback)."""
    config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    set_key(config, "benchmarks.files.Knights&Knaves", KK_2_PERSON)
    files = config["benchmarks"]["files"]
    for name, (shared, _) in SHARED_FILES.items():
        paths = [files[name]] if isinstance(files[name], str) else files[name]
        assert len(paths) == len(shared), name
        for path, source in zip(paths, shared):
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).symlink_to(SHARED / source)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return tmp_path


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return forked_snakemake.snakemake(["--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir),
                                       "--configfile", str(workdir / "config.yaml"), *args])


@needs_shared
def test_the_paper_config_gets_through_items_calibration_and_the_train_dry_run_on_the_real_files(tmp_path):
    workdir = _paper_workdir(tmp_path)
    targets = [path for name in PRESENT for path in (layout.benchmark_items(name), layout.calibration(name))]
    result = _snakemake(workdir, "--cores", "2", *targets)
    assert result.returncode == 0, result.stderr[-4000:]
    for name, (_, size) in SHARED_FILES.items():
        items = pd.read_parquet(workdir / layout.benchmark_items(name))
        audit = json.loads((workdir / layout.benchmark_audit(name)).read_text())
        calibration = json.loads((workdir / layout.calibration(name)).read_text())
        assert len(items) == size and items["id"].is_unique, name
        assert audit["quarantine"]["rows"] == 0, name
        assert calibration["items"] == size and calibration["failures"] == 0, name
    for name in ("MMLU-Pro-chemistry", "MMLU-Pro-physics"):  # the authors' seeded subset of the subject's rows
        rows = len(read_table(SHARED / SHARED_FILES[name][0][0]))
        items = pd.read_parquet(workdir / layout.benchmark_items(name))
        assert [item_metadata(row)["source_index"] for row in items.to_dict("records")] == paper_subset(
            rows, get_benchmark(name))
    bbh = pd.read_parquet(workdir / layout.benchmark_items("BBH-logical-deduction"))
    assert [item_metadata(row)["source_file"] for row in bbh.to_dict("records")[::250]] == [
        f"logical_deduction_{n}_objects.json" for n in ("three", "five", "seven")]

    plan = _snakemake(workdir, "-n", "--profile", str(REPO / "profiles/slurm"))
    output = plan.stdout + plan.stderr
    assert plan.returncode == 0, output[-4000:]
    assert re.search(r"^train\s+156$", output, re.MULTILINE), output[-4000:]  # 13 configurations × 12 seeds
    assert "ZebraLogic" in output and "GPQA-Diamond" in output  # the two absent files come from the hub


# --- each container, on the shared files or a hand-made one ----------------------------------------------------


@needs_shared
@pytest.mark.parametrize("name", PRESENT)
def test_every_shared_file_loads_at_its_size_with_every_gold(name):
    items = _shared_items(name)
    assert len(items) == SHARED_FILES[name][1] and items["answer"].str.strip().astype(bool).all()


@needs_shared
def test_the_olympiadbench_multi_answer_rows_are_sets_and_minerva_golds_come_from_the_solution():
    olympiad = {row["id"]: row for row in _shared_items("OlympiadBench").to_dict("records")}
    assert olympiad["1664"]["answer"] == "69, 84" and item_metadata(olympiad["1664"])["answers"] == ["69", "84"]
    verify = get_verifier("math")
    assert verify("\\boxed{84, 69}", olympiad["1664"]).correct and not verify("\\boxed{69}", olympiad["1664"]).correct
    minerva = _shared_items("Minerva-Math").to_dict("records")
    # The first item's solution ends in s = ... = \boxed{1.6} cm (worked out from its 45'' and 72 m: 1.57 cm).
    assert minerva[0]["answer"] == "1.6" and "solution" in item_metadata(minerva[0])


@pytest.mark.filterwarnings("ignore::dataflex_rl.item_sources.loaders.BenchmarkSizeWarning")
def test_math500_without_unique_id_numbers_its_rows(tmp_path):
    path = tmp_path / "math500.jsonl"
    read_table(FIXTURES / "math500.jsonl").drop(columns="unique_id").to_json(path, orient="records", lines=True)
    items = load_benchmark_file(get_benchmark("MATH-500"), path)
    assert items["id"].tolist() == [f"MATH-500-{i:06d}" for i in range(4)]


def test_the_gpqa_csv_reads_its_columns_and_keeps_the_others():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkSizeWarning)
        items = load_benchmark_file(get_benchmark("GPQA-Diamond"), FIXTURES / "gpqa_diamond.csv")
    assert items["id"].tolist() == ["recCsv0001", "recCsv0002", "recCsv0003"]
    correct = ["5.3 * 10^-20 kg m/s", "$6.01$ $\\text{kJ}$", "c"]
    for row, text in zip(items.to_dict("records"), correct):
        metadata = item_metadata(row)
        assert metadata["options"][LETTERS.index(row["answer"])] == text
        assert metadata["Subdomain"] and "Canary String" in metadata
    assert "line break\ninside" in item_metadata(items.iloc[1])["Explanation"]


def test_a_benchmark_of_several_files_is_their_rows_in_order_and_comes_from_the_hub_only_when_none_is_there(tmp_path):
    halves = [tmp_path / "first.json", tmp_path / "second.json"]
    for path, targets in zip(halves, (["(A)", "(B)"], ["(C)"])):
        path.write_text(json.dumps({"canary": "x", "examples": [
            {"input": f"Q{target}\nOptions:\n(A) a\n(B) b\n(C) c", "target": target} for target in targets]}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkSizeWarning)
        items = load_benchmark_file(get_benchmark("BBH-logical-deduction"), [str(path) for path in halves])
    assert items["answer"].tolist() == ["(A)", "(B)", "(C)"]
    assert [item_metadata(row)["source_file"] for row in items.to_dict("records")] == [
        "first.json", "first.json", "second.json"]
    missing = [str(tmp_path / "absent_1.json"), str(tmp_path / "absent_2.json")]
    assert local_source(missing, hub_fallback=True) is None
    assert local_source([str(halves[0]), missing[0]], hub_fallback=True) == [str(halves[0]), missing[0]]
    assert local_source(missing, hub_fallback=False) == missing


@pytest.mark.parametrize("content, found", [
    ('{"canary": "x", "rows": [{"input": "Q", "target": "(A)"}]}', "an object with keys ['canary', 'rows']"),
    ('[["Q", "(A)"]]', "a JSON list"),
])
def test_a_json_file_that_holds_no_rows_is_refused_naming_the_file_and_the_expected_containers(tmp_path, content,
                                                                                              found):
    path = tmp_path / "bbh.json"
    path.write_text(content)
    with pytest.raises(BenchmarkSchemaError, match=rf"{path}: expected a JSON list of row objects, or an object with "
                                                   rf"an `examples` list.*found {re.escape(found)}"):
        load_benchmark_file(get_benchmark("BBH-logical-deduction"), path)


# --- answers written the way models write them ------------------------------------------------------------------


def _number(gold: str) -> Decimal | Fraction | None:
    """The gold's value when it is a plain number: currency and thousands separators aside, e-notation, a/b."""
    text = re.sub(r"\\\$|\\!|\s|,(?=\d{3}\b)", "", gold).removesuffix("^\\circ")
    fraction = re.fullmatch(r"(-?\d+)\.?/(\d+)|(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}", text)
    if fraction:
        sign = -1 if fraction.group(3) else 1
        numerator, denominator = (fraction.group(1), fraction.group(2)) if fraction.group(1) else fraction.group(4, 5)
        return sign * Fraction(int(numerator), int(denominator))
    return Decimal(text) if re.fullmatch(r"-?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text) else None


def _scientific(value: Decimal) -> str:
    sign, digits, exponent = value.normalize().as_tuple()
    mantissa = ("-" if sign else "") + str(digits[0]) + ("." + "".join(map(str, digits[1:])) if digits[1:] else "")
    return f"{mantissa} \\times 10^{{{len(digits) - 1 + exponent}}}"


def _math_forms(item: dict) -> tuple[list[str], list[str]]:
    gold = item["answer"]
    answers = item_metadata(item).get("answers")
    right = [f"\\boxed{{{gold}}}", f"So the final answer is $\\boxed{{{gold}}}$.",
             f"Final Answer: The final answer is ${gold}$. I hope it is correct."]
    wrong = [f"\\boxed{{{gold} + 1}}", "\\boxed{987654321}"]
    if answers and len(answers) > 1:
        right += [f"\\boxed{{{', '.join(reversed(answers))}}}",
                  "The answers are " + " and ".join(f"${a}$" for a in answers) + "."]
        wrong += [f"\\boxed{{{answers[0]}}}"]
    value = _number(gold)
    if value is not None:
        if isinstance(value, Fraction):
            right += [f"\\boxed{{\\frac{{{value.numerator}}}{{{value.denominator}}}}}",
                      f"The answer is {value.numerator}/{value.denominator}."]
            wrong += [f"\\boxed{{\\frac{{{value.numerator + value.denominator}}}{{{value.denominator}}}}}"]
        else:
            plain = format(value, "f")
            right += [f"\\boxed{{{plain} \\text{{ units}}}}", f"\\boxed{{\\text{{{plain}}}}}",
                      f"The answer is \\${plain}.", f"\\boxed{{{_scientific(value)}}}" if value else "\\boxed{0}"]
            if value == value.to_integral_value() and abs(value) < 10**15:
                right += [f"\\boxed{{\\frac{{{2 * int(value)}}}{{2}}}}"]
            other = value + max(1, abs(value))  # another number at any scale: 0 → 1, -1 → 0, 4.5e33 → 9e33
            wrong += [f"\\boxed{{{format(other, 'f')}}}", f"\\boxed{{{_scientific(other)}}}"]
    return right, wrong


def _choice_forms(item: dict, letter: str) -> tuple[list[str], list[str]]:
    options = item_metadata(item).get("options") or []
    other = next(candidate for candidate in LETTERS[: max(len(options), 2)] if candidate != letter)
    right = [f"The answer is ({letter}).", f"**Answer: {letter}**", f"\\boxed{{{letter}}}",
             f"Therefore, the correct answer is ({letter})."]
    wrong = [f"The answer is ({other}).", f"\\boxed{{{other}}}"]
    if options:
        text = " ".join(options[LETTERS.index(letter)].split())
        right += [f"The answer is {text}.", f"The answer is **{text}**.", f"The answer is ({letter}) {text}."]
        if "$" not in text:
            right += [f"The answer is ${text}$."]
        wrong += [f"The answer is {' '.join(options[LETTERS.index(other)].split())}."]
    return right, wrong


def _kk_forms(item: dict) -> tuple[list[str], list[str]]:
    pairs = re.findall(r"(\w+) is a (knight|knave)", item["answer"])
    flipped = [(pairs[0][0], "knave" if pairs[0][1] == "knight" else "knight"), *pairs[1:]]
    sentences = lambda assignment: ", ".join(f"{name} is a {role}" for name, role in assignment)  # noqa: E731
    return ([f"CONCLUSION: {sentences(pairs)}.", f"So {sentences(reversed(pairs))}.",
             "**Final answer:**\n" + "\n".join(f"- **{name}** is a {role}" for name, role in pairs)],
            [f"CONCLUSION: {sentences(flipped)}."])


def _model_forms(item: dict) -> tuple[list[str], list[str]]:
    """Right and plainly wrong answers to `item`, written the way models write them, built from its gold."""
    answer_format = item["answer_format"]
    if answer_format == "math":
        return _math_forms(item)
    if answer_format == "knights_knaves":
        return _kk_forms(item)
    return _choice_forms(item, item["answer"].strip("()"))


@needs_shared
@pytest.mark.parametrize("name", PRESENT)
def test_answers_written_the_way_models_write_them_score_one_and_wrong_ones_zero(name):
    verify = get_verifier(get_benchmark(name).answer_format)
    items = _shared_items(name).to_dict("records")
    right_items = wrong_scored = 0
    for item in items:
        right, wrong = _model_forms(item)
        right_items += all(verify(response, item).correct for response in right)
        wrong_scored += sum(verify(response, item).correct for response in wrong)
    rate = right_items / len(items)
    print(f"{name}: {right_items}/{len(items)} items ({rate:.2%}) score 1 in every form; {wrong_scored} wrong "
          "answers scored 1")
    assert rate >= 0.995 and wrong_scored == 0
