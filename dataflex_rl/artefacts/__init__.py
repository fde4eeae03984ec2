"""The files a study writes: where each lives, how it appears atomically, its provenance, and the item schemas."""
