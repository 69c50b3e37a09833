"""The search of an AutoML job (`type: automl`): FLAML run in the job's one process, which
distrun starts and supervises as any job's rank (`distrun.loading.automl_loader` makes the job).
It reads the job's MLTable folders, runs the trials, reports each as it ends (a line, and a child
run of the job's MLflow run), writes the leaderboard and saves the best model as the job's
`best_model` output. Run where the job runs: it imports only the layers below the loader."""
