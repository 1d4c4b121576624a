"""Parallel reads: when one reply asks for several calls that only read, run them at the same time.

The problem. A model exploring a project often asks for five `read_file`s in one reply. Run one
after the other, the turn takes as long as all of them added up; with a slow tool (a network MCP
server, a big file on a slow disk) that is most of the wait.

The mechanism. Calls that only read - `list_dir`, `read_file`, a workspace `view_image`, MCP tools
the configuration marks read-only - cannot change what another call sees, so a run of consecutive
reads goes to a small thread pool and their results are collected **in the order of the calls**
(each result stays paired with its call's id; the model reads them in the order it asked). Anything
that writes or runs a command is a barrier: it runs alone, in order, after the reads before it have
finished, and the reads after it wait for it. The permission prompt is only ever shown for calls
that run alone, so two prompts never race for the terminal.

What it cannot do. "Read-only" is decided by the tool's record (toolrecord.Tool.reads_only; for
MCP, by the configuration's word); a read of a FIFO or a slow mount still blocks its own worker.
Threads help when tools wait (disk, network, a child process); Python code that computes holds the
interpreter lock and gains nothing. Results still enter the context one after the other, so the
context policy sees the same order as before.
"""
from concurrent.futures import ThreadPoolExecutor

MAX_WORKERS = 4


def batches(calls, is_read_only):
    """Split calls into runs: each run is either consecutive read-only calls or one call alone."""
    runs, reads = [], []
    for call in calls:
        if is_read_only(call):
            reads.append(call)
            continue
        if reads:
            runs.append(reads)
            reads = []
        runs.append([call])
    if reads:
        runs.append(reads)
    return runs


def run_together(calls, run_one, max_workers=MAX_WORKERS):
    """Results of `run_one` for each call, in the calls' order; one call alone runs in this
    thread."""
    if len(calls) == 1:
        return [run_one(calls[0])]
    with ThreadPoolExecutor(max_workers=min(max_workers, len(calls))) as pool:
        return list(pool.map(run_one, calls))
