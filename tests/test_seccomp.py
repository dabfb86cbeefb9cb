"""The runner's seccomp filter (`notebook_sandbox.isolation.refuse_processes_and_hidden_memory`), installed in a child of this
process, with the system calls made through ctypes (which the runner closes to notebooks: what a cell reaches without
it is tried in the real sandbox, tests/test_sandbox.py); and read instruction by instruction for each architecture it
has a table for. Each probe's arguments are ones a kernel without the filter answers otherwise than the filter does
(a bad flag, descriptor or process id; success), so an answer from the filter is told from the kernel's own."""
import ctypes
import errno
import json
import os
import platform
import re
import struct
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import pytest

from notebook_sandbox import isolation

MACHINE = platform.machine()
needs_a_table = pytest.mark.skipif(MACHINE not in ("x86_64", "aarch64"), reason="no system call table here")
ALLOW, ERRNO, KILL = isolation.SECCOMP_RET_ALLOW, isolation.SECCOMP_RET_ERRNO, isolation.SECCOMP_RET_KILL_PROCESS
NUMBERS = {  # the calls glibc has no wrapper for, by their numbers (linux/unistd.h): this test's own table
    "x86_64": {"shmget": 29, "semget": 64, "msgget": 68, "keyctl": 250, "kcmp": 312, "bpf": 321,
               "perf_event_open": 298, "userfaultfd": 323, "eventfd": 284, "eventfd2": 290},
    "aarch64": {"shmget": 194, "semget": 190, "msgget": 186, "keyctl": 219, "kcmp": 272, "bpf": 280,
                "perf_event_open": 241, "userfaultfd": 282, "eventfd2": 19},
}.get(MACHINE, {}) | {"pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
                      "io_uring_register": 427, "fspick": 433, "pidfd_open": 434, "pidfd_getfd": 438,
                      "process_madvise": 440, "mount_setattr": 442, "memfd_secret": 447, "open_tree_attr": 467}


def in_filtered_child(probe):
    """``probe(libc, answer)`` run in a forked child of this process once the runner's filter is installed there;
    what it returned (JSON). ``answer(result)`` is a call's errno name, or "ok" when it succeeded."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
            isolation.refuse_processes_and_hidden_memory()

            def answer(result):
                return "ok" if result != -1 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

            said = probe(libc, answer)
        except BaseException:
            said = {"child failed": traceback.format_exc()}
        try:
            os.write(write, json.dumps(said).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        said = json.loads(pipe.read())
    os.waitpid(child, 0)
    return said


@needs_a_table
def test_the_runners_seccomp_filter_refuses_hidden_memory_namespaces_mounts_and_keyrings():
    """SysV shared memory, semaphores and message queues and a tmpfs mounted in a namespace of its own hold memory
    the address-space limit does not count; a keyring is shared with the grader's login session and the next runner."""
    def probe(libc, answer):
        n = NUMBERS
        clone_newuser, clone_newns = 0x10000000, 0x00020000
        return [answer(libc.syscall(n["shmget"], 0, 2**20, 0o1600)), answer(libc.syscall(n["keyctl"], 0, -3, 0)),
                answer(libc.unshare(clone_newuser | clone_newns)),
                answer(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=100%")),
                answer(libc.syscall(n["semget"], 0, 32000, 0o1600)), answer(libc.syscall(n["msgget"], 0, 0o1600))]

    assert in_filtered_child(probe) == ["EPERM"] * 6


@needs_a_table
def test_the_filter_allows_a_unix_socket_and_no_other():
    """Netlink (the kernel's routing and more), vsock (the host, from a virtual machine), packet and IP sockets:
    the runner's network namespace is empty, but each family is a way to the kernel or the host of its own."""
    af_unix, af_inet, af_inet6, af_netlink, af_packet, af_vsock = 1, 2, 10, 16, 17, 40
    sock_stream, sock_dgram, sock_raw = 1, 2, 3

    def probe(libc, answer):
        pair = (ctypes.c_int * 2)()
        said = {"unix": answer(libc.socket(af_unix, sock_stream, 0)),
                "unix pair": answer(libc.socketpair(af_unix, sock_stream, 0, pair)),
                "vsock": answer(libc.socket(af_vsock, sock_stream, 0)),
                "netlink": answer(libc.socket(af_netlink, sock_raw, 0)),
                "inet": answer(libc.socket(af_inet, sock_stream, 0)),
                "inet6": answer(libc.socket(af_inet6, sock_dgram, 0)),
                "packet": answer(libc.socket(af_packet, sock_raw, 0)),
                "inet pair": answer(libc.socketpair(af_inet, sock_stream, 0, pair)),
                "netlink pair": answer(libc.socketpair(af_netlink, sock_raw, 0, pair))}
        # the kernel reads the family as an int: the high half of the register changes nothing
        number = {"x86_64": 41, "aarch64": 198}[os.uname().machine]
        said["inet, high bits set"] = answer(libc.syscall(number, ctypes.c_long(af_inet | 1 << 32), sock_stream, 0))
        return said

    said = in_filtered_child(probe)
    assert said.pop("unix") == said.pop("unix pair") == "ok"
    assert said == dict.fromkeys(said, "EAFNOSUPPORT")


@needs_a_table
def test_the_filter_refuses_other_processes_and_the_kernel_interfaces_a_notebook_has_no_use_for():
    """ptrace, pidfds and another process's memory; BPF, perf events, userfaultfd and io_uring (each a well-trodden
    way into the kernel; io_uring does I/O no seccomp filter sees); eventfds; unmounting (what is under the runner's
    /tmp or its read-only /proc/sys) and the rest of the mount API; memfd_secret (memory of a hidden kind)."""
    def probe(libc, answer):
        n, null, bad = NUMBERS, None, 0x80000000  # bad: a flag no kernel knows (EINVAL without the filter)
        said = {  # what each answers without the filter, in the comment
            "ptrace": answer(libc.ptrace(2, 0x3FFFFFFF, null, null)),  # ESRCH
            "process_vm_readv": answer(libc.process_vm_readv(os.getpid(), null, 0, null, 0, 1)),  # EINVAL
            "process_vm_writev": answer(libc.process_vm_writev(os.getpid(), null, 0, null, 0, 1)),  # EINVAL
            "process_madvise": answer(libc.syscall(n["process_madvise"], -1, null, 0, 0, 1)),  # EINVAL
            "kcmp": answer(libc.syscall(n["kcmp"], 0x3FFFFFFF, 0x3FFFFFFF, 0, 0, 0)),  # ESRCH
            "pidfd_open": answer(libc.syscall(n["pidfd_open"], os.getpid(), 1)),  # EINVAL
            "pidfd_getfd": answer(libc.syscall(n["pidfd_getfd"], -1, 0, 1)),  # EINVAL
            "pidfd_send_signal": answer(libc.syscall(n["pidfd_send_signal"], -1, 0, null, 0)),  # EBADF
            "bpf": answer(libc.syscall(n["bpf"], -1, null, 0)),  # EINVAL
            "perf_event_open": answer(libc.syscall(n["perf_event_open"], null, 0, -1, -1, ctypes.c_ulong(bad))),
            "userfaultfd": answer(libc.syscall(n["userfaultfd"], 1 | 0x10)),  # EINVAL (user mode only: allowed)
            "io_uring_setup": answer(libc.syscall(n["io_uring_setup"], 0, null)),  # EFAULT
            "io_uring_enter": answer(libc.syscall(n["io_uring_enter"], -1, 0, 0, 0, null, 0)),  # EBADF
            "io_uring_register": answer(libc.syscall(n["io_uring_register"], -1, 0, null, 0)),  # EINVAL
            "eventfd2": answer(libc.syscall(n["eventfd2"], 0, 0x2)),  # EINVAL
            "umount2": answer(libc.umount2(b"/tmp", bad)),  # EINVAL
            "chroot": answer(libc.chroot(b"/no/such/folder")),  # ENOENT
            "fspick": answer(libc.syscall(n["fspick"], -1, b"", bad)),  # EINVAL as root
            "mount_setattr": answer(libc.syscall(n["mount_setattr"], -1, b"", bad, null, 0)),  # EINVAL
            "open_tree_attr": answer(libc.syscall(n["open_tree_attr"], -1, b"", bad, null, 0)),  # EINVAL, or ENOSYS
            "memfd_secret": answer(libc.syscall(n["memfd_secret"], bad)),  # EINVAL, or ENOSYS
        }
        if "eventfd" in n:
            said["eventfd"] = answer(libc.syscall(n["eventfd"], 0))  # a new eventfd
        return said

    said = in_filtered_child(probe)
    assert said == dict.fromkeys(said, "EPERM")


@pytest.mark.slow
def test_torch_and_threads_run_under_the_filter():
    """What a notebook's cells do, in a fresh Python that installs the filter first and imports torch after it."""
    script = textwrap.dedent("""
        import ctypes, io, socket
        from concurrent.futures import ThreadPoolExecutor
        from notebook_sandbox import isolation
        ctypes.CDLL(None).prctl(isolation.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        isolation.refuse_processes_and_hidden_memory()
        import torch
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        a = torch.randn(256, 256, requires_grad=True)
        (a @ a).tanh().sum().backward()
        assert a.grad.shape == (256, 256)
        torch.set_num_threads(4)
        b = torch.randn(1024, 1024)
        assert torch.allclose(b @ b, (b.double() @ b.double()).float(), atol=1e-2)
        with ThreadPoolExecutor(4) as pool:
            sums = list(pool.map(lambda x: (x @ x).sum(), [b] * 8))
        assert all(torch.allclose(s, (b @ b).sum(), rtol=1e-4) for s in sums)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(10)), batch_size=4)
        assert [len(x) for x, in loader] == [4, 4, 2]
        plt.plot([1, 2, 3])
        plt.savefig(io.BytesIO(), format="png")
        left, right = socket.socketpair()
        left.send(b"x")
        assert right.recv(1) == b"x"
        print("ran", torch.get_num_threads())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          cwd=Path(isolation.__file__).parents[1], env={**os.environ, "MPLBACKEND": "Agg"})
    assert done.returncode == 0 and done.stdout.split() == ["ran", "4"], done.stderr[-3000:]


def run_filter(program, nr, arch, args=(0,) * 6):
    """The filter's answer to one system call: the program run as the kernel runs it (classic BPF)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(a % 2**64 for a in args))
    pc, accumulator = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == isolation.BPF_RET_K:
            return k
        if code == isolation.BPF_LD_W_ABS:
            accumulator, pc = struct.unpack_from("<I", data, k)[0], pc + 1
            continue
        taken = {isolation.BPF_JEQ_K: accumulator == k, isolation.BPF_JGE_K: accumulator >= k,
                 isolation.BPF_JSET_K: bool(accumulator & k)}[code]
        pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_answers_each_system_call_as_meant_on_each_architecture(machine):
    arch, numbers = isolation._SYSCALLS[machine]
    program = isolation.seccomp_program(machine)
    assert len(program) < 4096 and program[-1][0] == isolation.BPF_RET_K
    for pc, (code, jt, jf, _) in enumerate(program):  # every jump lands inside the program
        assert code == isolation.BPF_RET_K or pc + 1 + max(jt, jf) < len(program)

    def answer(name, *args):
        return run_filter(program, numbers[name], arch, args + (0,) * (6 - len(args)))

    for name in isolation._REFUSED:
        if name in numbers:
            assert answer(name) == ERRNO | errno.EPERM, name
    assert answer("clone3") == ERRNO | errno.ENOSYS
    for name in ("socket", "socketpair"):
        assert answer(name, isolation.AF_UNIX, 1) == ALLOW
        for family in (0, 2, 10, 16, 17, 40, 2**16 + isolation.AF_UNIX, 2**32 + 2):
            assert answer(name, family, 1) == ERRNO | errno.EAFNOSUPPORT, (name, family)
        assert answer(name, 2**32 + isolation.AF_UNIX, 1) == ALLOW  # the kernel reads the low half, an int
    threads = 0x3D0F00  # glibc's pthread_create: CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD...
    assert answer("clone", threads) == ALLOW
    assert answer("clone", 0x01200011) == ERRNO | errno.EPERM  # fork's: SIGCHLD, no CLONE_THREAD
    assert answer("clone", threads | isolation.CLONE_NEWNET) == ERRNO | errno.EPERM
    ordinary = {"x86_64": (0, 1, 9, 202), "aarch64": (63, 64, 222, 98)}[machine]  # read, write, mmap, futex
    assert all(run_filter(program, nr, arch) == ALLOW for nr in ordinary)
    assert run_filter(program, 0, 0x40000003) == KILL  # another ABI (i386)
    if machine == "x86_64":
        assert run_filter(program, isolation.X32_SYSCALL_BIT | 41, arch, (2, 1, 0, 0, 0, 0)) == ERRNO | errno.EPERM


HEADERS = {"x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "aarch64": "/usr/include/asm-generic/unistd.h"}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_system_call_numbers_agree_with_the_kernel_headers(machine):
    """Where this machine has the headers (linux-libc-dev); a call the headers predate is not checked."""
    header = Path(HEADERS[machine])
    if not header.exists():
        pytest.skip(f"no {header}")
    defined = {name: int(number) for name, number in re.findall(r"#define __NR_(\w+)\s+(\d+)\b", header.read_text())}
    numbers = isolation._SYSCALLS[machine][1]
    assert {name: number for name, number in numbers.items() if name in defined} \
        == {name: defined[name] for name in numbers if name in defined}
    assert all(name in defined for name, number in numbers.items() if number < 424)  # the headers were read
