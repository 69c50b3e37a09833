"""One module per benchmark case (B1 ... B7); each has `run(bench) -> CaseResult`."""
