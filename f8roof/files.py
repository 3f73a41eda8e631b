"""Atomic file writes: a reader never sees half a file, a crash never loses the old one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


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


def write_text_atomic(path: str | Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
