"""The SSE parser table (WHATWG rules) and chunking independence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.sdk import SSEEvent, SSEParser


def parse(data: bytes) -> tuple[list[SSEEvent], SSEParser]:
    parser = SSEParser()
    events = parser.feed(data)
    events += parser.close()
    return events, parser


@pytest.mark.parametrize(
    "stream",
    [b"data: a\n\n", b"data: a\r\n\r\n", b"data: a\r\r", b"data: a\r\n\n", b"data: a\n\r\n"],
    ids=["LF", "CRLF", "CR", "CRLF+LF", "LF+CRLF"],
)
def test_every_line_ending_dispatches_the_same_event(stream: bytes) -> None:
    events, _ = parse(stream)
    assert events == [SSEEvent("message", "a", "")]


def test_a_leading_bom_is_dropped_only_once() -> None:
    events, _ = parse("\ufeffdata: a\n\n".encode())
    assert events == [SSEEvent("message", "a", "")]
    events, _ = parse("\ufeff\ufeffdata: a\n\ndata: b\n\n".encode())
    # the second BOM is part of the first line's field name, so that line is ignored
    assert events == [SSEEvent("message", "b", "")]


def test_data_lines_are_joined_with_lf_and_one_space_is_stripped() -> None:
    events, _ = parse(b"data: a\ndata:b\ndata:  c\ndata\n\n")
    assert events == [SSEEvent("message", "a\nb\n c\n", "")]


def test_event_type_applies_to_one_event_only() -> None:
    events, _ = parse(b"event: node.idle\ndata: 1\n\ndata: 2\n\n")
    assert [(e.type, e.data) for e in events] == [("node.idle", "1"), ("message", "2")]


def test_incomplete_event_at_eof_is_not_dispatched() -> None:
    events, _ = parse(b"data: a\n\ndata: x")
    assert [e.data for e in events] == ["a"]
    events, _ = parse(b"data: a\n\ndata: x\n")
    assert [e.data for e in events] == ["a"]


def test_an_id_with_nul_is_ignored_and_an_empty_id_resets() -> None:
    events, parser = parse(b"id: 5\ndata: a\n\nid: 6\x00\ndata: b\n\n")
    assert [e.last_event_id for e in events] == ["5", "5"]
    assert parser.last_event_id == "5"
    events, parser = parse(b"id: 5\ndata: a\n\nid\ndata: b\n\n")
    assert [e.last_event_id for e in events] == ["5", ""]


def test_retry_is_honoured_only_when_all_digits() -> None:
    _, parser = parse(b"retry: 1e3\n\n")
    assert parser.retry_ms is None
    _, parser = parse(b"retry: 1500\n\nretry: -1\n\nretry: 15x\n\n")
    assert parser.retry_ms == 1500


def test_comment_only_stream_yields_nothing() -> None:
    events, _ = parse(b": keep-alive\n\n:\n\n: another\n")
    assert events == []


def test_blank_lines_without_data_dispatch_nothing() -> None:
    events, _ = parse(b"event: x\n\n\n\ndata: a\n\n")
    assert events == [SSEEvent("message", "a", "")]


def test_a_field_without_colon_and_unknown_fields() -> None:
    events, _ = parse(b"data\nfoo: bar\n\n")
    assert events == [SSEEvent("message", "", "")]


def test_utf8_split_across_chunks() -> None:
    raw = "data: héllo ✓\n\n".encode()
    parser = SSEParser()
    events = [e for i in range(len(raw)) for e in parser.feed(raw[i : i + 1])]
    assert events == [SSEEvent("message", "héllo ✓", "")]


SAMPLE = (
    "\ufeff: hello\r\nid: 1\r\nevent: node.turn.started\r\ndata: {\"a\": 1}\r\n\r\n"
    "data: two\rdata: lines\r\rid: 7\x00\nretry: 250\nevent: x\ndata: y\n\n"
    "id:\ndata: z\r\n\r\ndata: dropped-at-eof"
).encode()


def test_every_byte_split_gives_identical_events() -> None:
    whole, parser_whole = parse(SAMPLE)
    assert [e.data for e in whole] == ['{"a": 1}', "two\nlines", "y", "z"]
    for cut in range(len(SAMPLE) + 1):
        parser = SSEParser()
        events = parser.feed(SAMPLE[:cut]) + parser.feed(SAMPLE[cut:]) + parser.close()
        assert events == whole, cut
        assert parser.retry_ms == 250


def test_one_byte_at_a_time_gives_identical_events() -> None:
    whole, _ = parse(SAMPLE)
    parser = SSEParser()
    events = [e for i in range(len(SAMPLE)) for e in parser.feed(SAMPLE[i : i + 1])]
    assert events == whole


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(SAMPLE)), max_size=12))
def test_any_chunking_gives_identical_events(cuts: list[int]) -> None:
    whole, _ = parse(SAMPLE)
    points = [0, *sorted(cuts), len(SAMPLE)]
    parser = SSEParser()
    events = [e for a, b in zip(points, points[1:]) for e in parser.feed(SAMPLE[a:b])]
    assert events + parser.close() == whole


_LINE = st.sampled_from([
    "id: 7", "id: 8\x00", "id:", "id:  9", "event: node.x", "event: ", "event", "data: {\"seq\": 1}", "data:",
    "data: two", "data:x", ": comment", "retry: 300", "retry: 3x", "", "foo: bar",
])
_WHOLE = st.builds(lambda i, t, d: f"id: {i}\nevent: {t}\ndata: {d}\n\n", st.sampled_from(["1", "", " 2", "3\x00"]),
                   st.sampled_from(["node.a", "", "b c"]), st.sampled_from(["{}", "", "x y", "data: z"]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_WHOLE, _LINE.map(lambda line: line + "\n")), max_size=14),
       st.lists(st.integers(min_value=0, max_value=400), max_size=6))
def test_whole_frames_read_at_once_mean_what_line_by_line_reading_means(parts: list[str], cuts: list[int]) -> None:
    """LF-only input takes the whole-frame path; the same text with CRLF line ends takes the
    line-by-line path: both give the same events, ids and retry, however the bytes are cut."""
    raw = "".join(parts).encode()
    reference, by_lines = parse(raw.replace(b"\n", b"\r\n"))
    points = [0, *sorted(c for c in cuts if c <= len(raw)), len(raw)]
    parser = SSEParser()
    events = [e for a, b in zip(points, points[1:]) for e in parser.feed(raw[a:b])]
    assert events + parser.close() == reference
    assert (parser.last_event_id, parser.retry_ms) == (by_lines.last_event_id, by_lines.retry_ms)
