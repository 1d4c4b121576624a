"""The spawner's own program: it runs inside the sandbox, once a run, and starts each command.

The harness runs this file's text with `python -I -S -c` as a sandboxed command (sandbox/spawner.py
says why), so it may use the standard library only and nothing of the package. It is PID 1 of the
run's PID namespace. Its socket to the harness is descriptor `argv[1]`; on it:

    harness -> here: b"c" + 4-byte length + JSON {"command", "env", "cwd", "cpu"}, with the
                     command's stdin, stdout and stderr attached (SCM_RIGHTS); b"k": end it now
    here -> harness: b"r" once, ready; b"s" started; b"x" + 4-byte exit status (negative: the
                     signal that ended it); b"e" + 4-byte length + why it could not start

For each command it spawns `/bin/sh` (posix_spawn: no copy of this process is made) in a session of
its own, which sets the command's CPU-seconds limit (`ulimit -t`) and execs `/bin/sh -c COMMAND`.
Everything else the sandbox applies - namespaces, mounts, Landlock, seccomp, the other limits, no
new privileges - this process holds already, and every process it starts inherits it. When the
shell ends, or the harness says so, it kills every other process of the namespace (`kill(-1)`:
everything but itself), reaps them, removes every SysV IPC object the command made, and reports
the shell's status.

It guards itself against the commands it starts: as their namespace's PID 1 it receives only the
signals it handles (SIGINT is ignored, so it handles none), and it is not dumpable (no ptrace, no
/proc/1/mem for them).
"""
import ctypes
import json
import os
import select
import signal
import socket
import struct
import sys

PR_SET_DUMPABLE, IPC_RMID = 4, 0
LARGEST_REQUEST = 4 << 20


def main(fd):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return 1
    control = socket.socket(fileno=fd)
    control.sendall(b"r")
    while serve_one(control, libc):
        pass
    end_the_rest()
    return 0


def serve_one(control, libc):
    """Take one request, run it to its end and report; False when the harness has gone."""
    data, fds, _, _ = socket.recv_fds(control, 1, 3)
    for fd in fds:
        os.set_inheritable(fd, False)  # only their copies on 0, 1 and 2 reach the shell
    if not data:
        return False
    if data != b"c" or len(fds) != 3:  # a kill that came after its command had ended
        for fd in fds:
            os.close(fd)
        return True
    try:
        size = struct.unpack("!I", receive(control, 4))[0]
        request = json.loads(receive(control, min(size, LARGEST_REQUEST)))
        pid = spawn(request, fds)
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = str(e).encode("utf-8", "replace")[:4096]
        control.sendall(b"e" + struct.pack("!I", len(why)) + why)
        return True
    finally:
        for fd in fds:
            os.close(fd)
    control.sendall(b"s")
    status, gone = wait_or_end(pid, control)
    end_the_rest()
    remove_ipc(libc)
    control.sendall(b"x" + struct.pack("!i", status))
    return not gone


def spawn(request, fds):
    """posix_spawn of the shell that limits its CPU time and execs the command."""
    os.chdir(request["cwd"])
    cpu = int(request["cpu"])
    script = f'ulimit -t {cpu} || exit 126; exec /bin/sh -c "$1"'
    streams = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)]
    return os.posix_spawn("/bin/sh", ["/bin/sh", "-c", script, "/bin/sh", str(request["command"])],
                          {str(k): str(v) for k, v in request["env"].items()},
                          file_actions=streams, setsid=True,
                          setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT))


def wait_or_end(pid, control):
    """(the shell's exit status, whether the harness has gone), once the shell ended or the harness
    asked (b"k") or went: then it is killed."""
    pidfd, gone = os.pidfd_open(pid), False
    try:
        while pidfd not in select.select([pidfd, control], [], [])[0]:
            asked = control.recv(1)
            gone = not asked
            if gone or asked == b"k":
                os.kill(pid, signal.SIGKILL)
                break
    finally:
        os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), gone


def end_the_rest():
    """Kill every other process of the namespace (whatever the command left running, however it
    forked: kill(-1) from PID 1 spares only itself), and reap them."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def remove_ipc(libc):
    """Remove every SysV shared memory segment, message queue and semaphore set of the namespace:
    the next command finds none, as in a namespace of its own."""
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                ids = [int(line.split()[1]) for line in list(table)[1:] if line.split()]
        except (OSError, ValueError, IndexError):
            continue
        for number in ids:
            remove(number)


def receive(sock, size):
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(size - len(data), 1 << 16))
        if not chunk:
            raise OSError("the harness closed the socket")
        data += chunk
    return bytes(data)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
