"""Start the sandbox in the slot's cgroup, and as an unprivileged user when the grader runs as root.

``python -m notebook_sandbox.launcher --user UID:GID [--cgroup PROCS] [--bind SRC:DST ...] -- COMMAND ...`` joins
the cgroup, bind-mounts each ``SRC`` at ``DST`` in a private mount namespace (so bubblewrap, as ``UID``, reaches
files under folders that user may not enter, a Python under /root), drops to ``UID:GID`` without supplementary
groups and executes ``COMMAND``. Without root, `notebook_sandbox.container` passes no ``--user`` and no binds.
"""
from __future__ import annotations

import argparse
import os

from .isolation import private_bind_mounts, set_dumpable


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m notebook_sandbox.launcher")
    parser.add_argument("--user", help="UID:GID to run COMMAND as")
    parser.add_argument("--cgroup", help="the cgroup.procs file to join")
    parser.add_argument("--bind", action="append", default=[], help="SRC:DST, mounted for COMMAND only")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.cgroup:
        with open(args.cgroup, "w") as procs:
            procs.write(str(os.getpid()))
    if args.bind:
        private_bind_mounts([tuple(b.split(":", 1)) for b in args.bind])
    if args.user:
        uid, gid = (int(x) for x in args.user.split(":"))
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        set_dumpable(True)  # changing user made the process undumpable; bubblewrap reads its own /proc files
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
