"""The control API's event size check: counted without encoding where a bound suffices, exact otherwise."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from services.served.control import _json_size, _parse_body, _text_bound

_TEXT = st.text(alphabet=st.characters(), max_size=12)
_VALUE = st.one_of(_TEXT, st.none(), st.dictionaries(_TEXT, _TEXT, max_size=4), st.integers(), st.floats(),
                   st.booleans(), st.lists(_TEXT, max_size=3), st.dictionaries(_TEXT, st.integers(), max_size=2))


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_TEXT, _VALUE, max_size=5))
def test_the_bound_is_never_below_the_encoded_size_and_the_count_is_exact(event: dict[str, object]) -> None:
    size = len(json.dumps(event))
    assert _json_size(event) == size
    assert _text_bound(event) >= size


def test_the_bound_holds_at_its_tightest_texts() -> None:
    for event in ({"": None}, {"": ""}, {"": {}}, {"": {"": ""}}, {"\U0001f600": "\U0001f600" * 3},
                  {"k": "\x00\x01\"\\"}, {"k": {"\ud800": "\udfff"}}):
        assert _text_bound(event) >= len(json.dumps(event)) == _json_size(event), event


def _values(value: object) -> list[object]:
    """``value`` and every value inside it."""
    found = [value]
    if isinstance(value, dict):
        for inner in value.values():
            found += _values(inner)
    elif isinstance(value, list):
        for inner in value:
            found += _values(inner)
    return found


_ANY_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8) | st.text(alphabet="a\\\"/\n\t\x7f", max_size=8)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ANY_TEXT, inner, max_size=4), max_leaves=30)


@settings(max_examples=500, deadline=None)
@given(_JSON.filter(lambda v: isinstance(v, dict)), st.booleans(), st.sampled_from([None, 0, 2]),
       st.sampled_from([(",", ":"), (", ", ": "), (" ,  ", " :\t")]))
def test_a_body_text_bounds_every_value_in_it_when_it_is_counted(
        value: dict[str, object], as_ascii: bool, indent: int | None, separators: tuple[str, str]) -> None:
    raw = json.dumps(value, ensure_ascii=as_ascii, indent=indent, separators=separators).encode(
        "utf-8", "surrogatepass")
    parsed, bound = _parse_body(raw)
    assert json.dumps(parsed) == json.dumps(value)  # the same value read (NaN is not equal to itself)
    if bound is not None:
        assert all(bound >= len(json.dumps(v)) for v in _values(parsed))


def test_floats_written_short_are_counted_at_their_longest() -> None:
    raw = b'{"a":[1e9,9e15,1E5,1e400,-1e400,0.1,-0]}'
    parsed, bound = _parse_body(raw)
    assert bound is not None and bound >= len(json.dumps(parsed)) > len(raw)
