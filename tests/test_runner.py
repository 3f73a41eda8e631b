import pytest

from f8roof.device.runner import Checkpoint
from f8roof.errors import F8RoofError


def test_records_survive_and_resume(tmp_path):
    path = tmp_path / "run.jsonl"
    first = Checkpoint(path, {"device": "cpu"}, resume=False)
    first.add("gemm/1", {"time_s": 1.5})
    first.add("gemm/2", {"time_s": 2.5})
    again = Checkpoint(path, {"device": "cpu"}, resume=True)
    assert again.done("gemm/2")["time_s"] == 2.5
    assert again.done("gemm/3") is None


def test_a_torn_last_line_is_dropped_not_fatal(tmp_path):
    path = tmp_path / "run.jsonl"
    Checkpoint(path, {"d": 1}, resume=False).add("a", {"v": 1})
    with path.open("a") as f:
        f.write('{"key": "b", "v"')  # the crash happened mid-write
    resumed = Checkpoint(path, {"d": 1}, resume=True)
    assert resumed.done("a") and resumed.done("b") is None
    resumed.add("b", {"v": 2})
    assert Checkpoint(path, {"d": 1}, resume=True).done("b")["v"] == 2


def test_resume_of_another_run_is_refused(tmp_path):
    path = tmp_path / "run.jsonl"
    Checkpoint(path, {"device": "cpu"}, resume=False)
    with pytest.raises(F8RoofError, match="belongs to another run"):
        Checkpoint(path, {"device": "cuda"}, resume=True)


def test_existing_checkpoint_needs_resume(tmp_path):
    path = tmp_path / "run.jsonl"
    Checkpoint(path, {"device": "cpu"}, resume=False)
    with pytest.raises(F8RoofError, match="pass resume to continue it"):
        Checkpoint(path, {"device": "cpu"}, resume=False)
