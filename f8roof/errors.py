"""The one family of user-facing errors: a problem with what the user asked for (a bad shape,
a bad file, no GPU, a value the models refuse). The library raises them; the command line
(`f8roof/cli`) prints their one line and exits 2. Anything else is a bug and keeps its
traceback. No click here: the library depends on nothing of the command line's.

The library speaks in its own terms: a message that names one of its parameters (a degree, the
recipe, the timing) marks it with `term("tp")`, and each front end calls it its own way: the
command line by its flag (`--tp`, f8roof/cli), a setup file by its key
(`tensor_parallel_degree`, training/setup_file.py), the Python API and `str(error)` by the
parameter's own name (`tp`)."""

import re
from collections.abc import Mapping

_MARK = "\x1f"  # around a parameter's name in a message (ASCII's unit separator: no message's)
_MARKED = re.compile(f"{_MARK}([a-z][a-z0-9_]*){_MARK}")


def term(parameter: str) -> str:
    """`parameter` (the library's name: `tp`, `step_ms`, `implementation`) named in a message,
    marked for each front end to call it its own way."""
    if not re.fullmatch("[a-z][a-z0-9_]*", parameter):
        raise ValueError(f"a parameter's name is a lowercase identifier, not {parameter!r}")
    return f"{_MARK}{parameter}{_MARK}"


def called(marked: str, names: Mapping[str, str]) -> str:
    """A marked message with the parameters `names` has called by those names (unmarked); the
    others stay marked."""
    return _MARKED.sub(lambda m: names.get(m.group(1), m.group(0)), marked)


class F8RoofError(Exception):
    """One line naming the problem; the CLI's exit code 2. Built from a message whose
    parameters are marked (`term`): `str(error)` names each by its own name, `worded` as a
    front end calls them, and `marked` keeps the marks for a message that quotes this one."""

    exit_code = 2

    def __init__(self, *args: object) -> None:
        marked = args[0] if len(args) == 1 and isinstance(args[0], str) else None
        if marked is not None:
            args = (_MARKED.sub(r"\1", marked), *args[1:])
        super().__init__(*args)
        # kept in __dict__, so a pickled error keeps it
        self.marked = marked if marked is not None else str(self)

    @property
    def message(self) -> str:
        return str(self)

    @property
    def parameters(self) -> tuple[str, ...]:
        """The parameters the message names, in the library's names, first mention first."""
        return tuple(dict.fromkeys(_MARKED.findall(self.marked)))

    def worded(self, names: Mapping[str, str]) -> str:
        """The message with each parameter called as `names` calls it (the command line: its
        flags); one `names` lacks keeps its own name."""
        return _MARKED.sub(r"\1", called(self.marked, names))


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
        super().__init__(f"{term(parameter)} takes {expected}, got {value!r}")
