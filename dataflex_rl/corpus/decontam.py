"""Remove training prompts that contain an evaluation item, exactly or with light edits.

A benchmark item that leaks into the training corpus inflates every method's score on it, so the comparison would
measure memorisation. Real leaks rarely copy an item alone: they wrap it in an instruction template, prefix
"Question:", append "Answer with ..." or a chain-of-thought request, re-case or re-space it, or drop or change a word.
So the test is whether a prompt CONTAINS an item, on a normalised text:

* exact: the normalised texts are equal (catches case, whitespace, punctuation edits and multiple-choice items whose
  options were reordered or relabelled);
* containment: the share of the item's word n-grams that occur in the prompt, |grams(item) & grams(prompt)| /
  |grams(item)|, reaches the threshold (the measure of the open decontamination pipelines, e.g. open-instruct's
  n-gram search at 0.5), AND the item's numbers are a sub-multiset of the prompt's numbers. Jaccard, by contrast,
  divides by the union, so the longer the wrapper the lower the score: a short item inside a long instruction is
  missed at any useful Jaccard threshold.

Candidates come from an inverted index over each item's rarest n-grams (a prefix filter: an item needing k of its g
n-grams to match must match one of any g - k + 1 of them), and every candidate is then checked exactly, so the result
equals the brute-force all-pairs containment. An item of fewer than NGRAM words has no n-gram and is matched by the
exact test only: a one- or two-word phrase inside a longer prompt is a coincidence, not a copy.

The number test exists because procedural generators (reasoning-gym) emit siblings from one template that differ only
in their numbers; they share most n-grams, yet each is a different problem and must stay in the corpus.

Both sides are first reduced to the text a reader sees (_rendered): chat-formatted corpora wrap items in markdown
emphasis, HTML tags or LaTeX text styles, whose "*" and "<...>" would otherwise read as operators that differ, so a
copy would count as a sibling. Headers, list markers, "_" and "$" need no rule: they are punctuation, dropped anyway.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import unicodedata
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path
from typing import Sequence

import pandas as pd

from dataflex_rl.artefacts.atomic import write_json, write_parquet
from dataflex_rl.artefacts.provenance import plain_input

NGRAM = 3
MAX_EXAMPLES = 20

# A multiple-choice label at the start of a line: "A)", "(B)", "C.", "D:" (A-J covers MMLU-Pro's ten options).
_OPTION_LABEL = re.compile(r"^\s*\(?([a-j])[).:]\s+")
# Arithmetic operators change the problem ("5 + 3" vs "5 - 3"), so they survive as tokens instead of being dropped.
_OPERATOR = re.compile(r"([+\-*/=<>^%×÷])")
# "-" is a minus only beside a number ("5 - 3", "-7"); elsewhere it is a hyphen or dash ("well-known", "text -- the").
_DASH = re.compile(r"(?<!\d)(?<!\d )-+(?! ?\d)")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# Every other non-word character becomes a space, except a decimal point between digits ("3.5" is not "35").
_OTHER_PUNCT = re.compile(r"(?!(?<=\d)\.(?=\d))[^\w\s+\-*/=<>^%×÷]|_")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# A quoted text is content, like a number: the letter r in "free the witness" is another problem than in "more do".
_QUOTED = re.compile(r'"([^"\n]+)"|\u201c([^\u201d\n]+)\u201d')
_OPERATOR_WORD = re.compile(r"^[+\-*/=<>^%×÷]$")
# Markdown emphasis: a run of one to three "*" that opens after a space, "(", "[" or a quote and closes, the same run,
# before a space, closing punctuation or the end, around text that neither starts nor ends with a space (it may span
# lines: chat corpora bold whole multi-paragraph questions). A "*" between operands ("2*3*4", "(a+b)*(c+d)*2",
# "5 * 3 * 2") is multiplication and stays, and so is one beside a LaTeX brace ("\begin{align*}", "\log^{*}").
_EMPHASIS = re.compile(r"(?<![^\s(\[\"'])(\*{1,3})(?=[^\s*])(.+?)(?<=[^\s*])\1(?![^\s)\]\"'.,;:!?])", re.S)
# HTML tags by name, with attributes only as name=value: "a<b and c>d" is two comparisons, not a tag. Block tags end a
# line; inline ones vanish ("H<sub>2</sub>O" reads "H2O").
_HTML_TAG = re.compile(
    r"</?(p|div|br|hr|h[1-6]|ul|ol|li|blockquote|pre|table|thead|tbody|tr|td|th|section|article|header|footer|"
    r"b|i|u|s|em|strong|span|sup|sub|a|small|mark|code|font|del|ins|q)"
    r"(?:\s+[\w:-]+\s*=\s*(?:\"[^\"<>]*\"|'[^'<>]*'|[^\s\"'<>]+))*\s*/?>", re.I)
_HTML_INLINE = {"b", "i", "u", "s", "em", "strong", "span", "sup", "sub", "a", "small", "mark", "code", "font", "del",
                "ins", "q"}
# LaTeX text styles: their argument is the text; its braces are punctuation.
_LATEX_STYLE = re.compile(r"\\(?:text(?:bf|it|sl|sc|tt|up|md)|emph|underline)(?![a-z])", re.I)
# The two one-letter English words; any other single letter in a problem is a symbol (a variable, the letter counted).
_WORDS_OF_ONE_LETTER = {"a", "i"}


def normalize_text(text: str) -> str:
    """Canonical form under which trivially edited copies compare equal.

    NFKC + casefold; option labels stripped and each run of option lines sorted in place, so that reordered or
    relabelled choices give the same text and an instruction after the options stays after them; then _clean.
    """
    return _normal_forms(text)[0]


def _normal_forms(text: str) -> tuple[str, str]:
    """(normalize_text's form, the same with option lines left as they are: labels and order).

    The exact test compares the first. The containment test reads the second: a wrapper's text glued to the last
    option ("D) 2400 Put your answer in a box") would move that option, and the item's n-grams with it, when sorted,
    and a line that a re-spaced copy happens to start with "g: 1 - 4*g" would lose its variable to label stripping.
    """
    text = _rendered(unicodedata.normalize("NFKC", text).casefold().replace("\u2212", "-"))
    lines, options, labelled = [], [], False
    for line in text.splitlines():
        label = _OPTION_LABEL.match(line)
        if label:
            options.append(line[label.end():].strip())
            labelled = True
        elif line.strip() or not options:  # a blank line inside a run of options does not end it
            lines += sorted(options) + [line]
            options = []
    exact = _clean("\n".join(lines + sorted(options)))
    return exact, (_clean(text) if labelled else exact)


def _rendered(text: str) -> str:
    """The text with its formatting markup removed: markdown emphasis, HTML tags, LaTeX text styles."""
    if "<" in text:
        text = _HTML_TAG.sub(lambda tag: "" if tag[1].lower() in _HTML_INLINE else "\n", text)
    if "\\" in text:
        text = _LATEX_STYLE.sub(" ", text)
    while "*" in text and (stripped := _EMPHASIS.sub(r"\2", text)) != text:  # again for emphasis inside emphasis
        text = stripped
    return text


def _clean(text: str) -> str:
    """Apostrophes deleted ("don't" = "dont"); other punctuation dropped except arithmetic operators (a "-" counts as
    minus only beside a number, whatever whitespace lies between) and decimal points; whitespace collapsed."""
    text = " ".join(text.replace("'", "").replace("\u2019", "").split())  # lines no longer matter here
    text = _DASH.sub(" ", text)
    text = _THOUSANDS_COMMA.sub("", text)
    text = _OPERATOR.sub(r" \1 ", text)
    text = _OTHER_PUNCT.sub(" ", text)
    return " ".join(text.split())


def _grams(norm: str) -> frozenset[str]:
    """The word n-grams of a normalised text; empty when it has fewer than NGRAM words."""
    words = norm.split()
    return frozenset(map(" ".join, zip(*(words[i:] for i in range(NGRAM)))))


def _symbols(words: list[str]) -> list[str]:
    """The numbers, operators and one-letter symbols of normalised words, in order: what tells template siblings
    apart ("5 + 9" from "5 - 9", the letter "r" from "e")."""
    return [s for w in words for s in (_NUMBER.findall(w) or ([w] if _OPERATOR_WORD.match(w) or (
        len(w) == 1 and w.isalpha() and w not in _WORDS_OF_ONE_LETTER) else []))]


def _first_positions(norm: str) -> dict[str, int]:
    words = norm.split()
    positions: dict[str, int] = {}
    for q, gram in enumerate(map(" ".join, zip(*(words[i:] for i in range(NGRAM))))):
        positions.setdefault(gram, q)
    return positions


def _digest(norm: str) -> bytes:
    return hashlib.blake2b(norm.encode(), digest_size=16).digest()


class _ItemIndex:
    """The benchmark items, normalised, with an inverted index from n-gram to the items that list it in their prefix.

    An item of g n-grams is contained when at least k = ceil(threshold * g) of them occur in the prompt, so it must
    share one of any g - k + 1 of its n-grams with the prompt; the index lists its g - k + 1 rarest ones (by how many
    items hold them), which keeps the lists that common template n-grams would fill short.
    """

    def __init__(self, prompts: Sequence[str], threshold: float):
        self.threshold = threshold
        forms = [_normal_forms(str(p)) for p in prompts]
        self.words = [reading.split() for _, reading in forms]
        self.grams = [_grams(reading) for _, reading in forms]
        self.positions = [_first_positions(reading) for _, reading in forms]  # n-gram -> its first position
        self.symbols = [_symbols(words) for words in self.words]
        self.quoted = [[f" {normalize_text(a or b)} " for a, b in _QUOTED.findall(str(p))] for p in prompts]
        self.exact: dict[bytes, int] = {}
        for j, (exact, _) in enumerate(forms):
            if exact:  # an empty prompt carries no content to leak
                self.exact.setdefault(_digest(exact), j)
        frequency = Counter(g for grams in self.grams for g in grams)
        self.postings: dict[str, list[int]] = {}
        for j, grams in enumerate(self.grams):
            if grams:
                prefix = sorted(grams, key=lambda g: (frequency[g], g))[: len(grams) - self._needed(j) + 1]
                for g in prefix:
                    self.postings.setdefault(g, []).append(j)

    def _needed(self, j: int) -> int:
        """n-grams item j must share: the threshold's share, or, for an item so short that one dropped or changed
        word (which removes up to NGRAM of its n-grams) would take it below the threshold, all but one word's; never
        fewer than two (all, for an item of one n-gram) for an item of words only, so that a stock phrase in another
        text is no match. An item with symbols may match on one, since the symbols where it sits must then match too
        ("6 + 5." is "Calculate 6 + 5." with a word dropped, and "6 + 5 * x" is another problem), but only as at least
        half of the prompt (see match): "7 - 0" inside a longer problem is a fragment of it, not a copy."""
        size = len(self.grams[j])
        return min(math.ceil(self.threshold * size), max(size - NGRAM, 1 if self.symbols[j] else min(size, 2)))

    def match(self, prompt: str) -> tuple[int, str, float, float] | None:
        """(item, kind, containment, jaccard) of the item the prompt holds, or None. Kinds: "exact" (the normalised
        texts are equal), "contained" (every n-gram of the item is in a longer prompt: a wrapped copy), "near"
        (containment in [threshold, 1): an edited copy). Among several, the highest containment, ties to the earlier
        item."""
        exact, reading = _normal_forms(prompt)
        if not exact:
            return None
        j = self.exact.get(_digest(exact))
        if j is not None:
            return j, "exact", 1.0, 1.0
        words = reading.split()
        sequence = list(map(" ".join, zip(*(words[i:] for i in range(NGRAM)))))
        grams = frozenset(sequence)
        best = None
        for j in self._candidates(grams):
            if len(grams & self.grams[j]) < self._needed(j):
                continue
            shared, start, stop = self._aligned(words, sequence, j)
            if shared < 2 and 2 * len(self.words[j]) < len(words):
                continue
            if shared >= self._needed(j) and self._same_problem(j, words[start:stop]):
                containment = shared / len(self.grams[j])
                if best is None or containment > best[2]:
                    jaccard = len(grams & self.grams[j]) / len(grams | self.grams[j])
                    best = (j, "contained" if containment == 1 else "near", containment, jaccard)
        return best

    def _candidates(self, grams: frozenset[str]) -> list[int]:
        """The items a prompt of these n-grams may contain, in order: those with a prefix n-gram among them (any other
        item shares too few of its n-grams with the prompt). benchmarks/decontamination.py puts MinHash-LSH here."""
        return sorted({j for g in grams for j in self.postings.get(g, ())})

    def _same_problem(self, j: int, span: list[str]) -> bool:
        """Whether the prompt's words where item j sits pose item j's problem, not a template sibling's: the same
        numbers, operators and one-letter symbols in order, every quoted text of the item, and no word standing for
        two of the item's words. A consistent renaming (Susan -> Barbara throughout) is the same problem; a copy in
        which one person's name takes another's place ("What is Barbara to Joseph?" -> "... to Kai?", where Kai is
        already in the item) asks about someone else, and so does another problem."""
        if self.symbols[j] != _symbols(span):
            return False
        text = f" {' '.join(span)} "
        if not all(quoted in text for quoted in self.quoted[j]):
            return False
        stands_for: dict[str, str] = {}
        item = self.words[j]
        for tag, i1, i2, p1, p2 in SequenceMatcher(None, item, span, autojunk=False).get_opcodes():
            if tag in ("equal", "replace") and i2 - i1 == p2 - p1:
                for original, copy in zip(item[i1:i2], span[p1:p2]):
                    if stands_for.setdefault(copy, original) != original:
                        return False
        return True

    def _aligned(self, words: list[str], sequence: list[str], j: int) -> tuple[int, int, int]:
        """Where item j sits in the prompt: (distinct n-grams of the item held there, first word, end word).

        Each shared n-gram pairs a prompt position p with its item position q; the copy lies at the most common
        offset p - q, give or take one word (a dropped or inserted word shifts the rest), and only the pairs there
        count, so n-grams scattered over a long prompt do not add up to a match. The span runs from where the item's
        first word falls to where its last word falls, and on through any arithmetic it is joined to ("9 + 2" inside
        "9 + 2 - 4" is part of another expression, whose symbols then differ).
        """
        where = self.positions[j]
        pairs = [(p, where[g]) for p, g in enumerate(sequence) if g in where]
        offsets = Counter(p - q for p, q in pairs)
        mode = max(offsets, key=lambda d: (offsets[d - 1] + offsets[d] + offsets[d + 1], -d))
        near = [(p, q) for p, q in pairs if abs(p - q - mode) <= 1]
        (p_first, q_first), (p_last, q_last) = min(near), max(near)
        start, stop = max(p_first - q_first, 0), min(p_last - q_last + len(self.words[j]), len(words))
        while start > 1 and _OPERATOR_WORD.match(words[start - 1]) and _symbols(words[start - 2: start - 1]):
            start -= 2
        while stop + 1 < len(words) and _OPERATOR_WORD.match(words[stop]) and _symbols(words[stop + 1: stop + 2]):
            stop += 2
        return len({q for _, q in near}), start, stop


def containing(prompts: Sequence[str], items: Sequence[str],
               threshold: float) -> dict[int, tuple[int, str, float, float]]:
    """{prompt position: (item position, kind, containment, jaccard)} of every prompt that holds one of `items`, as
    decontamination finds it (_ItemIndex.match: the same normalised text, or the item inside a template or edited):
    the test the corpus is held to, for any prompts (a prompt selection's validation prompts, too)."""
    index = _ItemIndex(items, threshold)
    return {i: found for i, prompt in enumerate(prompts) if (found := index.match(str(prompt))) is not None}


def decontaminate(corpus: pd.DataFrame, benchmarks: pd.DataFrame, threshold: float = 0.8) -> tuple[pd.DataFrame, dict]:
    """Drop corpus rows whose prompt contains a benchmark prompt; return (kept rows, JSON-serialisable audit).

    The kept rows keep the corpus's order and columns. Each flagged row is attributed to one benchmark item (see
    _ItemIndex.match), so per-benchmark counts sum to the number removed, and so do the per-source ones.
    """
    bench_names = benchmarks["benchmark"].tolist()
    corpus_prompts = corpus["prompt"].tolist()
    match = containing(corpus_prompts, benchmarks["prompt"].tolist(), threshold)

    flagged = sorted(match)
    kinds = Counter(kind for _, kind, _, _ in match.values())
    per_benchmark = {name: 0 for name in bench_names}
    for j, _, _, _ in match.values():
        per_benchmark[bench_names[j]] += 1

    corpus_ids = corpus["id"].tolist()
    bench_ids, bench_prompts = benchmarks["id"].tolist(), benchmarks["prompt"].tolist()
    examples = [
        {
            "corpus_id": corpus_ids[i],
            "prompt": corpus_prompts[i],
            "benchmark": bench_names[match[i][0]],
            "benchmark_id": bench_ids[match[i][0]],
            "benchmark_prompt": bench_prompts[match[i][0]],
            "kind": match[i][1],
            "containment": round(match[i][2], 4),
            "jaccard": round(match[i][3], 4),
        }
        for i in flagged[:MAX_EXAMPLES]
    ]
    keep = [i not in match for i in range(len(corpus))]
    kept = corpus.loc[keep].reset_index(drop=True)
    removed_by_source = corpus.loc[[not k for k in keep], "source"].value_counts()
    per_source = {str(source): {"rows": int(rows), "removed": int(removed_by_source.get(source, 0))}
                  for source, rows in corpus["source"].value_counts(sort=False).sort_index().items()}
    audit = {
        "params": {"threshold": threshold, "ngram": NGRAM},
        "counts": {
            "corpus_rows": len(corpus),
            "exact_hits": kinds["exact"],
            "contained_hits": kinds["contained"],
            "near_hits": kinds["near"],
            "removed": len(flagged),
            "kept": len(kept),
        },
        "per_benchmark": per_benchmark,
        "per_source": per_source,  # where the removed rows came from: the generators, the researcher's files
        "examples": examples,
    }
    return kept, audit


def decontaminate_files(
    corpus_path: str | os.PathLike,
    benchmark_paths: Sequence[str | os.PathLike],
    out_corpus: str | os.PathLike,
    out_audit: str | os.PathLike,
    **params,
) -> dict:
    """File-level entry for the corpus rule: parquet in (one file per benchmark), cleaned parquet and JSON audit out
    (both written atomically). The audit's `inputs` records the sha256 of the corpus and of each benchmark's items as
    read ({role: {path, sha256}}, dataflex_rl.artefacts.provenance), so that items changed afterwards are noticed."""
    benchmarks = pd.concat([pd.read_parquet(path) for path in benchmark_paths], ignore_index=True)
    kept, audit = decontaminate(pd.read_parquet(corpus_path), benchmarks, **params)
    audit["inputs"] = {"corpus": plain_input(corpus_path),
                       **{f"items:{Path(path).stem}": plain_input(path) for path in benchmark_paths}}
    write_parquet(out_corpus, kept)
    write_json(out_audit, audit)
    return audit
