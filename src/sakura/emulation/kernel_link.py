"""A real-kernel emulated link: a network namespace joined to the host by a veth pair, with a
``tbf`` qdisc on the host end whose rate follows a bandwidth trace (``tc qdisc change`` at each
sample), and round-trip delay added in user space by a TCP relay (this kernel has no ``netem``).

The client runs inside the namespace and talks to ``link.url``; the relay forwards to the real
server on the host. ``link.call(fn)`` runs ``fn`` in a thread that has joined the namespace
(threads it starts inherit it), restarting the trace clock first; ``link.command([...])`` wraps
a command line instead. Needs root and ``ip``/``tc``;
:func:`kernel_link_support` says whether, and why not.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import socket
import subprocess
import threading
import time
from collections import deque

from sakura.emulation.traces import BandwidthTrace
from sakura.platform.errors import SakuraError

MIN_RATE_MBIT = 0.01  # tbf cannot be set to zero: an outage is a trickle
_CLONE_NEWNET = 0x40000000


class KernelLinkUnavailable(SakuraError, RuntimeError):
    code = "kernel_link_unavailable"


def kernel_link_support() -> tuple[bool, str]:
    """(True, "") where a KernelLink can be built here, else (False, the reason)."""
    if os.geteuid() != 0:
        return False, "needs root (CAP_NET_ADMIN) to create network namespaces"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"the '{tool}' command is missing"
    name = f"sakura-probe-{os.getpid()}"
    try:
        _run(["ip", "netns", "add", name])
        _run(["ip", "netns", "del", name])
    except KernelLinkUnavailable as exc:
        return False, str(exc)
    return True, ""


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise KernelLinkUnavailable(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.returncode}")


class KernelLink:
    def __init__(self, trace: BandwidthTrace, upstream: tuple[str, int], *, rtt_s: float = 0.04,
                 offset_s: float = 0.0) -> None:
        ok, why = kernel_link_support()
        if not ok:
            raise KernelLinkUnavailable(f"kernel link emulation is unavailable here: {why}")
        self.trace, self.upstream, self.rtt_s, self.offset_s = trace, upstream, rtt_s, offset_s
        tag = f"{os.getpid() % 100000}{random.randrange(100)}"
        self.netns, self.host_if, self.peer_if = f"sakura-{tag}", f"skh{tag}"[:15], f"skp{tag}"[:15]
        subnet = random.randrange(1, 250)
        self.host_ip, self.peer_ip = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        self._stop, self._restart = threading.Event(), threading.Event()
        self._t0 = time.monotonic()
        self._threads: list[threading.Thread] = []
        self._server: socket.socket | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host_ip}:{self.port}"

    def restart_trace(self) -> None:
        """Play the trace from ``offset_s`` again, starting now."""
        self._t0 = time.monotonic()
        self._restart.set()

    def call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` in a thread inside the namespace, with the trace restarted."""
        outcome: dict[str, object] = {}

        def inside() -> None:
            try:
                fd = os.open(f"/var/run/netns/{self.netns}", os.O_RDONLY)
                try:
                    if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
                        raise KernelLinkUnavailable(f"setns failed: {os.strerror(ctypes.get_errno())}")
                finally:
                    os.close(fd)
                self.restart_trace()
                outcome["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # re-raised in the caller's thread
                outcome["error"] = exc

        thread = threading.Thread(target=inside, name="kernel-link-client")
        thread.start()
        thread.join()
        error = outcome.get("error")
        if isinstance(error, BaseException):  # set only by the except clause above
            raise error
        return outcome["value"]

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace (the client's side of the link)."""
        return ["ip", "netns", "exec", self.netns, *argv]

    def __enter__(self) -> KernelLink:
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _setup(self) -> None:
        _run(["ip", "netns", "add", self.netns])
        _run(["ip", "link", "add", self.host_if, "gso_max_segs", "1",  # one MTU a packet: see _tbf
              "type", "veth", "peer", "name", self.peer_if])
        _run(["ip", "link", "set", self.peer_if, "netns", self.netns])
        _run(["ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if])
        _run(["ip", "link", "set", self.host_if, "up"])
        _run(["ip", "netns", "exec", self.netns, "ip", "addr", "add", f"{self.peer_ip}/30", "dev", self.peer_if])
        _run(["ip", "netns", "exec", self.netns, "ip", "link", "set", self.peer_if, "up"])
        _run(["ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up"])
        _run(["tc", "qdisc", "add", "dev", self.host_if, "root", "tbf", *self._tbf(self.trace.rate_at(self.offset_s))])
        self._server = socket.create_server((self.host_ip, 0))
        self.port = self._server.getsockname()[1]
        self._spawn(self._accept_loop)
        self._spawn(self._follow_trace)

    def _tbf(self, mbps: float) -> list[str]:
        """tbf parameters for ``mbps``. The burst shrinks with the rate, and tbf can never send a
        packet longer than its burst: it splits an oversized GSO packet only on enqueue, so one
        queued while the rate was high (up to 33 kB at 67 Mbit/s) blocks the queue, ARP included,
        from the moment the rate falls until it rises as high again (seen as 'no route to host'
        and shards stuck at 0 bytes).
        ``gso_max_segs 1`` on the shaped end keeps every packet to one MTU, below the 3200-byte
        floor."""
        rate = max(mbps, MIN_RATE_MBIT)
        burst = max(3200, int(rate * 1e6 / 8 / 250))  # at least rate/HZ at HZ=250, and two packets
        return ["rate", f"{rate:.4f}mbit", "burst", str(burst), "latency", "200ms"]

    def _follow_trace(self) -> None:
        while not self._stop.is_set():
            self._restart.clear()
            pos = self.offset_s + time.monotonic() - self._t0
            tbf = self._tbf(self.trace.rate_at(pos))
            subprocess.run(["tc", "qdisc", "change", "dev", self.host_if, "root", "tbf", *tbf],
                           capture_output=True, timeout=10)
            rel = pos % self.trace.duration
            later = self.trace.starts[self.trace.starts > rel]
            wait = (later[0] - rel) if len(later) else (self.trace.duration - rel)
            self._restart.wait(max(wait, 0.01))

    # -- the user-space delay relay -------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._server is not None
        self._server.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            for src, dst in ((client, upstream), (upstream, client)):
                self._spawn(self._pipe, src, dst)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        """Forward bytes one way, each chunk released ``rtt_s / 2`` after it was read."""
        line: deque[tuple[float, bytes]] = deque()
        ready = threading.Condition()
        done = [False]

        def writer() -> None:
            while True:
                with ready:
                    while not line and not done[0]:
                        ready.wait(0.2)
                    if not line:
                        break
                    due, data = line.popleft()
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                try:
                    dst.sendall(data)
                except OSError:
                    break
            _shutdown(dst)

        self._spawn(writer)
        src.settimeout(0.5)
        while not self._stop.is_set():
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            with ready:
                line.append((time.monotonic() + self.rtt_s / 2, data))
                ready.notify()
        with ready:
            done[0] = True
            ready.notify()

    def _spawn(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        self._restart.set()
        if self._server is not None:
            self._server.close()
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, timeout=30)
        for t in self._threads:
            t.join(timeout=2)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
