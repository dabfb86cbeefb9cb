"""Linux isolation for one notebook's runner, used by `notebook_sandbox.zygote` for every notebook.

`enter_fresh_namespaces` (user, mount, PID, IPC, UTS, network; empty size-limited ``/tmp`` and ``/dev/shm``:
the kernel kills whatever the runner leaves when it ends), `drop_privileges` (no capabilities,
``no_new_privs``), `refuse_processes_and_hidden_memory` (seccomp) and `limit_resources` (rlimits). What each
refuses and why is in autograde/README.md ("Nothing survives from one notebook to the next"). Python 3.11 has
no ``os.unshare``: the system calls go through ctypes.
"""
from __future__ import annotations

import ctypes
import os
import resource

__all__ = ["enter_fresh_namespaces", "drop_privileges", "die_with_parent", "refuse_processes_and_hidden_memory",
           "limit_resources", "close_other_fds", "set_dumpable", "private_bind_mounts", "show_only"]

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000, 1 << 18
MS_RELATIME = 1 << 21
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
RUNNER_UID = 1000
"""The runner's user and group id inside its user namespace (mapped to the sandbox's own)."""


class IsolationError(OSError):
    """A namespace, mount or privilege step failed (the kernel does not allow it here)."""


def _call(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise IsolationError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def private_bind_mounts(binds: list[tuple[str, str]]) -> None:
    """In a new mount namespace of this process, mount each ``source`` also at ``target`` (needs CAP_SYS_ADMIN)."""
    _call(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
    _call(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    for source, target in binds:
        _call(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")


def set_dumpable(dumpable: bool) -> None:
    """A process that is not dumpable cannot be ptraced, nor its /proc files read, by others of the same user."""
    _call(_libc.prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0), "set dumpable")


def enter_fresh_namespaces(tmp_mb: int) -> None:
    """Move this process into new namespaces (its next child is PID 1): user ``RUNNER_UID``, private mounts, new
    ``tmp_mb`` MiB tmpfs at ``/tmp`` and ``/dev/shm``, ``/proc/sys`` read-only (``ns_last_pid`` is mode 0666)."""
    uid, gid = os.getuid(), os.getgid()
    _call(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET),
          "unshare")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{RUNNER_UID} {uid} 1")
    _write("/proc/self/gid_map", f"{RUNNER_UID} {gid} 1")
    _call(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    options = f"size={tmp_mb}m,mode=1777".encode()
    for target in (b"/tmp", b"/dev/shm"):
        if os.path.isdir(target):
            _call(_libc.mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV, options), f"mount {target.decode()}")
    _bind_read_only("/proc/sys", "/proc/sys")


def _bind_read_only(source: str, target: str) -> None:
    """``source`` bound at ``target`` and that bind made read-only, in this process's mount namespace."""
    # a remount keeps the flags the enclosing mount locked (nosuid, nodev, noexec, atime), or the kernel refuses it
    locked = os.statvfs(source).f_flag
    kept = (locked & (os.ST_NOSUID | os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME)) \
        | (MS_RELATIME if locked & os.ST_RELATIME else 0)
    _call(_libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None), f"bind {source}")
    _call(_libc.mount(None, target.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept, None),
          f"read-only {target}")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_CAPSET = {"x86_64": 126, "aarch64": 91}.get(os.uname().machine)  # the capset system call's number


def drop_privileges(parent_death_signal: int) -> None:
    """No capabilities left, none to gain; killed with ``parent_death_signal`` if the parent dies."""
    if _CAPSET is None:
        raise IsolationError(0, f"capset: unknown system call number on {os.uname().machine}")
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _call(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a bounding capability")
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # version 3: two 32-bit words
    _call(_libc.syscall(_CAPSET, ctypes.byref(header), data), "capset")
    _call(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    die_with_parent(parent_death_signal)


def die_with_parent(signal_number: int) -> None:
    """Be sent ``signal_number`` when the thread that started this process ends."""
    _call(_libc.prctl(PR_SET_PDEATHSIG, signal_number, 0, 0, 0), "parent death signal")


# seccomp (linux/seccomp.h, linux/filter.h, linux/audit.h)
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
CLONE_THREAD, CLONE_NEWCGROUP = 0x00010000, 0x02000000
CLONE_NAMESPACES = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                    | CLONE_NEWNET)
X32_SYSCALL_BIT = 0x40000000
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AF_UNIX = 1

_NEWER = {"pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
          "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
          "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
          "memfd_secret": 447, "open_tree_attr": 467}
"""System calls from 424 on: one number on every architecture."""
_SYSCALLS = {  # the architecture's audit id, then the system calls the filter looks at
    "x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "shmget": 29, "semget": 64, "msgget": 68,
                            "mq_open": 240, "memfd_create": 319, "add_key": 248, "request_key": 249, "keyctl": 250,
                            "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155,
                            "chroot": 161, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                            "kcmp": 312, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "eventfd": 284,
                            "eventfd2": 290, "socket": 41, "socketpair": 53, **_NEWER}),
    "aarch64": (0xC00000B7, {"clone": 220, "shmget": 194, "semget": 190, "msgget": 186, "mq_open": 180,
                             "memfd_create": 279, "add_key": 217, "request_key": 218, "keyctl": 219, "unshare": 97,
                             "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "ptrace": 117,
                             "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "bpf": 280,
                             "perf_event_open": 241, "userfaultfd": 282, "eventfd2": 19, "socket": 198,
                             "socketpair": 199, **_NEWER}),
}
# Refused with EPERM (a name an architecture lacks is skipped):
_REFUSED = (
    "fork", "vfork",  # a new process (and clone without CLONE_THREAD; clone3 is ENOSYS)
    # memory no limit counts: SysV shared memory, semaphores and message queues, POSIX message queues, memfds
    "shmget", "semget", "msgget", "mq_open", "memfd_create", "memfd_secret",
    "add_key", "request_key", "keyctl",  # the keyrings
    # namespaces and mounts (a tmpfs of its own holds memory no limit counts; an unmount would uncover what is under)
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "open_tree_attr", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # another process, its memory or descriptors
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_open", "pidfd_getfd",
    "pidfd_send_signal",
    # kernel interfaces no notebook needs, each an attack surface of its own (io_uring does I/O that no seccomp
    # filter sees, sockets included); torch, its thread pools and Python's threads use none of them
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "eventfd",
    "eventfd2")
# socket and socketpair: a Unix socket only, any other address family refused with EAFNOSUPPORT, as by a kernel
# without it. The runner's network namespace is empty, but netlink, vsock, packet and the rest are each a way to
# the kernel or the host of their own; nothing in the runner opens any but a Unix one.
_ONLY_UNIX = ("socket", "socketpair")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic BPF program of `refuse_processes_and_hidden_memory`, as (code, jt, jf, k) instructions."""
    if machine not in _SYSCALLS:
        raise IsolationError(0, f"seccomp: no system call table for {machine}")
    arch, numbers = _SYSCALLS[machine]
    refused = [(numbers[name], EPERM) for name in _REFUSED if name in numbers]
    refused.append((numbers["clone3"], ENOSYS))  # its flags sit in memory a filter cannot read: glibc falls back
    program = [(BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
               (BPF_JEQ_K, 1, 0, arch),
               (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),  # another ABI's numbers mean other calls
               (BPF_LD_W_ABS, 0, 0, 0)]  # seccomp_data.nr
    if machine == "x86_64":  # the x32 ABI: the same calls under other numbers
        program += [(BPF_JGE_K, 0, 1, X32_SYSCALL_BIT), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM)]
    for number, errno in refused:
        program += [(BPF_JEQ_K, 0, 1, number), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno)]
    socket_call, socketpair_call = (numbers[name] for name in _ONLY_UNIX)
    program += [(BPF_JEQ_K, 1, 0, socket_call),
                (BPF_JEQ_K, 0, 4, socketpair_call),
                (BPF_LD_W_ABS, 0, 0, 16),  # the low half of seccomp_data.args[0], the address family (an int)
                (BPF_JEQ_K, 0, 1, AF_UNIX),
                (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
                (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EAFNOSUPPORT)]
    program += [(BPF_JEQ_K, 0, 4, numbers["clone"]),
                (BPF_LD_W_ABS, 0, 0, 16),  # the low half of seccomp_data.args[0], clone's flags
                (BPF_JSET_K, 0, 1, CLONE_THREAD),  # not a thread of this process: refused
                (BPF_JSET_K, 0, 1, CLONE_NAMESPACES),  # a thread, in namespaces of its own: refused
                (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
                (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    return program


def refuse_processes_and_hidden_memory() -> None:
    """Install the seccomp filter: no new process, hidden memory (SysV IPC, message queues, memfds, mounts),
    keyring, look into another process, unneeded kernel interface (`_REFUSED`), or non-Unix socket. Needs
    ``no_new_privs`` (`drop_privileges`); nothing can lift it."""
    program = seccomp_program(os.uname().machine)
    instructions = (_SockFilter * len(program))(*(_SockFilter(*i) for i in program))
    fprog = _SockFprog(len(program), instructions)
    _call(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp filter")


def limit_resources(*, processes: int, open_files: int, file_mb: int, memory_mb: int | None) -> None:
    """rlimits for this process and its children; ``memory_mb`` caps the address space above today's use."""
    limits = {resource.RLIMIT_NPROC: processes, resource.RLIMIT_NOFILE: open_files,
              resource.RLIMIT_FSIZE: file_mb * 2**20, resource.RLIMIT_CORE: 0}
    if memory_mb is not None:
        with open("/proc/self/statm") as statm:
            current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limits[resource.RLIMIT_AS] = current + memory_mb * 2**20
    for which, value in limits.items():
        resource.setrlimit(which, (value, value))
    _write("/proc/self/oom_score_adj", "1000")  # the runner, not the pristine process, goes first


def close_other_fds(keep: int) -> None:
    """Standard streams to /dev/null; every other descriptor but ``keep`` closed."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    os.set_inheritable(keep, False)


def show_only(source: str, target: str, hide: str) -> None:
    """``source`` read-only at ``target``, and an empty tmpfs over ``hide`` (what the runner may not see beside it)."""
    _bind_read_only(source, target)
    _call(_libc.mount(b"tmpfs", hide.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, b"size=4k,mode=555"),
          f"hide {hide}")
