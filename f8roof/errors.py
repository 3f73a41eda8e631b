"""The one family of user-facing errors: one line, exit code 2, never a traceback."""

import click


class F8RoofError(click.ClickException):
    """A problem with what the user asked for (bad shape, bad file, no GPU)."""

    exit_code = 2


def reason(error: BaseException) -> str:
    """`Type: first line of the message`, for one-line reports (compile errors run to pages)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
