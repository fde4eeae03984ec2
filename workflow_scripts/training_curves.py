from dataflex_rl.artefacts.job_log import job_log
from dataflex_rl.report.figures import training_curves, training_curves_plot
from dataflex_rl.report.run_metrics import read_run_metrics

with job_log(snakemake.log[0]):
    window = snakemake.params.window
    training_curves_plot(training_curves(read_run_metrics(snakemake.params.runs), window=window), snakemake.output[0],
                         window=window)
