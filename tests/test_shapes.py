"""Shapes from user input: strict files, 'M,K,N' strings, arrays; fuzzed."""

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from f8roof.errors import F8RoofError
from f8roof.inputs.shapes import (
    MAX_DIM,
    _read_lines,
    as_array,
    collect_shapes,
    parse_shape,
    read_shapes_file,
)


def read(tmp_path: Path, data: bytes | str) -> np.ndarray:
    path = tmp_path / "s.csv"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return read_shapes_file(path)


def refused(tmp_path: Path, data: bytes | str) -> str:
    with pytest.raises(F8RoofError) as info:
        read(tmp_path, data)
    message = info.value.message
    assert "\n" not in message and len(message) < 300
    return message


def test_well_formed_file(tmp_path):
    shapes = read(tmp_path, "M,K,N\n1024,1024,1024\n2048,1024,4096\n")
    assert shapes.dtype == np.int64 and shapes.tolist() == [[1024, 1024, 1024], [2048, 1024, 4096]]


def test_columns_in_any_order_blanks_crlf_bom_and_other_columns(tmp_path):
    data = "\ufeffname, N ,K,M\r\n\r\nqkv, 3072 ,\t768,8192\r\n\nmlp,768,3072,8192"
    assert read(tmp_path, data).tolist() == [[8192, 768, 3072], [8192, 3072, 768]]


def test_header_only_is_no_shapes(tmp_path):
    assert read(tmp_path, "M,K,N\n").shape == (0, 3)
    assert read(tmp_path, "M,K,N").shape == (0, 3)


def test_extra_field_is_refused_not_shifted(tmp_path):
    # pandas took a first row with one field too many as (index, M, K, N): 4096 x 4096 x 5
    message = refused(tmp_path, "M,K,N\n4096,4096,4096,5\n")
    assert "row 2 has 4 fields, the header 3" in message
    message = refused(tmp_path, "M,K,N\n1,2,3\n\n4096,4096,4096,5\n")
    assert "row 4 has 4 fields" in message  # the line number, blank lines counted


def test_missing_field_and_trailing_comma(tmp_path):
    assert "row 3 has 2 fields, the header 3" in refused(tmp_path, "M,K,N\n1,2,3\n4,5\n")
    assert "a trailing comma?" in refused(tmp_path, "M,K,N\n1,2,3\n4,5,6,\n")
    assert "column 4 has no name (a trailing comma?)" in refused(tmp_path, "M,K,N,\n1,2,3,\n")


@pytest.mark.parametrize(
    "value, words",
    [
        ("2147483648", "2147483648 exceeds 2147483647"),
        ("99999999999999999999999", "(23 digits) exceeds 2147483647"),
        ("9" * 100_000, "(100000 digits) exceeds"),
        ("inf", "'inf' is not finite"),
        ("nan", "'nan' is not finite"),
        ("1.5", "'1.5' is not an integer"),
        ("4096.0", "'4096.0' is not an integer"),
        ("1e3", "'1e3' is not an integer"),
        ("0", "is 0, not positive"),
        ("-4", "'-4' is not positive"),
        ("", "is empty"),
        ('"4096"', "is not an integer"),
        ("0x10", "'0x10' is not an integer"),
    ],
)
def test_bad_values_name_the_row_and_value(tmp_path, value, words):
    message = refused(tmp_path, f"M,K,N\n1,2,3\n4,5,6\n7,{value},9\n")
    assert message.startswith(f"shapes file {tmp_path / 's.csv'}, row 4: K ")
    assert words in message


def test_the_cap_itself_is_accepted(tmp_path):
    assert read(tmp_path, f"M,K,N\n{MAX_DIM},1,00016\n").tolist() == [[MAX_DIM, 1, 16]]


@pytest.mark.parametrize(
    "data, words",
    [
        ("", "is empty"),
        ("\n\r\n", "is empty"),
        ("M,K\n1,2\n", "lacks column(s) N"),
        ("M,K,N,M\n1,2,3,4\n", "names column(s) M more than once"),
        (b"M,K,N\n1,2,\xff\n", "row 2: N is not UTF-8 text"),
    ],
)
def test_bad_files(tmp_path, data, words):
    assert words in refused(tmp_path, data)


def test_unreadable_file(tmp_path):
    with pytest.raises(F8RoofError, match="cannot read shapes file"):
        read_shapes_file(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    "text, shape",
    [("1,2,3", (1, 2, 3)), ("4096x4096x4096", (4096,) * 3), (" 8, 16 ,\t32", (8, 16, 32))],
)
def test_parse_shape(text, shape):
    assert parse_shape(text) == shape


@pytest.mark.parametrize(
    "text, words",
    [
        ("1,2", "(got 2 fields)"),
        ("1,2,3,4", "(got 4 fields)"),
        ("1,2,inf", "N 'inf' is not finite"),
        ("1,2,1e400", "N '1e400' is not finite"),
        ("1,2.5,3", "K '2.5' is not an integer"),
        ("1,2,3000000000", "N 3000000000 exceeds 2147483647"),
        ("1,2," + "9" * 5000, "(5000 digits) exceeds"),
        ("0,2,3", "M is 0"),
        ("1,-2,3", "K '-2' is not positive"),
    ],
)
def test_parse_shape_refuses(text, words):
    with pytest.raises(F8RoofError) as info:
        parse_shape(text)
    assert words in info.value.message and len(info.value.message) < 200


def test_collect_shapes_keeps_the_order(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("M,K,N\n5,6,7\n")
    shapes = collect_shapes(("1,2,3",), path, "pow2")
    assert shapes.dtype == np.int64 and shapes.shape == (12, 3)
    assert shapes[:2].tolist() == [[1, 2, 3], [5, 6, 7]] and shapes[-1].tolist() == [65536] * 3
    with pytest.raises(F8RoofError, match="no shapes"):
        collect_shapes((), None, None)


@pytest.mark.parametrize(
    "shapes",
    [
        [(2**70, 1, 1)],
        np.array([[2**63 + 5, 1, 1]], dtype=np.uint64),
        [(MAX_DIM + 1, 1, 1)],
        np.array([[1.5, 2, 3]]),
        np.array([[np.inf, 2, 3]]),
        [(1, 2, 3), (4, 5)],
        [("a", 1, 1)],
        [(0, 1, 1)],
    ],
)
def test_as_array_refuses_with_one_line(shapes):
    with pytest.raises(F8RoofError):
        as_array(shapes)


def test_as_array_accepts_integral_floats_and_lists():
    assert as_array(np.array([[16.0, 32, 64]])).tolist() == [[16, 32, 64]]
    assert as_array([(1, 2, 3)]).dtype == np.int64


# --- fuzz: whatever the text, an F8RoofError or exactly the shapes a plain reading gives ---

BLANKS = b" \t"


def reference(data: bytes) -> list[list[int]] | None:
    """The format as documented, read the plainest way: None if the file is not well-formed."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    lines = [line for line in re.split(rb"\r\n|\r|\n", data) if line]
    if not lines:
        return None
    names = [name.strip(BLANKS) for name in lines[0].split(b",")]
    if b"" in names or any(names.count(d) != 1 for d in (b"M", b"K", b"N")):
        return None
    where = [names.index(d) for d in (b"M", b"K", b"N")]
    shapes = []
    for line in lines[1:]:
        fields = line.split(b",")
        if len(fields) != len(names):
            return None
        shape = []
        for index in where:
            text = fields[index].strip(BLANKS)
            if not text or any(c not in b"0123456789" for c in text):
                return None
            if len(text.lstrip(b"0")) > 12 or not 0 < int(text) <= 2**31 - 1:
                return None
            shape.append(int(text))
        shapes.append(shape)
    return shapes


TOKENS = st.sampled_from(
    [b"M", b"K", b"N", b"name", b",", b",", b",", b"\n", b"\n", b"\r\n", b"\r", b" ", b"\t"]
    + [b"0", b"1", b"7", b"16", b"4096", b"00", b"2147483647", b"2147483648", b"9" * 25]
    + [
        b"-",
        b"+",
        b".",
        b"e",
        b"inf",
        b"nan",
        b'"',
        b'"7"',
        b"x",
        b"\xff",
        b"\xef\xbb\xbf",
        b"\x00",
    ]
)


@st.composite
def shapes_files(draw, *, damaged: bool = True) -> bytes:
    """Well-formed files (columns in any order, extra columns, blanks, line ends); if damaged,
    some values out of range and a few tokens inserted or deleted anywhere."""
    columns = draw(st.permutations([b"M", b"K", b"N"] + draw(st.sampled_from([[], [b"x"]]))))
    end = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    pad = st.sampled_from([b"", b"", b" ", b"\t "])
    good = st.integers(1, 70000).map(lambda v: str(v).encode())
    odd = [b"2147483647", b"2147483648", b"0", b"007", b"18446744073709551617", b'"16"', b"+16"]
    odd += [b"1 6", b"16.0", b"1e3", b"-16", b"inf", b"", b"\xff"]
    value = st.one_of(good, good, good, st.sampled_from(odd)) if damaged else good
    lines = [b",".join(draw(pad) + c + draw(pad) for c in columns)]
    for _ in range(draw(st.integers(0, 6))):
        lines.append(b",".join(draw(pad) + draw(value) + draw(pad) for _ in columns))
        if draw(st.integers(0, 5)) == 0:
            lines.append(b"")
    data = bytearray(end.join(lines) + draw(st.sampled_from([b"", end])))
    for _ in range(draw(st.integers(0, 3)) if damaged else 0):
        at = draw(st.integers(0, len(data)))
        if draw(st.booleans()):
            data[at:at] = draw(TOKENS)
        else:
            del data[at : at + draw(st.integers(1, 3))]
    return bytes(data)


def check_against_reference(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    expected = reference(data)
    try:
        got = read_shapes_file(path)
    except F8RoofError as e:
        assert "\n" not in e.message
        assert expected is None, f"refused a well-formed file: {e.message}"
        return
    assert expected is not None, f"accepted a malformed file as {got.tolist()}"
    assert got.dtype == np.int64 and got.tolist() == expected
    assert _read_lines(data, path).tolist() == got.tolist()  # the slow reading agrees


FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(data=shapes_files(damaged=False))
def test_fuzz_well_formed_files(tmp_path, data):
    assert reference(data) is not None
    check_against_reference(tmp_path / "fuzz.csv", data)


@FUZZ
@given(data=shapes_files())
def test_fuzz_damaged_files(tmp_path, data):
    check_against_reference(tmp_path / "fuzz.csv", data)


@FUZZ
@given(data=st.lists(TOKENS, max_size=40).map(b"".join))
def test_fuzz_token_soup(tmp_path, data):
    check_against_reference(tmp_path / "fuzz.csv", b"M,K,N\n" + data)


@FUZZ
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_fuzz_arbitrary_bytes(tmp_path, data):
    check_against_reference(tmp_path / "fuzz.csv", data)


@FUZZ
@given(
    text=st.lists(st.sampled_from([*"0123456789,x -.e+\t", "inf", "4096", "9" * 30]), max_size=20)
    .map("".join)
    .filter(bool)
    | st.text(max_size=30)
)
def test_fuzz_parse_shape(text):
    parts = text.replace("x", ",").split(",")
    stripped = [p.strip(" \t") for p in parts]
    ok = (
        len(parts) == 3
        and all(p and set(p) <= set("0123456789") and len(p.lstrip("0")) < 12 for p in stripped)
        and all(0 < int(p) <= MAX_DIM for p in stripped)
    )
    try:
        shape = parse_shape(text)
    except F8RoofError as e:
        assert not ok and "\n" not in e.message
    else:
        assert ok and shape == tuple(int(p) for p in stripped)


def test_a_byte_order_mark_after_the_header_is_a_malformed_field(tmp_path):
    check_against_reference(tmp_path / "bom.csv", b"M,K,N \n\xef\xbb\xbf1,1,1\n")
