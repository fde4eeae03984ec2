import gc

from snakemake.utils import min_version

min_version("9.0")


# The embedded default, unless the command line names a study config (`--configfile config/paper.yaml`): Snakemake
# would otherwise deep-merge the two and mix the default's tiny model into the paper's matrix.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/corpus.smk"
include: "rules/regimes.smk"
include: "rules/calibrate.smk"
include: "rules/train.smk"
include: "rules/evaluate.smk"
include: "rules/stats.smk"
include: "rules/tables.smk"
include: "rules/audit.smk"


# Every rule is defined now: check the resources each asks for against the config and print the dry-run summary, once,
# in the process that plans the DAG (a cluster job parses this file again to run its rule, and has nothing to check).
if workflow.is_main_process:
    check_resources_and_summarise()
    # All that parsing left (Snakemake's and our modules, the study; torch and verl where the verl check imported them:
    # 0.2 to 0.6 million objects) lives as long as this process: out of the garbage collector's sight, the full
    # collections the DAG build triggers and the one at exit no longer walk it (benchmarks/README.md).
    gc.freeze()


rule all:
    input:
        FILES.final_outputs(),
