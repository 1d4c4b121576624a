"""SysV IPC and the kernel's keyrings: shared with every program of the user unless the command gets its own.

A program outside keeps a secret in a SysV shared memory segment; the harness was started in a session
keyring that holds a key (as Kerberos tickets and cifscreds are kept). A sandboxed command knows the
segment's id and the key's serial number (small numbers, easily guessed) and tries to read and overwrite
them: with namespaces it lives in an IPC namespace of its own, without them seccomp refuses every SysV
IPC call; the keyring calls are refused by seccomp either way. The canaries are checked from outside.
"""
import ctypes
import os
import sys

import pytest

from tinyharness import tools
from tinyharness import sandbox as sandbox_module
from tinyharness.sandbox import Sandbox, unavailable_reason

NO_SANDBOX = unavailable_reason()
pytestmark = pytest.mark.skipif(NO_SANDBOX is not None, reason=f"needs the sandbox: {NO_SANDBOX}")
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.shmat.restype = ctypes.c_void_p
LIBC.syscall.restype = ctypes.c_long
IPC_PRIVATE, IPC_CREAT, IPC_RMID = 0, 0o1000, 0
SECRET = b"secret-of-a-program-outside"
KEYCTL = {"x86_64": 250, "aarch64": 219}
ADD_KEY = {"x86_64": 248, "aarch64": 217}
KEY_SPEC_SESSION_KEYRING, KEYCTL_REVOKE, KEYCTL_READ = -3, 3, 11
MACHINE = os.uname().machine

ATTACK_SHM = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
address = libc.shmat({id}, None, 0)
if address in (None, ctypes.c_void_p(-1).value):
    print("shm refused, errno", ctypes.get_errno())
else:
    print("shm read:", ctypes.string_at(address, {size}))
    ctypes.memmove(address, b"pwned", 5)
"""
ATTACK_KEY = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buffer = ctypes.create_string_buffer(256)
got = libc.syscall({keyctl}, {read}, {serial}, buffer, 256)
print("key read:", buffer.raw[:got] if got >= 0 else f"refused, errno {{ctypes.get_errno()}}")
session = libc.syscall({keyctl}, 0, {session}, 0)
print("session keyring:", session if session >= 0 else f"refused, errno {{ctypes.get_errno()}}")
"""


@pytest.fixture
def segment():
    """A SysV shared memory segment of this process holding SECRET: (its id, its address)."""
    shm = LIBC.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o600)
    if shm < 0:
        pytest.skip(f"no SysV shared memory here (errno {ctypes.get_errno()})")
    address = LIBC.shmat(shm, None, 0)
    ctypes.memmove(address, SECRET, len(SECRET))
    yield shm, address
    LIBC.shmdt(ctypes.c_void_p(address))
    LIBC.shmctl(shm, IPC_RMID, None)


@pytest.mark.parametrize("isolate", [True, False], ids=["namespaces", "no-namespaces"])
def test_sysv_shared_memory_outside_is_neither_read_nor_written(tmp_path, segment, isolate):
    if isolate and not sandbox_module.namespaces_work():
        pytest.skip("needs user namespaces")
    shm, address = segment
    (tmp_path / "attack.py").write_text(ATTACK_SHM.format(id=shm, size=len(SECRET)))
    result = tools.shell(str(tmp_path), f"{sys.executable} attack.py; ipcs -m 2>&1 | grep -c {shm} || true",
                         timeout=30, sandbox=Sandbox(isolate=isolate))
    assert "shm refused" in result and SECRET.decode() not in result, result
    assert ctypes.string_at(address, len(SECRET)) == SECRET
    unsandboxed = tools.shell(str(tmp_path), f"{sys.executable} attack.py", timeout=30, sandbox=Sandbox(enabled=False))
    assert SECRET.decode() in unsandboxed  # the attack is real: unconfined, it reads (and overwrites) the secret
    ctypes.memmove(address, SECRET, len(SECRET))


def test_the_session_keyring_and_its_keys_are_out_of_reach(tmp_path):
    if MACHINE not in KEYCTL:
        pytest.skip(f"no keyctl numbers for {MACHINE}")
    serial = LIBC.syscall(ADD_KEY[MACHINE], b"user", b"tinyharness-canary", SECRET, len(SECRET),
                          KEY_SPEC_SESSION_KEYRING)
    if serial < 0:
        pytest.skip(f"no keyring here (add_key: errno {ctypes.get_errno()})")
    try:
        (tmp_path / "attack.py").write_text(ATTACK_KEY.format(keyctl=KEYCTL[MACHINE], read=KEYCTL_READ, serial=serial,
                                                              session=KEY_SPEC_SESSION_KEYRING))
        unsandboxed = tools.shell(str(tmp_path), f"{sys.executable} attack.py", sandbox=Sandbox(enabled=False))
        assert SECRET.decode() in unsandboxed, unsandboxed  # the attack is real
        result = tools.shell(str(tmp_path), f"{sys.executable} attack.py", timeout=30, sandbox=Sandbox())
        assert "key read: refused, errno 1" in result and "session keyring: refused, errno 1" in result, result
    finally:
        LIBC.syscall(KEYCTL[MACHINE], KEYCTL_REVOKE, serial)
