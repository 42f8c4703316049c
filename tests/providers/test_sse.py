"""The SSE decoder, fed the awkward chunkings a network produces."""

from __future__ import annotations

import pytest

from turnlog.providers.sse import ServerSentEvent, SSEDecoder

STREAM = (
    b": keep-alive comment\n"
    b"event: response.output_text.delta\n"
    b'data: {"delta": "a"}\n'
    b"\n"
    b"data: first line\n"
    b"data: second line\n"
    b"id: 7\n"
    b"retry: 1000\n"
    b"\n"
    b"data:no space\n\n"
    b"data: [DONE]\n\n"
)
EVENTS = [
    ServerSentEvent("response.output_text.delta", b'{"delta": "a"}'),
    ServerSentEvent("message", b"first line\nsecond line"),
    ServerSentEvent("message", b"no space"),
    ServerSentEvent("message", b"[DONE]"),
]


def feed_all(chunks: list[bytes]) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)] + decoder.end()


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_every_chunking_and_line_ending_gives_the_same_events(
    newline: bytes, size: int
) -> None:
    stream = STREAM.replace(b"\n", newline)
    chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
    assert feed_all(chunks) == EVENTS


def test_a_crlf_split_between_chunks_counts_once() -> None:
    chunks = [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]
    assert feed_all(chunks) == [ServerSentEvent("message", b"a\nb")]


def test_an_event_the_body_leaves_unterminated_is_not_dispatched() -> None:
    assert feed_all([b"data: complete\n\n", b"data: cut off"]) == [
        ServerSentEvent("message", b"complete")
    ]


def test_an_event_without_data_is_not_dispatched_and_resets_its_type() -> None:
    assert feed_all([b"event: ping\n\ndata: x\n\n"]) == [
        ServerSentEvent("message", b"x")
    ]
