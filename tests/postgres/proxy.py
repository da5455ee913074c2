"""A TCP proxy between a client and PostgreSQL that can lose a COMMIT or its reply.

It speaks just enough of the PostgreSQL wire protocol (v3) to find message boundaries: the
startup packet, then ``type byte + int32 length + body`` messages each way.  A ``COMMIT``
is a simple query (``Q``) or an extended-protocol ``Parse`` (``P``) whose text is
``COMMIT``; the extended sequence ends with ``Sync`` (``S``).

Once :meth:`PgProxy.arm` is called, the next COMMIT passing through any connection is cut:

* :attr:`Cut.BEFORE` — the COMMIT is never forwarded; both sockets are closed.  The server
  sees the client vanish inside an open transaction and rolls it back.  The client sees the
  connection drop while COMMIT was in flight: it cannot know it was not delivered.
* :attr:`Cut.AFTER` — the COMMIT is forwarded, the server's whole reply (up to and including
  ``ReadyForQuery``) is read and thrown away, then both sockets are closed.  The server has
  committed; the client never hears so.
* :attr:`Cut.IN_FLIGHT` — the COMMIT is forwarded and both sockets are closed at once,
  without waiting for anything: whether the server commits is a race (it usually does).
* :attr:`Cut.LATE` — the client's connection is cut first; the COMMIT reaches the server
  :attr:`PgProxy.late_delay` seconds later and commits (a COMMIT delayed in the network
  while the client already gave up).  A re-read made right after the client's error sees
  "not committed"; the commit lands afterwards.

:meth:`PgProxy.down` / :meth:`PgProxy.up` play an outage: every connection closed and new
ones dropped, until it ends.

Connections must not use TLS or GSS encryption (the proxy reads the bytes):
:meth:`PgProxy.dsn` adds ``sslmode=disable gssencmode=disable``.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import struct
import threading
import time

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class Cut(enum.Enum):
    BEFORE = "before"
    AFTER = "after"
    IN_FLIGHT = "in-flight"
    LATE = "late"


class _Closed(Exception):
    pass


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise _Closed
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    """(type byte, whole raw message)."""
    head = _recv_exact(sock, 5)
    (length,) = struct.unpack("!I", head[1:])
    return head[:1], head + _recv_exact(sock, length - 4)


def _is_commit(kind: bytes, raw: bytes) -> bool:
    if kind == b"Q":
        text = raw[5:].split(b"\0", 1)[0]
    elif kind == b"P":
        body = raw[5:]
        name_end = body.index(b"\0")  # statement name, then the query text
        text = body[name_end + 1 :].split(b"\0", 1)[0]
    else:
        return False
    return text.strip().rstrip(b";").strip().upper() in (b"COMMIT", b"END", b"COMMIT WORK")


class _Link:
    """One proxied client connection."""

    def __init__(self, proxy: PgProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = socket.create_connection(proxy.upstream, timeout=None)
        for sock in (client, self.server):  # message-by-message forwarding: no Nagle delays
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # server → client after a COMMIT was forwarded: None (pass through), Cut.AFTER
        # (drop the reply, cut at its ReadyForQuery) or Cut.IN_FLIGHT (drop everything).
        self.swallow: Cut | None = None

    def close(self) -> None:
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def start(self) -> None:
        threading.Thread(target=self._upstream, daemon=True, name="proxy-up").start()
        threading.Thread(target=self._downstream, daemon=True, name="proxy-down").start()

    def _late(self, messages: list[bytes]) -> None:
        """Cut the client now; deliver the COMMIT to the server later (Cut.LATE)."""
        self.swallow = Cut.LATE
        with contextlib.suppress(OSError):
            self.client.shutdown(socket.SHUT_RDWR)
        self.client.close()
        self.proxy._record(Cut.LATE)
        time.sleep(self.proxy.late_delay)
        with contextlib.suppress(OSError):
            self.server.sendall(b"".join(messages))

    def _upstream(self) -> None:
        """client → server"""
        pending: Cut | None = None
        held: list[bytes] = []  # Cut.LATE: the COMMIT's messages, delivered late
        try:
            (length,) = struct.unpack("!I", _recv_exact(self.client, 4))
            self.server.sendall(struct.pack("!I", length) + _recv_exact(self.client, length - 4))
            while True:
                kind, raw = _read_message(self.client)
                if pending is None and _is_commit(kind, raw):
                    pending = self.proxy._take_cut()
                    if pending is Cut.BEFORE:
                        self.proxy._record(Cut.BEFORE)
                        self.close()
                        return
                if pending is Cut.LATE:
                    held.append(raw)
                    if kind in (b"Q", b"S"):
                        self._late(held)
                        return
                    continue
                if pending is not None and kind in (b"Q", b"S"):
                    # The last message of the COMMIT: no reply may reach the client any more.
                    self.swallow = pending
                    self.server.sendall(raw)
                    if pending is Cut.IN_FLIGHT:
                        self.proxy._record(Cut.IN_FLIGHT)
                        self.close()
                        return
                    pending = None
                    continue
                self.server.sendall(raw)
        except (_Closed, OSError):
            self.close()

    def _downstream(self) -> None:
        """server → client"""
        try:
            while True:
                kind, raw = _read_message(self.server)
                if self.swallow is not None:
                    # The reply to COMMIT is complete at ReadyForQuery: lose it.
                    if self.swallow in (Cut.AFTER, Cut.LATE) and kind == b"Z":
                        if self.swallow is Cut.AFTER:
                            self.proxy._record(Cut.AFTER)
                        self.close()
                        return
                    continue
                self.client.sendall(raw)
        except (_Closed, OSError):
            self.close()


class PgProxy:
    """Listen on 127.0.0.1 (a free port) and forward to ``upstream`` (see the module doc)."""

    def __init__(self, upstream_dsn: str) -> None:
        params = conninfo_to_dict(upstream_dsn)
        self.upstream = (str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed: list[Cut] = []
        self.cuts: list[Cut] = []  # cuts that happened, in order
        self.cut_done = threading.Event()
        self.late_delay = 0.3
        self._links: list[_Link] = []
        self._stopped = False
        self._down = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def dsn(self, upstream_dsn: str) -> str:
        """``upstream_dsn`` rerouted through the proxy, without encryption."""
        return make_conninfo(
            upstream_dsn,
            host="127.0.0.1",
            hostaddr="127.0.0.1",
            port=str(self.port),
            sslmode="disable",
            gssencmode="disable",
        )

    def arm(self, cut: Cut) -> None:
        """Cut the next COMMIT that passes through (any connection)."""
        with self._lock:
            self._armed.append(cut)
            self.cut_done.clear()

    def disarm(self) -> None:
        with self._lock:
            self._armed.clear()

    def _take_cut(self) -> Cut | None:
        with self._lock:
            return self._armed.pop(0) if self._armed else None

    def _record(self, cut: Cut) -> None:
        with self._lock:
            self.cuts.append(cut)
        self.cut_done.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._stopped:
                client.close()
                return
            if self._down:  # an outage: the connection is dropped as it arrives
                client.close()
                continue
            link = _Link(self, client)
            with self._lock:
                self._links.append(link)
            link.start()

    def down(self) -> None:
        """An outage (a restart, a failover, a cut link): every open connection is closed
        and every new one dropped as it arrives, until :meth:`up`."""
        self._down = True
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def up(self) -> None:
        self._down = False

    def close(self) -> None:
        self._stopped = True
        self._listener.close()
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()
