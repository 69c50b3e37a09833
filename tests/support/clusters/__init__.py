"""Real clusters started on this machine for the tests (and for trying distrun by hand)."""
