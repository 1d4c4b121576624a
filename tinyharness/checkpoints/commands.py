"""`tinyharness checkpoints`, `tinyharness undo [--to N] [--force]`; chat's `/undo`, `/rewind N`.

The problem. A record nobody can read or use is no undo: the user needs the list (when, which call,
what it changed) and one command that puts the workspace back, saying what it did and what it kept.

The mechanism. The newest run of this workspace with a change not yet undone is "the last run";
its checkpoints are numbered from 1. `undo` scans the workspace (its state is kept in the store
too, under the undo's entry in the record), restores the checkpoint before the last change (or
change N) with restore.py, keeping the paths you changed since (named; `--force` restores them
too), and marks the changes undone: the next `undo` goes one further back. In a chat the run is
the chat's own, and its recorder's record is the one changed.

What it cannot do. It does not redo (the state before each undo is kept in the store, not offered
as a command), and it does not coordinate with a harness still running in the same folder: undo
once the run has ended.
"""
import os
import sys
import time

from ..console import printable
from .recorder import load_cache
from .restore import Restore, diff, yours
from .scan import Snapshot
from .store import Store

SHOWN = 3  # paths named per checkpoint in the list


def active(run):
    return [p for p in run.get("checkpoints", []) if not p.get("undone")]


def last_run(store, live=None):
    """The newest run with a change left to undo (a chat's own record when live), or None."""
    if live is not None:
        return live if active(live) else None
    runs = [r for r in store.load_runs() if active(r)]
    return max(runs, key=lambda r: r.get("started", 0)) if runs else None


def timeline(store, run):
    """Every checkpoint of the workspace, oldest first, the run's own as it is held in memory."""
    others = [r for r in store.load_runs() if r.get("id") != run["id"]]
    points = [p for r in others + [run] for p in r.get("checkpoints", [])]
    return sorted(points, key=lambda p: p["time"])


def summary(paths, count):
    """'3 paths: a.txt, src/ (12), ...' - a folder listed with what is beneath it counts once."""
    shown: list[str] = []
    counts: dict[str, int] = {}
    for path in paths:
        top = next((s for s in shown if path.startswith(s + "/")), None)
        if top:
            counts[top] = counts.get(top, 1) + 1
        else:
            shown.append(path)
    names = [f"{s}/ ({counts[s]})" if s in counts else s for s in shown]
    more = "" if len(names) <= SHOWN else f", and {len(names) - SHOWN} more"
    return f"{count} path{'s' if count != 1 else ''}: " + ", ".join(names[:SHOWN]) + more


def clock(seconds):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def listing(workspace, out=print, live=None, root=None):
    """Print the last run's checkpoints; 0, or 1 when there are none."""
    store = Store(workspace, root)
    run = live or (last_run(store) if store.exists() else None)
    if run is None or not run.get("checkpoints"):
        out(f"No change to undo in {store.workspace}: no run here has made one that is not undone.")
        return 1
    out(f"Changes of the run started {clock(run['started'])} in {store.workspace}:")
    for point in run["checkpoints"]:
        state = "  (undone)" if point.get("undone") else (
            "  (the harness ended mid-call)" if point.get("after") is None else "")
        changed = summary(point.get("changed", []), point.get("count", 0)) if point.get("after") \
            else "not known"
        out(f"  {point['n']:>3}  {time.strftime('%H:%M:%S', time.localtime(point['time']))}  "
            f"{point['call'][:60]}  ->  {changed}{state}")
    out("`tinyharness undo` puts the workspace back as it was before the last change; "
        "`undo --to N` as it was before change N.")
    return 0


def undo(workspace, to=None, force=False, out=print, live=None, root=None):
    """Restore the last run's checkpoint N (default: its last change); the exit code."""
    store = Store(workspace, root)
    run = last_run(store, live) if store.exists() else None
    if run is None:
        out(f"Nothing to undo in {store.workspace}: no run here made a change that is not undone.")
        return 1
    left = active(run)
    number = left[-1]["n"] if to is None else to
    point = next((p for p in left if p["n"] == number), None)
    if point is None:
        out(f"error: the last run has no change {number} left to undo (changes left: "
            f"{', '.join(str(p['n']) for p in left)}; `tinyharness checkpoints` lists them)")
        return 2
    store.open()
    now = Snapshot(store.workspace, store, cache=load_cache(store))
    now.scan()
    points = timeline(store, run)
    changed, unknown = yours(store, points, points.index(point), now.digest())
    done = Restore(store.workspace, store).run(diff(store, now.digest(), point["before"]),
                                               keep=() if force else changed)
    mark_undone(run, left, number, now.digest(), done)
    (live_save(live, store) if live is not None else store.save_run(run))
    return report(done, left, number, unknown, out)


def mark_undone(run, left, number, before, done):
    stamp = time.time()
    for point in left:
        if point["n"] >= number:
            point["undone"] = stamp
    run.setdefault("undos", []).append({"time": stamp, "to": number, "before": before,
                                        "kept": done.kept[:200]})


def live_save(record, store):
    store.save_run(record)


def report(done, left, number, unknown, out):
    undone = [p for p in left if p["n"] >= number]
    out(f"Undid {len(undone)} change{'s' if len(undone) != 1 else ''} (back to before change "
        f"{number}: {undone[0]['call'][:60]}): {len(done.restored)} path(s) restored, "
        f"{len(done.removed)} removed.")
    if unknown:
        out("note: the harness ended mid-call (killed?), so what that call changed was never "
            "recorded: every difference since its checkpoint was taken as the run's.")
    for path in done.kept:
        out(f"kept: {path} (changed after the run, not by it; `--force` puts it back too)")
    for path, why in done.failed:
        out(f"not restored: {path}: {why}")
    return 1 if done.failed else 0


def chat_command(name, rest, recorder, out):
    """/undo, /rewind (the list), /rewind N: in a chat, on the chat's own run."""
    if recorder is None:
        out("Checkpoints are off in this chat (--no-checkpoints), so there is nothing to undo.")
        return
    live = recorder.record
    if live is None:
        out("No change to undo: nothing in this chat has changed the workspace yet.")
        return
    say = lambda text: out(printable(text))  # file names are the model's
    if name == "/rewind" and not rest:
        store_said(lambda: listing(recorder.workspace, say, live=live, root=recorder.root))
        return
    if name == "/rewind" and not rest.isdigit():
        out("/rewind N puts the workspace back as it was before change N; /rewind lists them.")
        return
    with recorder.lock:
        store_said(lambda: undo(recorder.workspace, int(rest) if rest else None, out=say,
                                live=live, root=recorder.root))


def list_command(args, usage):
    """`tinyharness checkpoints`: the current folder's."""
    return store_said(lambda: listing(os.getcwd(), out=shown))


def undo_command(args, usage):
    """`tinyharness undo [--to N] [--force]` in the current folder."""
    if args.to is not None and args.to < 1:
        usage.error("--to takes a change's number, 1 or more (`tinyharness checkpoints` lists "
                    "them)")
    return store_said(lambda: undo(os.getcwd(), args.to, args.force, out=shown))


def shown(text):
    """A line for the terminal: file names are the model's, so escapes are made visible."""
    print(printable(text), flush=True)


def store_said(command):
    """The command's exit code; a store that cannot be read (damaged, a folder that is a file) is
    one line, exit 1, never a traceback."""
    try:
        return command()
    except (OSError, ValueError, RecursionError) as e:
        print(printable(f"error: the checkpoint store cannot be read ({e}); nothing was changed "
                        "by this command"), file=sys.stderr)
        return 1
