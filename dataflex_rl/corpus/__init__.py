"""The training corpus and the benchmark item sets: built from the item sources, rows validated and quarantined,
decontaminated against the benchmarks, rendered into prompts, and checked against the model's token caps."""
