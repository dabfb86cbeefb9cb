"""Framed messages: what one side sends the other receives; a late, closed, forged, malformed or
oversized message raises the error that says which."""
import socket
import struct
import threading
import time

import pytest

from notebook_sandbox.channel import BadMessage, Channel, ChannelClosed, ChannelTimeout


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield Channel(a), Channel(b, max_bytes=4096), b
    a.close()
    b.close()


def test_a_message_and_its_blobs_arrive_whole(pair):
    sender, receiver, _ = pair
    sender.send({"id": "x", "n": [1, 2]}, [b"abc", b"", b"\0" * 1000])
    header, blobs = receiver.receive(time.monotonic() + 5)
    assert header == {"id": "x", "n": [1, 2]} and blobs == [b"abc", b"", b"\0" * 1000]


def test_text_arrives_as_utf8_can_hold_it(pair):
    sender, receiver, _ = pair
    sender.send({"stdout": "a\ud800b", "nested": [{"\udfff": ["c\ud800"]}]})
    header, _ = receiver.receive(time.monotonic() + 5)
    assert header == {"stdout": "a?b", "nested": [{"?": ["c?"]}]}
    assert header["stdout"].encode("utf-8")


def test_no_reply_before_the_deadline_is_a_timeout(pair):
    _, receiver, _ = pair
    started = time.monotonic()
    with pytest.raises(ChannelTimeout):
        receiver.receive(started + 0.2)
    assert time.monotonic() - started < 2


def test_half_a_message_then_silence_is_a_timeout(pair):
    sender, receiver, _ = pair
    sender.sock.sendall(struct.pack(">4sII", b"AGW1", 10, 0) + b'{"a"')
    with pytest.raises(ChannelTimeout):
        receiver.receive(time.monotonic() + 0.2)


def test_the_other_side_closing_is_not_a_timeout(pair):
    sender, receiver, _ = pair
    threading.Timer(0.1, sender.close).start()
    with pytest.raises(ChannelClosed):
        receiver.receive(time.monotonic() + 5)


@pytest.mark.parametrize("raw", [
    b"HTTP/1.1 200 OK\r\n\r\n",  # not the protocol
    struct.pack(">4sII", b"AGW1", 5, 0) + b"[1,2]",  # a header that is not an object
    struct.pack(">4sII", b"AGW1", 4, 0) + b"{{{{",  # not JSON
    struct.pack(">4sII", b"AGW1", 10_000, 0),  # header over the limit
    struct.pack(">4sII", b"AGW1", 2, 1) + b"{}" + struct.pack(">Q", 1 << 40),  # blob over the limit
    struct.pack(">4sII", b"AGW1", 4000, 0) + b"[" * 3000 + b"]" * 1000,  # nesting that breaks the parser
])
def test_forged_or_oversized_frames_are_bad_messages(pair, raw):
    sender, receiver, _ = pair
    sender.sock.sendall(raw)
    with pytest.raises(BadMessage):
        receiver.receive(time.monotonic() + 2)


def test_a_header_of_more_objects_than_a_reply_can_hold_is_refused_before_it_is_parsed(monkeypatch):
    from notebook_sandbox import channel
    monkeypatch.setattr(channel, "MAX_CONTAINERS", 1000)
    parsed = []
    monkeypatch.setattr(channel.json, "loads", lambda text: parsed.append(text) or {})
    a, b = socket.socketpair()
    header = b'{"junk": [' + b",".join([b"{}"] * 1000) + b"]}"
    a.sendall(struct.pack(">4sII", b"AGW1", len(header), 0) + header)
    with pytest.raises(BadMessage, match="more than 1000 objects and arrays"):
        Channel(b).receive(time.monotonic() + 5)
    assert not parsed
    a.close()
    b.close()


def test_pending_sees_unsolicited_bytes_but_not_a_close(pair):
    sender, receiver, _ = pair
    assert not receiver.pending()
    sender.send({"unasked": True})
    assert receiver.pending()
    receiver.receive(time.monotonic() + 1)
    sender.close()
    assert not receiver.pending()
