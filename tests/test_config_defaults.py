"""The schema's defaults are filled as Snakemake's `validate` fills them (the workflow used it until its pandas import
cost every dry run seconds), and by hand-known cases."""
import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from dataflex_rl.config_checks import fill_schema_defaults

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "config/schema.yaml"
SCHEMA = yaml.safe_load(SCHEMA_PATH.read_text())
STUDY_CONFIGS = ["config.yaml", "smoke.yaml", "paper.yaml", "released.yaml"]


def _config(name):
    return yaml.safe_load((REPO / "config" / name).read_text())


@pytest.mark.parametrize("name", STUDY_CONFIGS)
@pytest.mark.parametrize("stats", [None, {}, {"pairing": "unpaired"}, {"confidence": 0.9}])
def test_defaults_filled_as_snakemake_validate_fills_them(name, stats):
    config = _config(name)
    if stats is not None:
        config["stats"] = stats
    theirs, ours = copy.deepcopy(config), copy.deepcopy(config)
    validate(theirs, schema=str(SCHEMA_PATH))
    fill_schema_defaults(ours, SCHEMA)
    assert ours == theirs


def test_a_default_is_set_only_where_absent_and_only_inside_a_given_mapping():
    config = _config("config.yaml")
    config.pop("stats", None)
    fill_schema_defaults(config, SCHEMA)
    assert "stats" not in config  # the default of stats.pairing needs a `stats` mapping to sit in
    config["stats"] = {"confidence": 0.9}
    fill_schema_defaults(config, SCHEMA)
    assert config["stats"] == {"confidence": 0.9, "pairing": "paired"}
    config["stats"] = {"pairing": "shared_seeds"}
    fill_schema_defaults(config, SCHEMA)
    assert config["stats"] == {"pairing": "shared_seeds"}
