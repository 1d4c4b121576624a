"""Parallel reads: consecutive read-only calls overlap; writes are barriers; results keep the calls' order."""
import threading
import time

from tinyharness.parallel import batches, run_together


def read(i):
    return {"name": "read_file", "id": f"r{i}"}


def write(i):
    return {"name": "write_file", "id": f"w{i}"}


def is_read(call):
    return call["name"] == "read_file"


def run_in_order(calls, run_one, is_read_only):
    """What loop.py does with a reply's calls: each group from batches() through run_together()."""
    return [pair for group in batches(calls, is_read_only) for pair in zip(group, run_together(group, run_one))]


def test_reads_group_and_writes_stand_alone():
    calls = [read(1), read(2), write(1), read(3), write(2), write(3), read(4), read(5)]
    assert [[c["id"] for c in run] for run in batches(calls, is_read)] == \
           [["r1", "r2"], ["w1"], ["r3"], ["w2"], ["w3"], ["r4", "r5"]]


def test_reads_overlap_and_come_back_in_call_order():
    running, most = [0], [0]
    lock = threading.Lock()

    def slow(call):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2 if call["id"] == "r1" else 0.05)  # the first call finishes last
        with lock:
            running[0] -= 1
        return "result of " + call["id"]

    done = run_in_order([read(1), read(2), read(3), read(4)], slow, is_read)
    assert [r for _, r in done] == ["result of r1", "result of r2", "result of r3", "result of r4"]
    assert most[0] == 4  # all four were running at once: overlap, seen without timing the run


def test_a_write_waits_for_the_reads_before_it_and_the_reads_after_wait_for_it():
    log = []

    def record(call):
        log.append(("start", call["id"]))
        time.sleep(0.05)
        log.append(("end", call["id"]))
        return call["id"]

    run_in_order([read(1), read(2), write(1), read(3)], record, is_read)
    w_start, w_end = log.index(("start", "w1")), log.index(("end", "w1"))
    assert log.index(("end", "r1")) < w_start and log.index(("end", "r2")) < w_start
    assert w_end < log.index(("start", "r3"))
