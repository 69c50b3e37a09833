"""`python -m mldesigner execute ...`, as the `mldesigner` command."""

from mldesigner._cli.mldesigner_commands import main

main()
