"""One module per benchmark case (B1 ... B10); each has `run(bench) -> CaseResult`."""
