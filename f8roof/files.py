"""Atomic file writes: a reader never sees half a file, a crash never loses the old one."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError


class OutputError(F8RoofError):
    """An output path that cannot be written."""


class _Refused(ValueError):
    """What the strict JSON reader refuses: a key twice in one object."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def read_text(path: str | Path, *, what: str, error: type[Exception]) -> str:
    """A text file f8roof reads (UTF-8, as JSON, TOML and CSV files are), turning an
    unreadable or undecodable one into `error` naming it."""
    path = Path(path)
    name = f"{what} {path}".strip()
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise error(f"cannot read {name}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise error(
            f"{name} is not UTF-8 text (byte {e.start} is {e.object[e.start : e.start + 1]!r}): "
            "save it as UTF-8"
        ) from None


def read_json(path: str | Path, *, what: str, error: type[Exception]) -> Any:
    """Parse a JSON file, turning an unreadable or malformed one into `error` naming it. A key
    twice in one object (Python's parser keeps the last silently) is refused; NaN and Infinity
    are read, for the file's own checks to refuse naming the field."""
    return parse_json(read_text(path, what=what, error=error), path, what=what, error=error)


def parse_json(text: str, path: str | Path, *, what: str, error: type[Exception]) -> Any:
    """`read_json` of a file's text already read (`read_text`)."""
    name = f"{what} {Path(path)}".strip()
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _Refused as e:
        raise error(f"{name}: {e}") from None
    except json.JSONDecodeError as e:
        raise error(f"{name} is not valid JSON (truncated?): {e}") from None
    except RecursionError:
        raise error(f"{name} nests deeper than any f8roof file does") from None


def _name_max(directory: Path) -> int:
    """The longest file name (bytes) the directory's file system takes."""
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def _short(path: Path) -> str:
    """A path for a one-line message: a very long name shortened in the middle."""
    text = str(path)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-40:]}"


def check_output_path(path: str | Path) -> Path:
    """Refuse, before any work, an output file that cannot be written: a directory in its
    place, a parent that is a file or does not exist (f8roof creates no directories for a
    file), a directory without write access, a name longer than the file system takes."""
    if not str(path).strip():
        raise OutputError("an empty output path: name the file to write")
    path = Path(path)
    what = f"cannot write {_short(path)}"
    parent = path.parent if str(path.parent) else Path(".")
    try:
        if path.is_dir():
            raise OutputError(f"{what}: it is a directory")
        _check_directory(parent, what=what, create=False)
        limit = _name_max(parent)
        size = len(os.fsencode(path.name))  # the bytes the system stores, UTF-8 or not
        if size > limit:
            raise OutputError(
                f"{what}: the file name is {size} bytes, longer than the {limit} its file "
                "system takes"
            )
    except OSError as e:  # a path the system refuses to look at (too long, a loop)
        raise OutputError(f"{what}: {e.strerror or e}") from None
    return path


def check_output_dir(directory: str | Path, *, what: str | None = None) -> Path:
    """The directory exists, or its parent does and it can be created there, and can be
    written to. Missing ancestors are refused: a mistyped path must not become a tree of new
    directories (at the file system's root, for `/nonexistent/...`)."""
    if not str(directory).strip():
        raise OutputError("an empty output directory: name the directory to write into")
    directory = Path(directory)
    what = what or f"cannot write into {_short(directory)}"
    try:
        _check_directory(directory, what=what, create=True)
    except OSError as e:
        raise OutputError(f"{what}: {e.strerror or e}") from None
    return directory


def _check_directory(directory: Path, *, what: str, create: bool) -> None:
    """`directory` exists (or, with `create`, its parent does) and can be written to."""
    existing = directory
    if create and not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.exists():
        missing = existing
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        raise OutputError(f"{what}: no directory {_short(missing)} (create it first)")
    if not existing.is_dir():
        raise OutputError(f"{what}: {_short(existing)} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{what}: {_short(existing)} is not writable")


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


def _temporary(path: Path) -> Path:
    """An empty temporary file beside `path`, with the permissions `path` will have. Its name
    keeps `path`'s suffix (writers that pick a format by it) and fits the file system even
    when `path`'s name is near the limit."""
    stem = path.name
    while len(os.fsencode(stem)) > 200:
        stem = stem[:-1]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    # mkstemp makes the file private (0o600); the result gets the permissions of the file it
    # replaces, or those of any new file (0o644 under the usual umask 022: calibration files
    # are meant to be shared), as if written in place.
    os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else _new_file_mode())
    return tmp


def _sync(tmp: Path) -> None:
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """Ctrl-C waits until the block ends (the main thread only: signals go there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[object] = []
    previous = signal.signal(signal.SIGINT, lambda *args: caught.append(args))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            raise KeyboardInterrupt


@contextmanager
def atomic_set(*paths: str | Path) -> Iterator[tuple[Path, ...]]:
    """Temporary file names beside each of `paths` for writers that want names (pyarrow's CSV
    and Parquet writers, matplotlib): when the block ends every file is synced to disk and
    renamed over its path, Ctrl-C held off between the first rename and the last, so a reader
    sees the old set of files or the new one (each rename is atomic within a file system). If
    the block raises (an error, Ctrl-C), every temporary file is removed and no path changes.
    An OSError on the way (no permission, disk full; pyarrow's ArrowIOError is one) becomes an
    OutputError naming the file."""
    targets = tuple(Path(p) for p in paths)
    temps: list[Path] = []
    current = targets[0] if targets else Path(".")
    try:
        for current in targets:
            temps.append(_temporary(current))
        yield tuple(temps)
        for current, tmp in zip(targets, temps):
            _sync(tmp)
        with _ctrl_c_deferred():
            for current, tmp in zip(targets, temps):
                os.replace(tmp, current)
    except OSError as e:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write {_short(current)}: {e.strerror or e}") from None
    except BaseException:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary file name beside `path` for a writer that wants a name: `atomic_set` of
    one file (synced, renamed over `path` when the block ends; removed if it raises)."""
    with atomic_set(path) as (tmp,):
        yield tmp


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write through a temporary file in the same directory, fsync, rename: readers see the
    old file or the new one, never half of one."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_texts_atomic(texts: dict[Path, str]) -> None:
    """Several text files as one set (`atomic_set`): all written, or none changed."""
    with atomic_set(*texts) as temps:
        for tmp, text in zip(temps, texts.values()):
            tmp.write_text(text, encoding="utf-8")
