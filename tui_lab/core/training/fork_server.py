"""A waiting process with torch imported that forks each training process (POSIX).

Every training process used to be a fresh interpreter importing torch: about
three seconds of a core each time a run started, opened or was restored, and
the lab (and its tests) start hundreds. The server imports torch once, stays
single-threaded, and forks a child per run in a few milliseconds; the child
takes the working folder and environment of the moment it was asked for, so it
is the process a fresh interpreter started then would be, with torch loaded.

``run_module`` forks a child that runs a module as ``python -m`` would (the
sweep runner's ``tfx-lab train`` processes).
``ForkedProcess`` offers what ``RemoteRun`` and the sweep runner use of ``subprocess.Popen``
(``pid``, ``poll``, ``wait``, ``kill``, ``send_signal``): the server reaps its children and
reports each exit code. The server leaves when the lab does (EOF on its socket);
its children then see EOF on their own sockets and stop as they always did.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

REAP_SECONDS = 0.1  # how often the server looks for children that ended


class ForkedProcess:
    """A training process forked by the server, with ``subprocess.Popen``'s poll/wait/kill.

    Asking for it does not wait: until the server has imported torch and forked,
    the process counts as starting (alive), as a fresh interpreter would.
    """

    def __init__(self, ticket: int, server: ForkServer) -> None:
        self._ticket = ticket
        self._server = server
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        """The process id (waits for the fork if the server is still starting)."""
        return self._server.pid_of(self._ticket)

    def poll(self) -> int | None:
        """The exit code once the process has ended, else None."""
        if self.returncode is None:
            self.returncode = self._server.exit_code(self._ticket, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the process to end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        if self.returncode is None:
            self.returncode = self._server.exit_code(self._ticket, timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"training process {self._ticket}", timeout or 0)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL the process (nothing if it has ended)."""
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the process (nothing if it has ended)."""
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, OSError):
                pass


def fresh_interpreter(code: str, fd: int) -> subprocess.Popen[bytes]:
    """``python -c code`` with the lab's root on its path and socket ``fd`` passed on; no
    terminal (the lab owns it: what the child does reaches the lab over the socket)."""
    root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    return subprocess.Popen(
        [sys.executable, "-c", code],
        pass_fds=[fd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


class ForkServer:
    """The lab's side of the server: ask for a child, learn when children end."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        code = f"from tui_lab.core.training.fork_server import serve; serve({theirs.fileno()})"
        self.process = fresh_interpreter(code, theirs.fileno())
        theirs.close()
        self._sock = mine
        self._ask_lock = threading.Lock()
        self._changed = threading.Condition()
        self._asked = 0  # requests sent; the server answers them in order
        self._pids: list[int] = []  # the pid forked for each request so far
        self._exits: dict[int, int] = {}  # pid -> exit code, as the server reaped them
        self._gone = False  # the server has ended (EOF)
        threading.Thread(target=self._read, name="fork-server", daemon=True).start()

    @property
    def alive(self) -> bool:
        return not self._gone and self.process.poll() is None

    def fork(self, fd: int) -> ForkedProcess:
        """A new child running ``child_main`` on socket ``fd`` (in this folder and environment)."""
        return self._ask({}, [fd])

    def run_module(
        self, module: str, args: list[str], stdout: int, stderr: int, threads: int | None = None
    ) -> ForkedProcess:
        """A new child that runs ``python -m module args`` would, in its own session, with
        ``stdout``/``stderr`` (file descriptors) as its output and ``threads`` torch threads
        (the ``OMP_NUM_THREADS`` that cannot reach a torch already imported)."""
        return self._ask({"module": module, "args": args, "threads": threads}, [stdout, stderr])

    def _ask(self, request: dict[str, object], fds: list[int]) -> ForkedProcess:
        request = {"cwd": os.getcwd(), "env": dict(os.environ), "fds": len(fds), **request}
        with self._ask_lock:
            socket.send_fds(self._sock, [json.dumps(request).encode() + b"\n"], fds)
            ticket, self._asked = self._asked, self._asked + 1
        return ForkedProcess(ticket, self)

    def pid_of(self, ticket: int) -> int:
        """The pid of request ``ticket``'s child (OSError if the server ended before forking it)."""
        with self._changed:
            self._changed.wait_for(lambda: ticket < len(self._pids) or self._gone)
            if ticket < len(self._pids):
                return self._pids[ticket]
        raise OSError("the fork server ended before it forked the training process")

    def exit_code(self, ticket: int, timeout: float | None) -> int | None:
        """Request ``ticket``'s child's exit code once it has ended; None if not within ``timeout``."""
        def ended() -> bool:
            return self._gone or (ticket < len(self._pids) and self._pids[ticket] in self._exits)

        with self._changed:
            self._changed.wait_for(ended, timeout)
            if ticket < len(self._pids) and self._pids[ticket] in self._exits:
                return self._exits[self._pids[ticket]]
            if not self._gone:
                return None
            pid = self._pids[ticket] if ticket < len(self._pids) else None
        # The server has gone (the lab is closing): its child may still be saving.
        return _wait_orphan(pid, timeout)

    def close(self) -> None:
        """End the server (its children carry on until their own sockets close)."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                data = self._sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                break
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            with self._changed:
                for line in lines:
                    kind, pid, code = json.loads(line)
                    if kind == "pid":
                        self._pids.append(pid)
                    else:
                        self._exits[pid] = code
                self._changed.notify_all()
        with self._changed:
            self._gone = True
            self._changed.notify_all()


def _wait_orphan(pid: int | None, timeout: float | None) -> int | None:
    """Wait for a process that is no child of ours: -SIGKILL (unknown code) once it is gone."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while pid is not None and _running(pid):
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
    return -signal.SIGKILL


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return True  # no /proc: it exists


# ---- the server's side ------------------------------------------------------------------


def serve(fd: int) -> None:
    """The server process: import torch, then fork a training process per request until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the lab decides when to stop
    sock = socket.socket(fileno=fd)
    from tui_lab.core.training import remote_child, train  # noqa: F401 - the slow imports, once
    from tui_lab.core.training.heap import keep_freed_memory
    from tui_lab.core.training.schedule import warm_up_optimizer

    warm_up_optimizer()  # else every forked process pays its first AdamW's imports again
    keep_freed_memory()  # inherited by every training process forked

    children: set[int] = set()
    buffer, fds = b"", []
    while True:
        readable, _, _ = select.select([sock], [], [], REAP_SECONDS if children else None)
        _reap(sock, children)
        if not readable:
            continue
        data, new_fds, _, _ = socket.recv_fds(sock, 65536, 16)
        if not data:
            return  # the lab has gone
        buffer += data
        fds += new_fds
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            count = int(request.get("fds", 1))
            mine, fds = fds[:count], fds[count:]
            pid = os.fork()
            if pid == 0:
                _child(sock, request, mine, others=fds)
            for fd in mine:
                os.close(fd)
            children.add(pid)
            sock.sendall(json.dumps(["pid", pid, None]).encode() + b"\n")


def _child(
    server_sock: socket.socket, request: dict[str, object], fds: list[int], others: list[int]
) -> None:
    code = 1
    try:
        server_sock.close()
        for other in others:  # the next children's sockets: holding one would hide their EOF
            os.close(other)
        os.chdir(str(request["cwd"]))
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        if "module" in request:
            code = _run_module(request, fds)
        else:
            from tui_lab.core.training.remote_child import child_main

            child_main(fds[0])
            code = 0
    finally:
        os._exit(code)


def _run_module(request: dict[str, object], fds: list[int]) -> int:
    """``python -m module args`` in this forked child: its own session, its own output,
    ctrl+c as in a fresh interpreter (the server ignores it); the exit code it would have."""
    import runpy

    import torch

    os.setsid()
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    threads = request.get("threads")
    if isinstance(threads, int) and threads > 0:
        torch.set_num_threads(threads)
    module, args = str(request["module"]), request["args"]
    assert isinstance(args, list)
    sys.argv = [module, *map(str, args)]
    code: object = 0
    interrupted = False
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        interrupted = True
    except BaseException:  # noqa: BLE001 - printed, as an interpreter would, then exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    if interrupted:  # as Python ends on an uncaught ctrl+c: killed by SIGINT itself
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        try:
            sock.sendall(json.dumps(["exit", pid, os.waitstatus_to_exitcode(status)]).encode() + b"\n")
        except OSError:
            pass
