"""Atomic file writes: a reader never sees half a file, a crash never loses the old one."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
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


def _new_file_mode() -> int:
    """The permissions open() gives a new file: 0o666 less the umask."""
    try:  # Linux shows the umask without changing it
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere the one way to read it is to set it, and set it back
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary file name beside `path` for a writer that wants a name (pyarrow's CSV and
    Parquet writers): when the block ends the file is synced to disk and renamed over `path`
    (one rename, so atomic within a file system); if the block raises, it is removed. An
    OSError on the way (no permission, disk full; pyarrow's ArrowIOError is one) becomes an
    OutputError naming the file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(name)
    try:
        # mkstemp makes the file private (0o600); the result gets the permissions of the file
        # it replaces, or those of any new file (0o644 under the usual umask 022: calibration
        # files are meant to be shared), as if written in place.
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else _new_file_mode())
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write through a temporary file in the same directory, fsync, rename: readers see the
    old file or the new one, never half of one."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
