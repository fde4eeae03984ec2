"""Scoring decodes greedily by default; seeded sampling is an option that reproduces itself."""
import pandas as pd
import pytest

from dataflex_rl.backends.embedded.generation import EmbeddedGenerator
from dataflex_rl.backends.embedded.settings import WarmupSettings
from dataflex_rl.evaluate.scoring import score_items
from dataflex_rl.corpus.build import benchmark_items

from tiny_base import TEMPLATE, tiny_base


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring")
    tiny_base(root, WarmupSettings(steps=20, batch_size=16, learning_rate=1e-2), items_per_domain=20)
    generator = EmbeddedGenerator.load(root / "base")
    items = pd.concat([benchmark_items(name, n_items=8, seed=1000) for name in ("basic_arithmetic", "kinematics")])

    def score(**decoding):
        return score_items(generator, items, TEMPLATE, max_new_tokens=6, batch_size=4, **decoding)

    return score


def test_temperature_zero_is_the_greedy_default(scored):
    pd.testing.assert_frame_equal(scored(), scored(temperature=0.0, seed=5))


def test_seeded_sampling_reproduces_itself_and_differs_by_seed(scored):
    first, again, other = scored(temperature=1.0, seed=1), scored(temperature=1.0, seed=1), scored(temperature=1.0,
                                                                                                    seed=2)
    pd.testing.assert_frame_equal(first, again)
    assert (first["response"] != other["response"]).any()
    assert (first["response"] != scored()["response"]).any()
