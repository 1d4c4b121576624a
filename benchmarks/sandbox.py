"""What the sandbox costs per shell command, side by side with the plain shell.

    python -m benchmarks.sandbox [--runs 40] [--command "true"] [--pause MS]

Each way runs the same command in a temporary workspace (a fresh git repository, when git is installed,
left to settle as a real one is), two warm-up runs each, then `--runs` rounds in which the ways take
turns (each round starts one way further along), so that a slow spell of a shared machine, or the
kernel's deferred clean-up after one command, falls on every way alike. It prints the median and the
90th percentile wall time of one whole `shell` call:

- plain:    `tools.shell` with the sandbox off (`subprocess.Popen` of /bin/sh -c, reader thread,
            process-group kill): the baseline;
- sandbox:  `tools.shell` with the sandbox on, the way `tinyharness run` works: the run's spawner
            (sandbox/spawner.py), made at the first command - PID 1 of the run's namespaces, with the
            mounts, Landlock, seccomp and limits applied once - posix_spawns the shell, which sets its
            CPU limit and execs the command, and kills all it left when it ends; around it the
            harness's clean-up (the private TMPDIR removed, the protected paths compared);
- before:   the same with every command cloned into namespaces of its own (sandbox/clone.py: the
            rules prepared once a run, but a copy of the harness, the namespaces, the mounts and the
            rules per command), the way before that (fork, unshare, a second fork for the PID
            namespace, the rules applied in `preexec_fn`), and each command forked with no
            namespaces;
- helper:   the other way to get the rules into the child: a fresh interpreter,
            `python -m tinyharness.sandbox --exec WORKSPACE -- /bin/sh -c COMMAND`, which applies
            them and execs the shell (no clean-up, no snapshot: the confinement alone).

Then the parts of the sandbox's own work, timed alone. Timings vary with the machine and its load;
they are printed, never asserted. The target: under 10 ms a command on a 2-core machine. Where it went,
and why the spawner: a fork costs by the memory the process holds (the row "fork this process"; the
harness holds tens of MiB), and cloning the harness for each command, with the namespaces made and torn
down and the rules applied every time, stayed about 10 ms over the plain shell however it was trimmed
(NOTES.md); a posix_spawn from a small process that holds all of that already costs little more than
the plain shell's own. `--pause MS` idles before each command, as a model's turn does.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tinyharness import sandbox as sb
from tinyharness.sandbox import clone as sandbox_clone
from tinyharness.sandbox.git import SETTLED_NS
from tinyharness.tools import shell

PACKAGE_ROOT = Path(sb.__file__).parent.parent  # the helper runs this checkout's code, installed or not


def timed(function, runs):
    for _ in range(2):  # warm-up: caches, the first fork of a big process
        function()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), sorted(times)[int(0.9 * (len(times) - 1))]


def side_by_side(ways, runs, pause):
    """{name: (median, p90)} of each way's calls, the ways taking turns: each round runs every way
    once, starting one further along each time, so that a slow spell of a shared machine, or the
    kernel's deferred clean-up of one command's namespaces, falls on every way alike. `pause`: seconds
    of idle before each call, as a model's turn gives between two commands."""
    for _, function in ways:  # warm-up: caches, the first fork of a big process
        function()
        function()
    times = {name: [] for name, _ in ways}
    for round_ in range(runs):
        shift = round_ % len(ways)
        for name, function in ways[shift:] + ways[:shift]:
            time.sleep(pause)
            started = time.perf_counter()
            function()
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: (statistics.median(t), sorted(t)[int(0.9 * (len(t) - 1))])
            for name, t in times.items()}


def row(name, median, p90, base=None):
    extra = f"   +{median - base:5.1f} ms" if base is not None else ""
    print(f"  {name:<42} {median:6.1f} ms median  {p90:6.1f} ms p90{extra}")


def the_ways(workspace, command):
    """(name, one call) of each way to run the command, from the plain shell to the sandbox as used
    and the ways it was run before."""
    off, on, flat = sb.Sandbox(enabled=False), sb.Sandbox(), sb.Sandbox(isolate=False)
    cloned = sb.Sandbox()
    cloned._spawners.failed = True  # no spawner: each command cloned into namespaces of its own
    ways = [("plain shell (sandbox off)", lambda: shell(workspace, command, sandbox=off)),
            ("sandbox on (the run's spawner, as used)", lambda: shell(workspace, command, sandbox=on))]
    if on.isolated and sandbox_clone.works():
        ways.append(("sandbox on, cloned each command (before)",
                     lambda: shell(workspace, command, sandbox=cloned)))
        ways.append(("sandbox on, two forks (before that)", lambda: the_two_fork_way(
            lambda: shell(workspace, command, sandbox=cloned))))
    if on.isolated:  # the namespaces' share: a user/mount/PID/network/IPC namespace, the mounts
        ways.append(("sandbox on, without namespaces", lambda: shell(workspace, command, sandbox=flat)))
    return ways


def the_two_fork_way(function):
    """The way before clone3: fork, unshare, a second fork for the PID namespace."""
    sandbox_clone._state["works"] = False
    try:
        function()
    finally:
        sandbox_clone._state["works"] = True


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sandbox", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40, help="timed runs per way (default %(default)s)")
    parser.add_argument("--command", default="true", help="the shell command to run (default %(default)s)")
    parser.add_argument("--pause", type=float, default=0, metavar="MS",
                        help="idle time before each command, as a model's turn gives (default 0: back to back)")
    args = parser.parse_args(argv)
    problem = sb.unavailable_reason()
    print(f"kernel {os.uname().release}, Landlock ABI {sb.landlock_abi()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}, command {args.command!r}, {args.runs} runs each, the ways taking turns, "
          f"{args.pause:g} ms between commands")
    with tempfile.TemporaryDirectory() as workspace:
        if shutil.which("git"):  # a repository, as most workspaces are: its hooks and config get snapshotted
            subprocess.run(["git", "init", "-q", workspace], check=True)
            # and settled, as a real one is: the snapshot keeps what a file unchanged for a while held
            # (sandbox/git.py, SETTLED_NS), so a repository made a moment ago would cost more than one in use
            time.sleep(SETTLED_NS / 1e9 + 0.2)
        if problem:
            row("plain shell (sandbox off)", *timed(lambda: shell(workspace, args.command,
                                                                  sandbox=sb.Sandbox(enabled=False)), args.runs))
            print(f"  the sandbox cannot run here: {problem}")
            return 1
        assert shell(workspace, "true", sandbox=sb.Sandbox()) == "exit status 0 (no output)"
        results = side_by_side(the_ways(workspace, args.command), args.runs, args.pause / 1000)
        plain = results.pop("plain shell (sandbox off)")
        row("plain shell (sandbox off)", *plain)
        for name, (median, p90) in results.items():
            row(name, median, p90, base=plain[0])
        helper = [sys.executable, "-m", "tinyharness.sandbox", "--exec", workspace, "--", "/bin/sh", "-c", args.command]
        row("helper process (python --exec)",
            *timed(lambda: subprocess.run(helper, stdout=subprocess.DEVNULL, check=True, cwd=PACKAGE_ROOT), args.runs),
            base=plain[0])
        parts(workspace, args.runs)
    return 0


def parts(workspace, runs):
    """The sandbox's own parts, each timed alone."""
    print("the sandbox's own parts, alone:")
    on = sb.Sandbox()
    tmpdir = tempfile.mkdtemp()
    row("prepare the rules + build ruleset", *timed(lambda: on.rules(workspace, tmpdir, 60).build().close(), runs))
    real = os.path.realpath(workspace)
    with on._lock:
        row("  once a run; then per command", *timed(lambda: on.rules_for(real, tmpdir, 60, real), runs))
    rules = on.rules(workspace, tmpdir, 60).build()
    row("apply them the two-fork way (+ exit)", *timed(lambda: fork_and(rules.apply), runs))
    row("fork this process (+ exit)", *timed(lambda: fork_and(lambda: None), runs))
    row("walk /proc for leftovers", *timed(lambda: sb.end_everything(2 ** 22 + 1, set()), runs))
    row("snapshot + compare protected paths", *timed(lambda: snapshot_and_compare(workspace), runs))
    rules.close()
    os.rmdir(tmpdir)
    row("a run's first command, its spawner started", *timed(lambda: first_command(workspace, True), runs // 4 or 1))
    row("a run's first command, cloned", *timed(lambda: first_command(workspace, False), runs // 4 or 1))


def first_command(workspace, spawner):
    """One command in a new sandbox, as a run's first: with the spawner, that includes its start."""
    box = sb.Sandbox()
    box._spawners.failed = not spawner
    shell(workspace, "true", sandbox=box)
    box._spawners.close(sb.remove_tmpdir)


def snapshot_and_compare(workspace):
    contents = {}
    sb.restore(workspace, sb.snapshot(workspace, contents), contents)


def fork_and(function):
    pid = os.fork()
    if pid == 0:
        try:
            function()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    sys.exit(main())
