"""`mldesigner execute`, the command a function component's step runs."""
