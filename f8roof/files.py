"""Atomic file writes: a reader never sees half a file, a crash never loses the old one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError


class OutputError(F8RoofError):
    """An output path that cannot be written."""


def read_json(path: str | Path, *, what: str, error: type[Exception]) -> Any:
    """Parse a JSON file, turning an unreadable or malformed one into `error` naming it."""
    path = Path(path)
    name = f"{what} {path}".strip()
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise error(f"cannot read {name}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{name} is not valid JSON (truncated?): {e}") from None
    except RecursionError:
        raise error(f"{name} nests deeper than any f8roof file does") from None


def check_output_path(path: str | Path) -> Path:
    """Refuse, before any work, an output file that cannot be written: a directory in its
    place, a parent that is a file or cannot be created, a directory without write access."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory")
    check_output_dir(path.parent if str(path.parent) else Path("."), what=f"cannot write {path}")
    return path


def check_output_dir(directory: str | Path, *, what: str | None = None) -> Path:
    """The directory exists or can be created, and can be written to."""
    directory = Path(directory)
    what = what or f"cannot write into {directory}"
    existing = directory
    while not existing.exists():  # the nearest ancestor that exists decides
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise OutputError(f"{what}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{what}: {existing} is not writable")
    return directory


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write through a temporary file in the same directory, fsync, rename: readers see the
    old file or the new one, never half of one. Mode 0644: calibration files are meant to be
    shared."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {e.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_frame(frame, path: str | Path) -> None:
    """A DataFrame in the format the file name asks for."""
    from f8roof.render import renderer_for

    write_text_atomic(path, renderer_for(str(path))(frame))
