"""The seed of each vLLM request and the order of its completions, shared by scoring (scoring.py) and the selection
round's sampler (probe_rollouts.py).

vLLM gives every seeded request its own random generator, seeded by the request's seed, and the n completions of a
request the seeds seed, seed + 1, … (vLLM: v1/engine/parallel_sampling.py, ParentRequest, "Each child gets a clone with
a unique seed"). One seed for every request would therefore draw the same random numbers for every prompt: two copies
of a prompt decode one stream, and different prompts' samples are coupled (the j-th samples of all prompts share
their uniforms). A seed per position in the batch would make an answer depend on the batch's order. So each
request's seed is the job's seed and the prompt's tokens, hashed: independent across prompts, the same for a prompt
wherever it sits in the batch.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

SEED_BITS = 31  # vLLM's seed is an int that torch.Generator.manual_seed takes; 31 bits fit any signed 32-bit path


def request_seed(seed: int, prompt_ids: Sequence[int]) -> int:
    """The seed of the request that samples `prompt_ids` under the job's (or stream's) `seed`."""
    text = f"{seed}:{','.join(str(int(token)) for token in prompt_ids)}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") % (1 << SEED_BITS)


def completions(output) -> list:
    """A request's n completions (vllm.RequestOutput.outputs) in sample order, by their `index`: sample j is the one
    vLLM seeded seed + j."""
    return sorted(output.outputs, key=lambda completion: completion.index)
