"""``state_problem`` checks a state document in two passes: ``_fits`` without naming anything, then,
for a document that does not fit, ``_misfit`` for the first field and why. The two must agree on
every value, or a bad document would be taken (or a good one refused)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.cloud.state import _RUN_SCHEMA, STATE_SCHEMA, _fits, _misfit, state_problem

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False, width=16),
                    st.sampled_from(["", "x", "user:a"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.sampled_from(["id", "seq", "type", "x"]),
                                                                     inner, max_size=3)), max_leaves=8)


def _shaped(schema: Any) -> st.SearchStrategy[Any]:
    """Values near ``schema``: mostly its own shape, with any field left out or of another type."""
    if isinstance(schema, dict):
        fields = {key.rstrip("?"): st.one_of(_shaped(inner), JSON) for key, inner in schema.items()}
        return st.fixed_dictionaries({}, optional=fields) | st.fixed_dictionaries(
            {k: v for k, v in fields.items() if not k.endswith("?")})
    if isinstance(schema, list):
        return st.lists(st.one_of(_shaped(schema[0]), JSON), max_size=3)
    if isinstance(schema, tuple):
        return st.one_of(*(_shaped(option) for option in schema))
    return {"string": st.text(max_size=3), "integer": st.integers(), "number": st.floats(allow_nan=False),
            "boolean": st.booleans(), "object": st.dictionaries(st.text(max_size=2), SCALARS, max_size=2),
            "null": st.none(), "any": JSON}.get(schema, JSON) | JSON


@settings(max_examples=400, deadline=None)
@given(_shaped(_RUN_SCHEMA))
def test_a_run_fits_exactly_when_no_field_is_named(value: Any) -> None:
    assert _fits(_RUN_SCHEMA, value) == (_misfit(_RUN_SCHEMA, value, "") is None)


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # the strategy's own long repr
@settings(max_examples=200, deadline=None)
@given(_shaped(STATE_SCHEMA))
def test_a_document_fits_exactly_when_no_field_is_named(value: Any) -> None:
    assert (state_problem(value) is None) == (_misfit(STATE_SCHEMA, value, "") is None)
    if state_problem(value) is not None:
        assert state_problem(value) == _misfit(STATE_SCHEMA, value, "")  # the same first field and why


def test_a_boolean_is_no_number_and_a_missing_field_is_named() -> None:
    assert not _fits("integer", True) and not _fits(("integer", "null"), False) and _fits("boolean", True)
    assert state_problem({"format": "x", "version": 1}) == "meta is missing"
    assert state_problem({"format": "x", "version": True, "meta": {}}) == "version must be an integer, not true"
