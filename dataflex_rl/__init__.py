"""DataFlex-RL: a reproducible platform that compares RLVR data policies under one fixed GRPO recipe."""
