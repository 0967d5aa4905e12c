"""The control API's event size check: counted without encoding where a bound suffices, exact otherwise."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from services.served.control import _json_size, _text_bound

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
