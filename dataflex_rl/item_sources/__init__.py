"""Where items come from: the benchmark registry (`registry`: the procedural stand-ins and the paper's 12 real
benchmarks), the procedural generators the stand-ins and the training corpus draw from (`sources`, `science`), and the
real ones' native-schema readers (`readers`) and loaders (`loaders`: local file or Hugging Face hub). Sources, sizes and
extractors are listed in docs/benchmarks.md."""
