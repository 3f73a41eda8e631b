"""The one family of user-facing errors: a problem with what the user asked for (a bad shape,
a bad file, no GPU, a value the models refuse). The library raises them; the command line
(`f8roof/cli`) prints their one line and exits 2. Anything else is a bug and keeps its
traceback. No click here: the library depends on nothing of the command line's."""


class F8RoofError(Exception):
    """One line naming the problem; the CLI's exit code 2."""

    exit_code = 2

    @property
    def message(self) -> str:
        return str(self)


class ModelError(F8RoofError, ValueError):
    """A value the models refuse (an unknown GPU or recipe, a gemm table with a hole, bytes no
    polynomial fits)."""


def reason(error: BaseException) -> str:
    """`Type: first line of the message`, for one-line reports (compile errors run to pages)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


class ParameterError(ModelError):
    """A value one parameter of the Python API (`f8roof.estimate_shapes`, ...) refuses:
    `parameter` names it, `value` is what was given."""

    def __init__(self, parameter: str, value: object, expected: str) -> None:
        self.parameter = parameter
        self.value = value
        super().__init__(f"{parameter} takes {expected}, got {value!r}")
