"""A method of a study: a named configuration of a catalogued data policy. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from dataflex_rl.artefacts.layout import benchmark_items
from dataflex_rl.policies.catalogue import CATALOGUE, Family, Role


@dataclass(frozen=True)
class MethodSpec:
    """A named configuration: the catalogue policy it runs, its parameters as given (the registry builds the policy
    from them), its family and the method it is compared against."""

    name: str
    policy: str
    params: dict
    family: Family
    control: str | None = None

    @classmethod
    def from_job(cls, method: Mapping[str, Any]) -> MethodSpec:
        """The method as a job carries it, as plain JSON (`Study.train_job`, the verl run job): its family by name."""
        return cls(**{**method, "family": Family(method["family"])})

    def resolved_params(self) -> dict[str, Any]:
        """Every parameter and family option with the catalogue's defaults for its `semantics` filled in: what the
        run's fingerprint holds, so that writing a default out retrains nothing. An option added after runs were
        recorded (`Param.recorded_unset` false) is left out while unset, so those runs keep their fingerprints."""
        spec = CATALOGUE[self.policy]
        accepted = spec.accepted()
        return {name: value for name, value in spec.resolve(self.params).items()
                if value is not None or accepted[name].recorded_unset}

    def _validation_entry(self) -> Mapping[str, Any] | None:
        """The `validation` option where it is a mapping; anything else the parameter check refuses, naming it."""
        entry = self.resolved_params().get("validation")
        return entry if isinstance(entry, Mapping) else None

    def validation_file(self) -> Mapping[str, Any] | None:
        """A prompt selection's `validation` file entry (prompt_selection.validation_file); None: a benchmark or
        corpus rows, and for every other method."""
        entry = self._validation_entry()
        return entry if entry and "path" in entry else None

    def validation_benchmark(self) -> str | None:
        """The benchmark a prompt selection draws its validation prompts from (its `validation` option
        {benchmark: name}: prompt_selection.benchmark_split), whose items the study then holds out of that benchmark's
        test score; None: a file or corpus rows, and for every other method."""
        entry = self._validation_entry()
        return entry.get("benchmark") if entry else None

    def validation_input(self) -> str | None:
        """The file a prompt selection's own validation prompts are read from: its validation file, or its validation
        benchmark's items; None where they are corpus rows (or the method selects no prompts)."""
        if file := self.validation_file():
            return file["path"]
        benchmark = self.validation_benchmark()
        return benchmark_items(benchmark) if benchmark else None

    def validation_rows(self) -> list[dict]:
        """A prompt selection's own validation prompts as corpus rows, in their file's order: its `validation` file's
        rows, or its validation benchmark's items; [] where it draws them from the corpus (or selects no prompts).
        A backend puts them after the corpus's rows, where the selector draws its validation prompts from."""
        from dataflex_rl.prompt_selection.validation_file import read_benchmark_items, read_validation_file

        if entry := self.validation_file():
            return read_validation_file(entry).to_dict("records")
        if self.validation_benchmark():
            return read_benchmark_items(self.validation_input()).to_dict("records")
        return []

    def validation_from_corpus(self) -> bool:
        """Whether this is a prompt selection drawing its validation prompts from the training corpus (no `validation`
        source of its own): the study then holds those rows out of every run on that corpus."""
        return self.family.role is Role.PROMPT_SELECTION and not self.resolved_params().get("validation")
