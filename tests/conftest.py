import os
import shutil
import site
import tempfile

import pytest

from tests.ladder import FINAL, ROOT, STAGES


def pytest_addoption(parser):
    parser.addoption("--stage", metavar="FOLDER",
                     help="only the ladder tests of one stage (e.g. m4_guards): a test parametrised with another "
                          "stage is deselected. `-k m4_guards` alone also selects all of test_m4_guards.py, "
                          "on every later stage too. Tests marked reruns_the_stage (the exercise sweeps, which run "
                          "the stage's tests again on copies) are left to the full suite")


HOME_VARIABLES = ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
                  "TINYHARNESS_PROGRESS", "PYTHONUSERBASE")
# Read by tinyharness after TINYHARNESS_* (endpoint.py): a user's own must not send the suite's runs elsewhere.
ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OLLAMA_HOST")


WORKERS_ENV = "TINYHARNESS_TEST_WORKERS"


def pytest_configure(config):
    spread_over_two_workers(config)
    keep_a_home_of_its_own(config)
    leave_the_terminal()


def leave_the_terminal():
    """The suite answers no permission prompt from the developer's terminal: tinyharness asks at
    /dev/tty (asking.py), and a run started by a test (in this process or a child) would wait there
    for somebody to type. So this process gives up its controlling terminal (TIOCNOTTY; the workers
    and every child it starts inherit none); output and Ctrl-C, which go by the terminal's
    foreground group, are unchanged. A test that wants a terminal gives its run a pty of its own."""
    try:
        import fcntl
        import signal
        import termios
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except (ImportError, OSError):  # no terminal (CI), or not a Unix
        return
    try:
        # a session leader that lets go of its terminal sends SIGHUP to its foreground group
        hangup = signal.signal(signal.SIGHUP, signal.SIG_IGN) if os.getsid(0) == os.getpid() else None
        fcntl.ioctl(fd, termios.TIOCNOTTY)
        if hangup is not None:
            signal.signal(signal.SIGHUP, hangup)
    except OSError:
        pass
    finally:
        os.close(fd)


def spread_over_two_workers(config):
    """The whole suite on two worker processes, a test file each at a time, when pytest-xdist is installed
    (the [test] extra has it): most of a test's time is waiting - for a server thread, a command, a
    child Python - so two keep a 2-core machine busy where one leaves half of it idle. Serial instead
    when -n is given, with -p no:xdist, TINYHARNESS_TEST_WORKERS=1, --stage (one stage's checks, as
    `course check` runs them), or without xdist. A whole file stays on one worker: its tests share what
    its first test builds (a stage's attack run, the try-it outputs, an exercise sweep)."""
    option = config.option
    wanted = int(os.environ.get(WORKERS_ENV) or 2)
    if (not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput") or wanted < 2
            or getattr(option, "numprocesses", None) is not None or option.collectonly
            or config.getoption("--stage") or getattr(option, "usepdb", False)):
        return
    option.numprocesses, option.dist, option.tx = wanted, "loadfile", ["popen"] * wanted


def keep_a_home_of_its_own(config):
    """The suite runs in a home folder of its own: a session, a trust answer, an MCP config or quiz
    progress written by any test (or by a harness a test starts) lands in a temporary folder, never
    in the user's real store. Python's user site stays where it was, so a `pip install --user`
    requests still imports in the processes the tests start."""
    config._real_home = {name: os.environ.get(name) for name in HOME_VARIABLES + ENDPOINT_VARIABLES}
    for name in ENDPOINT_VARIABLES:
        os.environ.pop(name, None)
    user_base = site.getuserbase()
    home = tempfile.mkdtemp(prefix="tinyharness-tests-home-")
    config._test_home = home
    os.environ.update(HOME=home, XDG_DATA_HOME=os.path.join(home, ".local", "share"),
                      XDG_CONFIG_HOME=os.path.join(home, ".config"), XDG_CACHE_HOME=os.path.join(home, ".cache"),
                      XDG_STATE_HOME=os.path.join(home, ".local", "state"),
                      TINYHARNESS_PROGRESS=os.path.join(home, "progress.json"))
    os.environ.setdefault("PYTHONUSERBASE", user_base)


def pytest_unconfigure(config):
    home = getattr(config, "_test_home", None)
    if not home:
        return
    for name, value in config._real_home.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(home, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    # Before -m and -k deselect (this hook runs ahead of pytest's own): which tiers each test function has
    # cases in, for tests/test_tiers.py's "every behaviour runs at least once in the README's command".
    config._tiers = {}
    mark_variants_deep(items)
    for item in items:
        function = (getattr(getattr(item, "path", None), "name", "?"), getattr(item, "originalname", None))
        config._tiers.setdefault(function, set()).add("deep" if item.get_closest_marker("deep") else "quick")
    stage = config.getoption("--stage")
    if not stage:
        return
    other = [item for item in items if of_another_stage(item, stage) or item.get_closest_marker("reruns_the_stage")]
    if other:
        config.hook.pytest_deselected(items=other)
        dropped = set(other)
        items[:] = [item for item in items if item not in dropped]


def mark_variants_deep(items):
    """In a file that says VARIANTS_DEEP = True, the first case of each test function stays in the quick tier
    and its other parameters (the same attack through another file, link or spelling) go to the deep one."""
    seen = set()
    for item in items:
        module = getattr(item, "module", None)
        if getattr(module, "VARIANTS_DEEP", False) and getattr(item, "callspec", None) is not None:
            function = (module.__name__, item.originalname)
            if function in seen:
                item.add_marker(pytest.mark.deep)
            seen.add(function)


def pytest_collection_finish(session):
    """Start the scripted evals that the selected tests read (tests/test_m7_eval.py) in the background.
    Not on a worker of a parallel run, which does not yet know which files it will get: there the
    first test of a file starts the evals that file reads (pytest_runtest_setup below)."""
    if not session.config.option.collectonly and not hasattr(session.config, "workerinput"):
        start_the_evals_read_by(session.items)


_FILES_STARTED = set()


def pytest_runtest_setup(item):
    if hasattr(item.config, "workerinput") and item.path not in _FILES_STARTED:
        _FILES_STARTED.add(item.path)
        start_the_evals_read_by([other for other in item.session.items if other.path == item.path])


def start_the_evals_read_by(items):
    stages = []
    for item in items:
        names = getattr(item, "fixturenames", ())
        stage = (item.callspec.params["scripted_run"] if "scripted_run" in names
                 else FINAL if "scripted_eval" in names else None)
        if stage and stage not in stages:
            stages.append(stage)
    if stages:
        from tests.test_m7_eval import start_scripted_evals
        start_scripted_evals(stages)


def pytest_terminal_summary(terminalreporter):
    """Say what the xfailed count is, where a newcomer reads it: not broken tests, but known escapes."""
    reasons = [str(getattr(r, "wasxfail", "")) for r in terminalreporter.stats.get("xfailed", [])]
    escapes = sum("known escape" in reason for reason in reasons)
    limits = sum(reason.startswith("documented limit") for reason in reasons)
    if escapes:
        terminalreporter.write_line(
            f"{escapes} of the xfailed are known escapes: attacks that m3's command policy cannot see, fired for real "
            "at canary files (docs/m3-attacks.md). They are strict: the day a guard "
            "stops one, its xfail fails the suite, and the case moves to the stopped side.")
    if limits:
        terminalreporter.write_line(
            f"{limits} {'is an attack' if limits == 1 else 'are attacks'} on the harness itself that the README's "
            "\"not covered\" list names (tests/test_harness_attacks.py), kept strict the same way.")


def of_another_stage(item, stage):
    """A case parametrised with stages, none of them this one (`[m3_hooks-m4_guards]` is m4's too)."""
    stages = stages_of(item)
    return bool(stages) and stage not in stages


def stages_of(item):
    """The stages a test is parametrised with (every parameter whose value names a stage)."""
    params = item.callspec.params.values() if hasattr(item, "callspec") else ()
    return {value for value in params if isinstance(value, str) and value in (*STAGES, FINAL)}


@pytest.fixture
def notes_workspace(tmp_path):
    """A fresh copy of examples/notes, the course's demo workspace."""
    workspace = tmp_path / "notes"
    shutil.copytree(ROOT / "examples" / "notes", workspace)
    return workspace


@pytest.fixture
def workspace(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


TEST_TIME_LIMIT = 180  # seconds; the slowest test takes a few. A hang must fail one test, not stall the run.


@pytest.fixture(autouse=True)
def fail_a_test_that_hangs():
    """A per-test limit from the standard library (SIGALRM, main thread, POSIX): a test stuck on a socket
    or a pipe fails with a traceback pointing at where it waited, and the rest of the suite still runs."""
    import signal
    import threading
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def give_up(signum, frame):
        raise TimeoutError(f"the test ran longer than {TEST_TIME_LIMIT} s (tests/conftest.py TEST_TIME_LIMIT)")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(TEST_TIME_LIMIT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
