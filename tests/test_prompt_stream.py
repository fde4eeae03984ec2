"""Matched seeds mean the same prompt order; a resumed stream continues exactly where it stopped."""
import pytest

from dataflex_rl.training.prompt_stream import PromptStream

DOMAINS = ["math"] * 6 + ["logic"] * 3 + ["science"] * 3


def test_same_seed_same_order_and_every_row_once_per_epoch():
    a, b = PromptStream(DOMAINS, seed=4), PromptStream(DOMAINS, seed=4)
    first_epoch = a.draw(12)
    assert first_epoch == b.draw(12)
    assert sorted(first_epoch) == list(range(12))
    assert first_epoch != PromptStream(DOMAINS, seed=5).draw(12)
    assert sorted(a.draw(12)) == list(range(12))  # the next epoch is a fresh permutation of all rows


def test_mixture_draws_follow_the_domain_probabilities():
    stream = PromptStream(DOMAINS, seed=1)
    rows = stream.draw(30, {"math": 0.0, "logic": 1.0, "science": 0.0})
    assert all(DOMAINS[r] == "logic" for r in rows)
    assert stream.corpus_shares() == {"logic": 0.25, "math": 0.5, "science": 0.25}
    with pytest.raises(ValueError, match=r"\['code'\] are not in the corpus"):
        stream.draw(1, {"code": 1.0})


def test_state_round_trip_continues_the_same_sequence():
    straight = PromptStream(DOMAINS, seed=2)
    straight.draw(7, {"math": 0.5, "logic": 0.25, "science": 0.25})
    expected = straight.draw(9, {"math": 0.5, "logic": 0.25, "science": 0.25})

    first = PromptStream(DOMAINS, seed=2)
    first.draw(7, {"math": 0.5, "logic": 0.25, "science": 0.25})
    resumed = PromptStream(DOMAINS, seed=2)
    resumed.load_state_dict(first.state_dict())
    assert resumed.draw(9, {"math": 0.5, "logic": 0.25, "science": 0.25}) == expected
