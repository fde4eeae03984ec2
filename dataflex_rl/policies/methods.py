"""A method of a study: a named configuration of a catalogued data policy. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from dataflex_rl.policies.catalogue import CATALOGUE, Family


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

    def validation_file(self) -> Mapping[str, Any] | None:
        """A prompt selection's `validation` file entry (prompt_selection.validation_file); None: corpus rows, and
        for every other method."""
        return self.resolved_params().get("validation")
