"""`tfx-lab serve`: the lab as a web page, through textual-serve.

Every browser tab that opens the page gets its own lab process (the command
built by ``lab_command``), so every key binding is the lab's own. The lab
trains on this machine: whoever can reach the address can use its CPU/GPU and
write run folders here, which the startup line says.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import shlex
import sys
from pathlib import Path

from tui_lab.core.errors import LabError

from .shared import Subparsers


def add_parser(sub: Subparsers) -> None:
    s = sub.add_parser("serve",
                       help="serve the lab as a web page (anyone who reaches it can train here)")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    s.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    what = s.add_mutually_exclusive_group()
    what.add_argument("--preset", default=None, help="preset name or YAML path (default: copy)")
    what.add_argument("--run", default=None, help="open the lab on an existing run folder")
    s.set_defaults(handler=serve)


def lab_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs for each browser connection: this lab, same options."""
    parts = [sys.executable, "-m", "tui_lab.cli"]
    if args.runs_dir:
        parts += ["--runs-dir", str(Path(args.runs_dir).expanduser().resolve())]
    if args.run:
        parts += ["--run", str(Path(args.run).expanduser().resolve())]
    elif args.preset:
        # A preset file is named by its absolute path; a preset name stays a name.
        path = Path(args.preset).expanduser()
        parts += ["--preset", str(path.resolve()) if path.is_file() else args.preset]
    return shlex.join(parts)


def _check(args: argparse.Namespace) -> None:
    """Refuse a bad port, preset or run folder with one line, before anything listens."""
    if not 1 <= args.port <= 65535:
        raise LabError(f"--port {args.port}: a port is 1 to 65535")
    if args.run:
        from tui_lab.core.runs.folder import existing_run

        existing_run(args.run)
    else:
        from tui_lab.core.config.presets import load_preset

        load_preset(args.preset)


def is_loopback(host: str) -> bool:
    """True if ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def address(host: str, port: int) -> str:
    """The URL for ``host:port`` (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def startup_lines(host: str, port: int) -> list[str]:
    """What ``serve`` prints once it listens."""
    url = address(host, port)
    if is_loopback(host):
        return [
            f"tfx-lab: serving the lab at {url} (this machine only; Ctrl+C stops)",
            "tfx-lab: anyone who can reach this address can train on this machine",
        ]
    where = "every network interface" if host in ("0.0.0.0", "::", "") else "not only this machine"
    return [
        f"tfx-lab: serving the lab at {url} ({where}; Ctrl+C stops)",
        "tfx-lab: WARNING: NOT LOCALHOST ONLY: anyone who can reach this address can train "
        "on this machine (no password, no TLS)",
    ]


def _server_class() -> type:
    from aiohttp import web
    from textual_serve.server import Server

    class LabServer(Server):
        """textual-serve's Server with the lab's startup line, and page links to the address used."""

        async def on_startup(self, app: web.Application) -> None:
            """Say nothing yet: the startup line comes once the port is bound."""

        async def handle_index(self, request: web.Request) -> web.StreamResponse:
            # The page's script and websocket links follow the address the browser used,
            # so a server bound to 0.0.0.0 or a name works from another machine.
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        def serve(self, debug: bool = False) -> None:
            import asyncio
            import signal

            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            lines = startup_lines(self.host, self.port)
            web.run_app(
                self._make_app(),
                host=self.host,
                port=self.port,
                handle_signals=False,
                loop=loop,
                print=lambda _message: print("\n".join(lines), flush=True),
            )

    return LabServer


def serve(args: argparse.Namespace) -> int:
    """Serve the lab until Ctrl+C (or SIGTERM)."""
    _check(args)
    server = _server_class()(lab_command(args), host=args.host, port=args.port, title="tfx-lab")
    try:
        server.serve()
    except OSError as exc:  # the port is taken, the address is not this machine's, ...
        where = address(args.host, args.port)
        if exc.errno == errno.EADDRINUSE:
            raise LabError(f"cannot listen on {where}: port {args.port} is already in use; "
                           "pick another with --port") from None
        reason = str(exc.strerror or exc).rsplit("): ", 1)[-1]  # aiohttp's wording ends in the OS's
        raise LabError(f"cannot listen on {where}: {reason}") from None
    return 0
