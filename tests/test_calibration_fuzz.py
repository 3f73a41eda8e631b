"""The calibration loader on damaged files: a CalibrationError naming the problem, or a
calibration that saves back to exactly what was read (nothing coerced, nothing dropped)."""

import copy
import json

import pytest
import synthetic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from f8roof.calibration.file import Calibration, CalibrationError
from f8roof.calibration.fitting import fit_calibration


@pytest.fixture(scope="module")
def document():
    measurements = synthetic.measurements(shapes=synthetic.FIT_SHAPES[:9])
    document = json.loads(json.dumps(fit_calibration(measurements).to_dict()))
    # The gemm table on a 2x2x2 grid (still a full one): every field kind is still there to
    # damage, and each example reads 72 gemm records instead of 3,087 (a fifth of the time).
    ends = {min(synthetic.GRID), max(synthetic.GRID)}
    document["gemms"] = [g for g in document["gemms"] if {g["m"], g["k"], g["n"]} <= ends]
    return document


def paths(node, prefix=()):
    """Every location in a JSON tree, as a tuple of keys and indices."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):  # a few elements of long lists suffice
            yield from paths(value, (*prefix, index))


JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["1/0", "3/4", "-5", "__import__('os')", "M*K", "1e400"]),
    st.lists(st.integers(min_value=-3, max_value=99), max_size=4),
    st.dictionaries(st.sampled_from(["M*K", "K", "x", "floor_s"]), st.integers(), max_size=3),
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_damage_is_refused_or_kept_exactly(document, data):
    locations = list(paths(document))
    damaged = copy.deepcopy(document)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(locations[1:]))
        try:
            parent = damaged
            for key in path[:-1]:
                parent = parent[key]
            if data.draw(st.booleans()) and isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent[path[-1]] = data.draw(JUNK)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier damage removed or replaced the way there
    try:
        loaded = Calibration.from_dict(damaged, source="fuzzed.json")
    except CalibrationError as e:
        assert "fuzzed.json" in str(e) and "\n" not in str(e)
        return
    assert json.loads(json.dumps(loaded.to_dict())) == damaged
