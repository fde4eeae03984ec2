"""The benchmark registry: the embedded procedural stand-ins and the paper's 12 real benchmarks.

Each embedded stand-in is also a training-corpus source (the corpus draws the same generators with another seed and is
then decontaminated against the held-out benchmark items). The real benchmarks are read from local files.
"""
from __future__ import annotations

from dataclasses import dataclass

from dataflex_rl.tasks.sources import DOMAINS, TaskSource


@dataclass(frozen=True)
class Benchmark:
    """A scored evaluation set. `source` is set for procedural stand-ins; real ones are loaded from a local file."""

    name: str
    domain: str
    answer_format: str
    stands_for: str
    size: int | None = None
    source: TaskSource | None = None

    @property
    def procedural(self) -> bool:
        return self.source is not None


def _rg(name: str, domain: str, **params) -> TaskSource:
    return TaskSource(name=name, domain=domain, generator="reasoning_gym", dataset=name, params=params)


def _sci(name: str) -> TaskSource:
    return TaskSource(name=name, domain="science", generator="science", dataset=name)


# Small parameter ranges: a ~1M-parameter model must be able to learn some of each within minutes.
_EMBEDDED_SOURCES = {
    "basic_arithmetic": (_rg("basic_arithmetic", "math", min_terms=2, max_terms=2, min_digits=1, max_digits=2,
                             operators=("+", "-"), allow_parentheses=False, allow_negation=False), "MATH-500"),
    "chain_sum": (_rg("chain_sum", "math", min_terms=2, max_terms=3, min_digits=1, max_digits=1), "GSM8K"),
    "products": (_rg("products", "math", min_terms=2, max_terms=2, min_digits=1, max_digits=2), "Minerva-Math"),
    "gcd": (_rg("gcd", "math", max_value=30), "AIME-2024"),
    "simple_equations": (_rg("simple_equations", "math", min_terms=2, max_terms=2, max_value=10), "OlympiadBench"),
    "syllogism": (_rg("syllogism", "logic"), "BBH logical deduction"),
    "family_relationships": (_rg("family_relationships", "logic", min_family_size=3, max_family_size=4),
                             "BBH tracking shuffled objects"),
    "aiw": (_rg("aiw", "logic", max_entities=3), "Knights&Knaves"),
    "letter_counting": (_rg("letter_counting", "logic", min_words=3, max_words=5), "ZebraLogic"),
    "unit_conversion": (_sci("unit_conversion"), "MMLU-Pro physics"),
    "molar_mass": (_sci("molar_mass"), "MMLU-Pro chemistry"),
    "kinematics": (_sci("kinematics"), "GPQA-Diamond"),
}

EMBEDDED_BENCHMARKS = {
    name: Benchmark(name=name, domain=src.domain, answer_format=src.answer_format, stands_for=real, source=src)
    for name, (src, real) in _EMBEDDED_SOURCES.items()
}

PAPER_BENCHMARKS = {
    b.name: b
    for b in (
        Benchmark("MATH-500", "math", "math", "MATH-500", 500),
        Benchmark("AIME-2024", "math", "math", "AIME-2024", 30),
        Benchmark("OlympiadBench", "math", "math", "OlympiadBench", 675),
        Benchmark("Minerva-Math", "math", "math", "Minerva-Math", 272),
        Benchmark("GSM8K", "math", "math", "GSM8K", 1319),
        Benchmark("Knights&Knaves", "logic", "knights_knaves", "Knights&Knaves"),
        Benchmark("BBH-logical-deduction", "logic", "exact", "BBH logical deduction", 750),
        Benchmark("BBH-tracking-shuffled-objects", "logic", "exact", "BBH tracking shuffled objects", 750),
        Benchmark("ZebraLogic", "logic", "multiple_choice", "ZebraLogic"),
        Benchmark("MMLU-Pro-chemistry", "science", "multiple_choice", "MMLU-Pro chemistry", 1132),
        Benchmark("MMLU-Pro-physics", "science", "multiple_choice", "MMLU-Pro physics", 1299),
        Benchmark("GPQA-Diamond", "science", "multiple_choice", "GPQA-Diamond", 198),
    )
}

REGISTRY = {**EMBEDDED_BENCHMARKS, **PAPER_BENCHMARKS}
assert {b.domain for b in REGISTRY.values()} <= set(DOMAINS)


def get_benchmark(name: str) -> Benchmark:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(REGISTRY))}") from None


def get_source(name: str) -> TaskSource:
    """A corpus source by name (every embedded stand-in is one)."""
    benchmark = get_benchmark(name)
    if benchmark.source is None:
        raise ValueError(f"{name!r} is a real benchmark, not a procedural corpus source; "
                         f"sources: {', '.join(sorted(EMBEDDED_BENCHMARKS))}")
    return benchmark.source
