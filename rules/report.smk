rule forest_plot:
    input:
        "results/tables/comparisons.csv",
    output:
        report(
            "results/figures/forest_DB.png",
            caption="../report/forest.rst",
            category="Paired comparisons",
        ),
    log:
        "logs/report/forest.log",
    conda:
        "../envs/stats.yaml"
    script:
        "../workflow_scripts/forest_plot.py"
