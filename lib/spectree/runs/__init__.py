"""The batch run `run_all.sh` drives: every notebook through papermill with a profile's parameters (`runner`,
`profiles`; `--set` values typed by `param_types`), in one shared kernel where the profile asks (`notebook_kernel`)."""
