"""Prompt selection by a validation probe (GradAlign, arXiv 2602.21492; reference code StigLidu/GradAlign).

`scores` holds the model-free maths (probe loss, alignment scores, the selection rules of GradAlign and its
baselines); `gradients` computes the per-group gradient vectors of the embedded backend's model that `scores` ranks.
"""
