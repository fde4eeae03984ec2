"""The installed versions of the packages a result depends on, recorded beside the records
(dataflex_rl.records.run_records' `package_versions` column) and compared by the audit. Apart from the records (which
import pandas) because the workflow names PROVENANCE_PACKAGES at parse time."""
from __future__ import annotations

import json
from importlib import metadata
from typing import Iterable

PROVENANCE_PACKAGES = ("torch", "transformers", "dataflex-rl", "reasoning-gym", "math-verify")


def package_versions(packages: Iterable[str] = PROVENANCE_PACKAGES) -> str:
    """Compact JSON {distribution: version} from importlib.metadata, null for a package that is not installed."""
    versions = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return json.dumps(versions, separators=(",", ":"))
