"""The paper's 12 real benchmarks: native-schema loaders (local file or Hugging Face hub) and per-family prompt
templates. Sources, sizes and extractors are listed in docs/benchmarks.md."""
