"""A small procedural science generator (reasoning-gym has no science tasks).

Three kinds of four-option multiple-choice questions with lettered options, so that the embedded default exercises the
multiple-choice answer path: unit conversion, constant-velocity kinematics and molar mass. Distractors are the answers a
student gets from the usual mistakes (wrong power of ten, dividing instead of multiplying, a dropped subscript).
"""
from __future__ import annotations

import random

from dataflex_rl.artefacts.items import LETTERS

_LENGTH_UNITS = {"km": 1000.0, "m": 1.0, "cm": 0.01, "mm": 0.001}
_MASS_UNITS = {"kg": 1000.0, "g": 1.0, "mg": 0.001}
_ATOMIC_MASS = {"H": 1, "C": 12, "N": 14, "O": 16, "Na": 23, "Mg": 24, "S": 32, "Cl": 35.5, "K": 39, "Ca": 40}
_COMPOUNDS = {
    "H2O": {"H": 2, "O": 1}, "CO2": {"C": 1, "O": 2}, "NH3": {"N": 1, "H": 3}, "CH4": {"C": 1, "H": 4},
    "NaCl": {"Na": 1, "Cl": 1}, "MgO": {"Mg": 1, "O": 1}, "H2SO4": {"H": 2, "S": 1, "O": 4}, "CaCO3": {"Ca": 1, "C": 1, "O": 3},
    "KCl": {"K": 1, "Cl": 1}, "HCl": {"H": 1, "Cl": 1}, "C2H6": {"C": 2, "H": 6}, "NO2": {"N": 1, "O": 2},
    "SO2": {"S": 1, "O": 2}, "CaO": {"Ca": 1, "O": 1}, "C2H5OH": {"C": 2, "H": 6, "O": 1}, "MgCl2": {"Mg": 1, "Cl": 2},
}
KINDS = ("unit_conversion", "kinematics", "molar_mass")


def _fmt(x: float) -> str:
    """Shortest faithful decimal text: 3500.0 -> '3500', 0.35 -> '0.35'."""
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    return text if text not in ("", "-0") else "0"


def _unit_conversion(rng: random.Random) -> tuple[str, str, list[str], str]:
    table = rng.choice([_LENGTH_UNITS, _MASS_UNITS])
    src, dst = rng.sample(sorted(table), 2)
    value = rng.choice([rng.randint(1, 99), rng.randint(1, 99) / 10])
    factor = table[src] / table[dst]
    right = value * factor
    wrong = [value / factor, right * 10, right / 10, right * 100, right / 100]
    return f"Convert {_fmt(value)} {src} to {dst}.", _fmt(right), [_fmt(w) for w in wrong], "unit_conversion"


def _kinematics(rng: random.Random) -> tuple[str, str, list[str], str]:
    speed, time = rng.randint(2, 30), rng.randint(2, 20)
    right = speed * time
    wrong = [speed + time, round(speed / time, 2), right * 2, right + speed, abs(speed - time)]
    question = f"A cart moves at a constant {speed} m/s for {time} s. How far does it travel, in metres?"
    return question, _fmt(right), [_fmt(w) for w in wrong], "kinematics"


def _molar_mass(rng: random.Random) -> tuple[str, str, list[str], str]:
    formula = rng.choice(sorted(_COMPOUNDS))
    atoms = _COMPOUNDS[formula]
    right = sum(_ATOMIC_MASS[el] * n for el, n in atoms.items())
    once_each = sum(_ATOMIC_MASS[el] for el in atoms)  # forgot the subscripts
    wrong = [once_each, right + 16, right - 1, right * 2, right + 2]
    return f"What is the molar mass of {formula} in g/mol?", _fmt(right), [_fmt(w) for w in wrong], "molar_mass"


_MAKERS = {"unit_conversion": _unit_conversion, "kinematics": _kinematics, "molar_mass": _molar_mass}


def science_question(kind: str, rng: random.Random) -> dict:
    """One multiple-choice item: question with options A-D on their own lines, the gold letter and the option texts."""
    if kind not in _MAKERS:
        raise ValueError(f"unknown science kind {kind!r}; known: {', '.join(KINDS)}")
    stem, right, wrong, _ = _MAKERS[kind](rng)
    distractors = []
    for option in wrong:
        if option != right and option not in distractors:
            distractors.append(option)
    options = [right] + rng.sample(distractors, 3)
    rng.shuffle(options)
    letter = LETTERS[options.index(right)]
    lines = [stem] + [f"{LETTERS[i]}) {text}" for i, text in enumerate(options)]
    return {
        "question": "\n".join(lines),
        "answer": letter,
        "metadata": {"kind": kind, "options": options, "answer_text": right},
    }


def generate_science(kind: str, n: int, seed: int) -> list[dict]:
    rng = random.Random(f"science:{kind}:{seed}")
    return [science_question(kind, rng) for _ in range(n)]
