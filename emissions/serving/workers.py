"""`emissions serve --workers N`: N serving processes sharing one port through SO_REUSEPORT.

The parent binds the port (without listening, so that it never receives a connection), forks the
workers, each of which listens on a socket of its own bound to the same port; the kernel spreads
new connections over them. The parent only waits: SIGTERM or Ctrl-C stops every worker the way
one process stops, and a worker that dies on its own is started again (after a short backoff) while
the others serve on; only after MAX_DEATHS deaths within DEATH_WINDOW seconds does the parent stop
the rest and exit 1, for the service manager to restart the whole (docs/operations.md,
"Several workers").
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass

from .. import db
from ..config import Config


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
MAX_DEATHS = 5  # deaths of workers within DEATH_WINDOW seconds after which the parent gives up
DEATH_WINDOW = 60.0
FIRST_BACKOFF = 0.5  # seconds before a dead worker starts again, doubling with each recent death
MAX_BACKOFF = 8.0


@dataclass
class Worker:
    """What one worker process needs beyond the config: its socket and its place."""

    index: int
    socket: socket.socket
    ready_pipe: int

    @property
    def runs_scheduler(self) -> bool:
        return self.index == 0

    def ready(self, url: str) -> None:
        """Tell the parent that this worker is listening."""
        os.write(self.ready_pipe, f"{self.index}\n".encode())
        os.close(self.ready_pipe)


def worker_config(config: Config, workers: int) -> Config:
    """Each worker's share of the per-key rate limit: 1/N of the rate and of the burst.

    The token buckets live in each process, and the kernel spreads one client's connections over
    the workers, so N full buckets would let a key make N times its documented throughput.
    """
    burst = config.rate_limit_burst
    return config.with_(rate_limit_per_second=config.rate_limit_per_second / workers,
                        rate_limit_burst=math.ceil(burst / workers) if burst else 0)


def reuse_port_socket(host: str, port: int, reuse_port: bool = True) -> socket.socket:
    """A TCP socket bound to host:port with SO_REUSEPORT (several may bind the same port)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def serve(config: Config, host: str, port: int, workers: int, *, json_output: bool = False,
          announce=None) -> None:
    """Serve with `workers` processes until SIGTERM or Ctrl-C (see the module's docstring)."""
    from . import server

    try:
        if port:  # taken by anyone, even another `serve --workers`, is taken: never share a port by accident
            reuse_port_socket(host, port, reuse_port=False).close()
        reservation = reuse_port_socket(host, port)
    except (OSError, UnicodeError) as exc:
        raise server.ListenError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    port = reservation.getsockname()[1]
    # No connection or thread may cross the fork: every worker opens its own.
    if db.db.obj is not None:
        db.db.close()
    share = worker_config(config, workers)
    ready_read, ready_write = os.pipe()
    children: dict[int, int] = {}  # pid: worker index
    parent = os.getpid()

    def fork_worker(index: int, ready_pipe: int, other_end: int) -> int:
        sys.stdout.flush()
        sys.stderr.flush()  # nothing buffered may be written twice, by a worker too
        pid = os.fork()
        if pid == 0:  # the worker
            os.close(other_end)
            _run_worker(share, host, port, Worker(index, None, ready_pipe), reservation, parent)
        children[pid] = index
        return pid

    # Held back until each process has its own handlers: a SIGTERM in between is delivered after.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for index in range(workers):
        fork_worker(index, ready_write, ready_read)
    os.close(ready_write)
    stopping = unexpected = False
    ready_pipes: dict[int, int] = {}  # pid: the read end of a restarted worker's ready pipe

    def stop(signum, frame):
        nonlocal stopping
        stopping = True
        _signal_all(list(children), signal.SIGTERM)

    def restart(index: int, status: int, deaths: list[float]) -> None:
        """Start worker `index` again after a backoff; give up after MAX_DEATHS within DEATH_WINDOW."""
        nonlocal unexpected
        now = time.monotonic()
        deaths[:] = [moment for moment in deaths if now - moment < DEATH_WINDOW] + [now]
        how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"exited with status {os.waitstatus_to_exitcode(status)}")
        if len(deaths) >= MAX_DEATHS:
            print(f"emissions: worker {index} {how}; {len(deaths)} deaths within {DEATH_WINDOW:g} s, "
                  "so every worker is stopped", file=sys.stderr, flush=True)
            unexpected = True
            stop(None, None)
            return
        delay = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (len(deaths) - 1))
        print(f"emissions: worker {index} {how}; starting it again in {delay:g} s", file=sys.stderr, flush=True)
        until = now + delay
        while not stopping and time.monotonic() < until:
            time.sleep(0.05)
        if stopping:
            return
        read_end, write_end = os.pipe()
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            # Its "ready" line goes unread (the others serve the port meanwhile); the pipe stays open
            # until it ends, so that writing the line never fails.
            ready_pipes[fork_worker(index, write_end, read_end)] = read_end
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            os.close(write_end)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        started = _read_ready(ready_read, workers)
        if len(started) < workers and not stopping:
            stop(None, None)
            _wait_all(list(children))
            raise server.ListenError(f"cannot serve on {host}:{port}: a worker failed to start (see above)")
        if not stopping:
            url = f"http://{host}:{port}"
            if announce is not None:
                announce(url)
            elif json_output:
                # "cpus" stays, each null, so that scripts reading it keep working (docs/cli.md).
                print(json.dumps({"url": url, "workers": workers, "threads": config.serving_threads,
                                  "cpus": [None] * workers}), flush=True)
            else:
                print(f"Serving on {url} (workers={workers}, threads={config.serving_threads} each)", flush=True)
        deaths: list[float] = []
        while children:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            index = children.pop(pid, None)
            if pid in ready_pipes:
                os.close(ready_pipes.pop(pid))
            if index is not None and not stopping:
                restart(index, status, deaths)
    finally:
        reservation.close()
    if unexpected:
        raise server.ListenError("workers kept stopping unexpectedly, so every worker was stopped")
    print("Stopped.", file=sys.stderr if json_output else sys.stdout, flush=True)


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _stop_with_parent(parent: int) -> None:
    """Have the kernel send this worker SIGTERM when the parent dies, even killed outright (SIGKILL, OOM)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the service manager stops the process group
        return
    if os.getppid() != parent:  # it died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


def _run_worker(config: Config, host: str, port: int, worker: Worker, reservation: socket.socket,
                parent: int) -> None:
    """The body of a forked worker: serve on its own socket, then leave without returning."""
    from . import server

    status = 0
    try:
        _stop_with_parent(parent)
        reservation.close()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops us in order
        signal.signal(signal.SIGTERM, _stop_worker)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        worker.socket = reuse_port_socket(host, port)
        server.serve(config, host, port, announce=worker.ready, worker=worker)
    except server.ListenError as exc:
        print(f"emissions: worker {worker.index}: {exc}", file=sys.stderr, flush=True)
        status = 1
    except SystemExit:  # stopped before it served
        pass
    except BaseException:
        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _stop_worker(signum, frame):
    raise SystemExit(0)  # before server.serve has its own handler: leave through the cleanup


def _read_ready(pipe: int, expected: int) -> set[int]:
    """Each worker that said it listens, reading until all did or every writer is gone."""
    text = b""
    try:
        while text.count(b"\n") < expected:
            chunk = os.read(pipe, 4096)
            if not chunk:
                break
            text += chunk
    except InterruptedError:  # a signal during the wait: we are stopping
        pass
    finally:
        os.close(pipe)
    return {int(line) for line in text.decode().splitlines()}


def _signal_all(children: list[int], signum: int) -> None:
    for pid in children:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _wait_all(children: list[int]) -> None:
    """Reap every worker."""
    remaining = set(children)
    while remaining:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        remaining.discard(pid)
