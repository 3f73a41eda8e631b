"""The command line: click commands and option stacks only; errors become exit 2 here."""

from f8roof.cli.commands import main

__all__ = ["main"]
