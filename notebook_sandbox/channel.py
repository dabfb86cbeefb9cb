"""Framed messages over a stream socket, with deadlines and a size limit on what is received::

    b"AGW1" | u32 header length | u32 blob count | header JSON | (u64 length | bytes) per blob

A late reply, a closed socket, a malformed or oversized frame each raise their own `ChannelError`, so the
grader tells a hung cell from a crash or a forgery.
"""
from __future__ import annotations

import json
import select
import socket
import struct
import time

__all__ = ["Channel", "ChannelError", "ChannelClosed", "ChannelTimeout", "BadMessage"]

MAGIC = b"AGW1"
_HEAD = struct.Struct(">4sII")
_BLOB = struct.Struct(">Q")
MAX_MESSAGE = 32 * 2**20
"""Bytes one message may take, header and blobs together."""
# Objects and arrays in one header, counted before it is parsed: a reply's tree holds at most wire.MAX_ITEMS nodes
# (a few brackets each), and 32 MiB of "{}" would parse into a dozen million dicts (over a GiB) for nothing.
MAX_CONTAINERS = 2**20


class ChannelError(Exception):
    """The other side broke the protocol or went away (see the subclasses)."""


class ChannelClosed(ChannelError):
    """The other side closed the socket (or died) before the message was complete."""


class ChannelTimeout(ChannelError):
    """No complete message before the deadline."""


class BadMessage(ChannelError):
    """A malformed, oversized, unexpected or unsolicited message."""


def _encodable(value: object) -> object:
    """``value`` with every string one that UTF-8 can encode. A JSON escape can make a lone surrogate
    (``"\\ud800"``, printed by the student's code), which the notebook file, the feedback page and the
    gradebook cannot hold: each becomes ``?``."""
    if type(value) is str:
        return value.encode("utf-8", "replace").decode("utf-8")
    if type(value) is list:
        return [_encodable(item) for item in value]
    if type(value) is dict:
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    return value


class Channel:
    """Messages over ``sock`` (a connected stream socket), at most ``max_bytes`` each way received."""

    def __init__(self, sock: socket.socket, max_bytes: int = MAX_MESSAGE):
        self.sock, self.max_bytes = sock, max_bytes

    def send(self, header: dict, blobs: list[bytes] | tuple[bytes, ...] = (), deadline: float | None = None) -> None:
        body = json.dumps(header, separators=(",", ":")).encode()
        parts = [_HEAD.pack(MAGIC, len(body), len(blobs)), body]
        for blob in blobs:
            parts += [_BLOB.pack(len(blob)), blob]
        self._timeout(deadline)
        try:
            self.sock.sendall(b"".join(parts))
        except TimeoutError as error:
            raise ChannelTimeout("the other side stopped reading") from error
        except OSError as error:
            raise ChannelClosed(f"the other side is gone ({error.strerror or error})") from error

    def receive(self, deadline: float | None = None) -> tuple[dict, list[bytes]]:
        magic, header_size, n_blobs = _HEAD.unpack(self._read(_HEAD.size, deadline))
        if magic != MAGIC:
            raise BadMessage(f"a message that does not start with the protocol's marker ({magic!r})")
        budget = self.max_bytes - header_size
        if budget < 0 or n_blobs > self.max_bytes // _BLOB.size:
            raise BadMessage(f"a message larger than the limit of {self.max_bytes} bytes")
        text = self._read(header_size, deadline)
        if text.count(b"{") + text.count(b"[") > MAX_CONTAINERS:
            raise BadMessage(f"a message whose header holds more than {MAX_CONTAINERS} objects and arrays")
        try:
            header = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise BadMessage(f"a message whose header is not JSON ({type(error).__name__})") from None
        if type(header) is not dict:
            raise BadMessage("a message whose header is not a JSON object")
        try:
            header = _encodable(header)
        except RecursionError:
            raise BadMessage("a message whose header is nested too deeply") from None
        blobs = []
        for _ in range(n_blobs):
            (size,) = _BLOB.unpack(self._read(_BLOB.size, deadline))
            budget -= size + _BLOB.size
            if budget < 0:
                raise BadMessage(f"a message larger than the limit of {self.max_bytes} bytes")
            blobs.append(self._read(size, deadline))
        return header, blobs

    def pending(self) -> bool:
        """Whether bytes are waiting that nobody asked for yet (a closed socket is not that)."""
        if not select.select([self.sock], [], [], 0)[0]:
            return False
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        except OSError:
            return False

    def close(self) -> None:
        self.sock.close()

    def _timeout(self, deadline: float | None) -> None:
        if deadline is None:
            self.sock.settimeout(None)
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ChannelTimeout("the deadline passed")
        self.sock.settimeout(remaining)

    def _read(self, size: int, deadline: float | None) -> bytes:
        buffer = bytearray(size)
        view, got = memoryview(buffer), 0
        while got < size:
            self._timeout(deadline)
            try:
                n = self.sock.recv_into(view[got:], min(size - got, 1 << 20))
            except TimeoutError:
                raise ChannelTimeout("no complete reply before the deadline") from None
            except OSError as error:
                raise ChannelClosed(f"the connection failed ({error.strerror or error})") from None
            if n == 0:
                raise ChannelClosed("the other side closed the connection")
            got += n
        return bytes(buffer)
