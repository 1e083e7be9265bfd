"""A minimal HTTP/1.1 keep-alive client connection, for driving load.

httpx spends milliseconds of client CPU per request with dozens of connections in
flight; on a two-CPU machine a load driven with it measures the client as much as the
server. ``HttpConnection`` sends a fixed-form POST and reads a ``Content-Length``
response, nothing more: no chunked bodies, no redirects, no TLS. ``bench serve`` and
the serving tests use it for the load (and httpx for everything else).
"""

from __future__ import annotations

import anyio
import anyio.abc

__all__ = ["HttpConnection", "connect"]


async def connect(url: str) -> HttpConnection:
    """Open a connection to ``http://host:port`` (*url*, without a path)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return HttpConnection(await anyio.connect_tcp(host, int(port)))


class HttpConnection:
    """One keep-alive connection; use it as an async context manager to close it.

    Requests on one connection must not overlap. A connection the server closes
    mid-response raises ``anyio.EndOfStream``.
    """

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def __aenter__(self) -> HttpConnection:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._stream.aclose()

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """Send a JSON POST to *path*; return the status and the response body."""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        await self._stream.send(head.encode() + body)
        while b"\r\n\r\n" not in self._buffer:
            self._buffer += await self._stream.receive()
        header, _, rest = self._buffer.partition(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        while len(rest) < length:
            rest += await self._stream.receive()
        self._buffer = rest[length:]
        return status, rest[:length]
