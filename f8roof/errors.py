"""The one family of user-facing errors: one line, exit code 2, never a traceback."""

import click


class F8RoofError(click.ClickException):
    """A problem with what the user asked for (bad shape, bad file, no GPU)."""

    exit_code = 2
