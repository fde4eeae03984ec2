"""A train state from a results tree is read without running its code (dataflex_rl/artefacts/train_state.py): a file
whose pickle names a callable is refused before it is called, naming the file and the state folder to delete, and
left in place; a damaged file is still torch's error, which the embedded trainer sets aside. The trainers' own resume
with these loaders: tests/test_step_budgets.py, tests/test_fault_injection.py, tests/test_prompt_selection.py
(embedded), tests/test_verl_trainer.py and tests/test_verl_selection.py (verl)."""
import pickle
import re
from pathlib import Path

import pytest
import torch

from dataflex_rl.artefacts.train_state import UntrustedStateError, load_train_state
from dataflex_rl.backends.verl.selection_rounds import ROUNDS_FOLDER, read_round, round_file, write_round
from pickle_payload import TouchOnLoad, write_payload

REPO = Path(__file__).resolve().parents[1]
REFUSAL = "refused to load this train state: it holds objects beyond tensors and numbers"


def test_a_pickled_payload_is_refused_before_it_runs(tmp_path):
    state, marker = tmp_path / "state" / "abc", tmp_path / "ran"
    state.mkdir(parents=True)
    path = state / "checkpoint.pt"
    write_payload(path, marker, step=3, model={"w": torch.ones(2)})
    payload = path.read_bytes()
    with pytest.raises(UntrustedStateError, match=re.escape(f"{path}: {REFUSAL} (it names getattr), and loading it "
                                                            f"could run code")) as refused:
        load_train_state(path, state)
    assert f"Resume only from results you trust; to train the run from scratch instead, delete {state}." in str(
        refused.value)
    assert not marker.exists()
    assert path.read_bytes() == payload and sorted(p.name for p in state.iterdir()) == ["checkpoint.pt"]

    torch.load(path, weights_only=False)  # the payload is real: an unrestricted load runs it
    assert marker.exists()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_plain_pickle_payload_is_refused_too(tmp_path):
    """Not a torch archive: torch's legacy reader refuses its first opcode, and the file is a well-formed pickle."""
    path, marker = tmp_path / "checkpoint.pt", tmp_path / "ran"
    path.write_bytes(pickle.dumps(TouchOnLoad(marker)))
    with pytest.raises(UntrustedStateError, match=re.escape(f"{path}: {REFUSAL}, and loading it could run code")):
        load_train_state(path, tmp_path)
    assert not marker.exists() and path.exists()


def test_a_damaged_file_is_not_called_untrusted(tmp_path):
    path = tmp_path / "checkpoint.pt"
    torch.save({"step": 1, "w": torch.ones(3)}, path)
    assert load_train_state(path, tmp_path)["step"] == 1
    path.write_bytes(path.read_bytes()[:200])  # truncated
    with pytest.raises(RuntimeError, match="PytorchStreamReader") as damaged:
        load_train_state(path, tmp_path)
    assert not isinstance(damaged.value, UntrustedStateError)
    path.write_bytes(b"\x07not a pickle" * 20)  # overwritten
    with pytest.raises(pickle.UnpicklingError):
        load_train_state(path, tmp_path)


def test_a_round_file_that_would_run_code_is_refused(tmp_path):
    """A verl prompt selection's round file: its own contents read back; a payload is refused, naming the run's state
    folder (the round files' parent's parent)."""
    state, marker = tmp_path / "state", tmp_path / "ran"
    path = round_file(state / ROUNDS_FOLDER, 0)
    written = {"selection": {"round": {"index": 0, "kept": [3, 1, 2], "pending": None}},
               "metrics": {"round": 0, "round_kept": 3, "round_score_clean": float("nan")}}
    write_round(path, written)
    assert read_round(path)["selection"] == written["selection"]
    write_payload(path, marker, selection={"round": None}, metrics={})
    with pytest.raises(UntrustedStateError, match=re.escape(f"{path}: {REFUSAL}")) as refused:
        read_round(path)
    assert f"delete {state}." in str(refused.value) and not marker.exists() and path.exists()


def test_the_refusal_is_documented():
    assert REFUSAL in (REPO / "docs" / "refusals.md").read_text()
