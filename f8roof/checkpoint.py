"""An append-only JSON-lines checkpoint: every finished measurement survives a crash.

Each record is one line, flushed and fsynced before the next measurement starts. A line cut
short by a crash is dropped on reading; everything before it is kept. The first record is a
header naming what the run measures, so a resume against a different run is refused.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError
from f8roof.files import write_text_atomic


class Checkpoint:
    def __init__(self, path: str | Path, header: dict[str, Any], *, resume: bool) -> None:
        self.path = Path(path)
        self.records: list[dict[str, Any]] = []
        if resume and self.path.exists():
            lines = self.path.read_text().splitlines()
            parsed = []
            for line in lines:
                try:
                    parsed.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a line cut short by a crash: keep what came before
            if not parsed or parsed[0].get("header") != header:
                raise F8RoofError(
                    f"checkpoint {self.path} belongs to another run (device, recipes or shapes "
                    "differ); remove it or drop --resume"
                )
            self.records = parsed[1:]
            self._rewrite(parsed)  # drop a torn last line before appending
        else:
            if self.path.exists() and not resume:
                raise F8RoofError(
                    f"checkpoint {self.path} exists: pass --resume to continue it, or remove it"
                )
            self._rewrite([{"header": header}])

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in records))

    def done(self, key: str) -> dict[str, Any] | None:
        for record in self.records:
            if record.get("key") == key:
                return record
        return None

    def add(self, key: str, record: dict[str, Any]) -> dict[str, Any]:
        record = {"key": key, **record}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records.append(record)
        return record

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
