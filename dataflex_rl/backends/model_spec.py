"""A study's base model as its backend sees it: the typed spec the study resolves a `models.<m>` entry to, and what the
backends' dry-run checks read. Torch-free."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from dataflex_rl.backends.registry import get_backend


@dataclass(frozen=True)
class ModelSpec:
    """A base model: its backend, its config entry with the backend's defaults filled in (`settings`, what its
    artefacts depend on), what its jobs ask of their machine over the backend's defaults (`resources`, per rule;
    no result depends on them), and the entry as the config writes it (`written`: what the backend's dry-run checks
    name as given, as a MethodSpec's `params` are its parameters as given)."""

    name: str
    backend: str
    settings: Mapping[str, Any]
    resources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    written: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_entry(cls, name: str, entry: Mapping[str, Any]) -> "ModelSpec":
        """The spec of config entry `models.<name>`, its backend's defaults filled in (Backend.model_settings)."""
        return cls(name, entry["backend"], get_backend(entry["backend"]).model_settings(entry),
                   dict(entry.get("resources") or {}), dict(entry))

    def own(self, section: str) -> dict[str, Any]:
        """The model's own settings over the study's `section` ("training" or "evaluation": `models.<m>.<section>`,
        e.g. the response length a short-context model holds), {} where it takes the study's."""
        return dict(self.written.get(section) or {})

    def setting_key(self, section: str, name: str) -> str:
        """The config key a setting of `section` comes from for this model: its own, else the study's."""
        return f"models.{self.name}.{section}.{name}" if name in self.own(section) else f"{section}.{name}"

    @property
    def declared_context(self) -> int | None:
        """The context in tokens the config declares for the model (`models.<m>.context`), for the dry run where the
        model's config.json cannot be read; None where it declares none."""
        return self.written.get("context")

    @property
    def declared_architecture(self) -> Mapping[str, Any] | None:
        """The config.json keys the config declares for the model (`models.<m>.architecture`), for the dry run where
        its config.json cannot be read; None where it declares none."""
        return self.written.get("architecture")

    def job_resources(self, rule: str) -> dict[str, Any]:
        """A `rule` job's resources: the backend's defaults (Backend.job_resources), then the model's own."""
        return {**get_backend(self.backend).job_resources(rule), **self.resources.get(rule, {})}

    @property
    def path(self) -> str | None:
        """Where the verl backend loads the model from (the embedded backend builds its own)."""
        return self.settings.get("path")

    @property
    def shape(self) -> Mapping[str, Any] | None:
        """The shape the embedded backend builds the model in; None for a model loaded from `path` (verl)."""
        return self.settings.get("shape")

    @property
    def result_settings(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The settings its base's artefacts depend on, and those only its trained runs add (Backend.result_settings)."""
        return get_backend(self.backend).result_settings(self.settings)

    @property
    def builds_base_model(self) -> bool:
        """Whether its backend builds the base (the base_model rule; embedded) rather than loading `path`."""
        return get_backend(self.backend).build_base_model is not None

    @property
    def merges_checkpoint(self) -> bool:
        """Whether its trained runs are merged into a Hugging Face directory before scoring (the merge rule; verl)."""
        return get_backend(self.backend).merge is not None
