"""The guard's text-only depth check: each pass takes out exactly the pairs a regular-expression pass
would, so a body is passed from its text alone exactly when it was before."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from services.served.guard import _plainly_fine

_PAIR = re.compile(rb"\[\]|\{\}")


def _by_passes(brackets: bytes, max_depth: int) -> bool:
    rest = brackets
    for _ in range(max_depth):
        if not rest:
            return True
        rest, taken = _PAIR.subn(b"", rest)
        if not taken:
            return False
    return not rest


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="[]{}", max_size=60), st.integers(min_value=0, max_value=8))
def test_a_body_of_brackets_passes_as_the_pass_by_pass_removal_says(brackets: str, max_depth: int) -> None:
    body = brackets.encode()
    expected = body.count(b"[") + body.count(b"{") <= max_depth or _by_passes(body, max_depth)
    assert _plainly_fine(body, max_depth) == expected


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.sampled_from(["x", "[", "}{", '"', "\\", 1]),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["k", "[{"]), inner,
                                                                                     max_size=3), max_leaves=25),
       st.integers(min_value=1, max_value=6))
def test_brackets_inside_strings_never_count(value: object, max_depth: int) -> None:
    body = json.dumps(value).encode()
    outside = re.sub(rb'"(?:[^"\\]|\\.)*"', b"", body).translate(None, bytes(b for b in range(256) if b not in b"[]{}"))
    expected = outside.count(b"[") + outside.count(b"{") <= max_depth or _by_passes(outside, max_depth)
    if body.count(b"[") + body.count(b"{") <= max_depth:
        expected = True
    assert _plainly_fine(body, max_depth) == expected
