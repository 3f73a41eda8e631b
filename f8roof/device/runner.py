"""Long runs (calibrate, validate) as tasks: each finished measurement lands in an append-only
JSON-lines checkpoint, so it survives a crash, a Ctrl-C or a spent budget.

Each record is one line, flushed and fsynced before the next measurement starts. A line cut
short by a crash is dropped on reading; everything before it is kept. The first record is a
header naming what the run measures, so a resume against a different run is refused.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from f8roof.errors import F8RoofError, term
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
                    f"differ); remove it or drop {term('resume')}"
                )
            self.records = parsed[1:]
            self._rewrite(parsed)  # drop a torn last line before appending
        else:
            if self.path.exists() and not resume:
                raise F8RoofError(
                    f"checkpoint {self.path} exists: pass {term('resume')} to continue it, or "
                    "remove it"
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


@dataclass(frozen=True)
class Task:
    """One measurement: `fn(**kwargs)` returns its checkpoint record. A module-level function
    and plain arguments, so a task can run in a worker process."""

    key: str
    label: str
    fn: Callable[..., dict[str, Any]]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def run(self) -> dict[str, Any]:
        return self.fn(**self.kwargs)


def run_tasks(
    todo: list[Task],
    checkpoint: Checkpoint,
    *,
    budget_s: float | None = None,
    jobs: int = 1,
    progress: Callable | None = None,
    fresh: bool = False,
) -> bool:
    """Run the tasks (in `jobs` worker processes where asked: compiles are CPU-bound Python;
    with `fresh`, a new process for each task, whose memory goes with it), checkpointing each
    record as it arrives, with a progress bar; stop when `budget_s` is spent (False then: what
    was measured stays in the checkpoint)."""
    start = time.monotonic()
    bar = iter(progress(todo)) if progress else None

    def over_budget() -> bool:
        return budget_s is not None and time.monotonic() - start > budget_s

    context = multiprocessing.get_context("spawn")  # no fork of a process that imported torch
    if fresh:  # one worker a task (Python 3.10's pools have no max_tasks_per_child)
        for task in todo:
            if bar:
                next(bar, None)
            if over_budget():
                return False
            with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
                checkpoint.add(task.key, pool.submit(task.fn, **task.kwargs).result())
        return True
    if jobs <= 1:
        for task in todo:
            if bar:
                next(bar, None)
            if over_budget():
                return False
            checkpoint.add(task.key, task.run())
        return True
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(task.fn, **task.kwargs): task for task in todo}
        try:
            for future in as_completed(futures):
                if bar:
                    next(bar, None)
                checkpoint.add(futures[future].key, future.result())
                if over_budget():
                    return False
        finally:
            for future in futures:
                future.cancel()
    return True
