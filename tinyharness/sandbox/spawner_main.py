"""The spawner's own program: it runs inside the sandbox, once a run, and starts each command.

The harness runs this file's text with `python -I -S -c` as a sandboxed command (sandbox/spawner.py
says why), so it may use the standard library only and nothing of the package. It is PID 1 of the
run's PID namespace. Its socket to the harness is descriptor `argv[1]`; on it:

    harness -> here: b"c" + 4-byte length + the command, its folder, its CPU seconds and its
                     environment's NAME=value, each ended by a NUL byte, with its stdin, stdout and
                     stderr attached (SCM_RIGHTS); b"k": end it now
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
/proc/1/mem for them). It starts once a run, so it imports little: the C modules behind `socket`
and `signal` (whose Python halves import `enum`), no `json` (which imports `re`).
"""
import _signal
import _socket
import array
import ctypes
import os
import select
import struct
import sys

PR_SET_DUMPABLE, IPC_RMID = 4, 0
LARGEST_REQUEST = 4 << 20


def main(fd):
    # It came here inheritable (across the exec into this program); no command may have it: on it,
    # a command could end itself early for the harness, or take the next command's request.
    os.set_inheritable(fd, False)
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        return 1
    control = _socket.socket(fileno=fd)
    control.sendall(b"r")
    while serve_one(control, libc):
        pass
    end_the_rest()
    return 0


def serve_one(control, libc):
    """Take one request, run it to its end and report; False when the harness has gone."""
    data, fds = receive_with_fds(control)
    if not data:
        return False
    if data != b"c" or len(fds) != 3:  # a kill that came after its command had ended
        for fd in fds:
            os.close(fd)
        return True
    try:
        size = struct.unpack("!I", receive(control, 4))[0]
        request = decode(receive(control, min(size, LARGEST_REQUEST)))
        pid = spawn(request, fds)
    except (OSError, ValueError, KeyError) as e:
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


def receive_with_fds(control):
    """(one byte, the descriptors sent with it), each made close-on-exec: only their copies on 0,
    1 and 2 reach the shell."""
    data, ancillary, _, _ = control.recvmsg(1, _socket.CMSG_LEN(3 * 4))
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % 4])
    for fd in fds:
        os.set_inheritable(fd, False)
    return data, list(fds)


def decode(data):
    """{"command", "cwd", "cpu", "env"} from the NUL-ended fields the harness sent."""
    fields = [os.fsdecode(field) for field in data.split(b"\0")[:-1]]
    if len(fields) < 3:
        raise ValueError("a request without its command, folder and CPU seconds")
    env = dict(field.split("=", 1) for field in fields[3:] if "=" in field)
    return {"command": fields[0], "cwd": fields[1], "cpu": int(fields[2]), "env": env}


def spawn(request, fds):
    """posix_spawn of the shell that limits its CPU time and execs the command."""
    os.chdir(request["cwd"])
    cpu = int(request["cpu"])
    script = f'ulimit -t {cpu} || exit 126; exec /bin/sh -c "$1"'
    streams = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(fds)]
    return os.posix_spawn("/bin/sh", ["/bin/sh", "-c", script, "/bin/sh", request["command"]],
                          request["env"], file_actions=streams, setsid=True,
                          setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT))


def wait_or_end(pid, control):
    """(the shell's exit status, whether the harness has gone), once the shell ended or the harness
    asked (b"k") or went: then it is killed."""
    pidfd, gone = os.pidfd_open(pid), False
    try:
        while pidfd not in select.select([pidfd, control], [], [])[0]:
            asked = control.recv(1)
            gone = not asked
            if gone or asked == b"k":
                os.kill(pid, _signal.SIGKILL)
                break
    finally:
        os.close(pidfd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), gone


def end_the_rest():
    """Kill every other process of the namespace (whatever the command left running, however it
    forked: kill(-1) from PID 1 spares only itself), and reap them."""
    try:
        os.kill(-1, _signal.SIGKILL)
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
