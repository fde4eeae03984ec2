"""verl's reward function (`reward.custom_reward_function.path=pkg://dataflex_rl.backends.verl.reward`): the
embedded path's verifiers on one response, or a noisy_rewards regime's draw for a marked prompt.

verl calls `compute_score` once per response with the row's `data_source`, `reward_model.ground_truth` and
`extra_info` (dataflex_rl.backends.verl.dataset), plus `reward_kwargs` from the config: the run's `seed`. It passes
no step or rollout index, so a marked prompt's reward is drawn per (seed, prompt id, response text)
(`noisy_reward_of_response`) rather than per (seed, prompt id, step, rollout) as in the embedded trainer: the same
Bernoulli(p) rate, unrelated to whether the answer is right, but identical responses of a prompt share a draw.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Mapping, Sequence

from dataflex_rl.regimes.noisy_rewards import noisy_reward_of_response
from dataflex_rl.verify.processes import POOL_MIN_CALLS, in_processes
from dataflex_rl.verify.verifiers import reward


def row_item(ground_truth: str, extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """The verifier's item (dataflex_rl.artefacts.items) rebuilt from a verl row."""
    return {"id": extra_info["id"], "domain": extra_info["domain"], "prompt": extra_info["question"],
            "answer": ground_truth,
            "answer_format": extra_info["answer_format"], "metadata": extra_info["metadata"]}


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any], *,
                  seed: int, **_: Any) -> float:
    p = extra_info.get("noise_p")
    if p is not None:
        return noisy_reward_of_response(seed, extra_info["id"], solution_str, p)
    return reward(solution_str, row_item(ground_truth, extra_info))


# Below this many responses the rewards are scored in the round process (verify.processes)
POOL_MIN_RESPONSES = POOL_MIN_CALLS


def _score(call: tuple, seed: int) -> float:
    return float(compute_score(*call, seed=seed))


def scores(calls: Sequence[tuple], *, seed: int, workers: int = 1) -> list[float]:
    """compute_score of each (data_source, response text, ground truth, extra_info) call, in `workers` processes
    where there are POOL_MIN_RESPONSES or more (verify.processes.in_processes); in order either way."""
    return in_processes(partial(_score, seed=seed), calls, workers=workers, minimum=POOL_MIN_RESPONSES)
