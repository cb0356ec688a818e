"""One thin module per `tidemark` command: typer options -> a config dataclass -> one run function."""
