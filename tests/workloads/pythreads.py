# SPDX-License-Identifier: MIT
"""Three threads, each spinning in a function of its own (work_a, work_b, work_c) for SECONDS of
its own CPU time, the GIL passed between them: a thread's samples must name its function (each
thread's state found as its own, not the GIL holder's). Usage: pythreads.py [SECONDS]"""
import sys
import threading
import time


def spin(until):
    x = 0
    while time.thread_time() < until:
        for i in range(2000):
            x = (x * 31 + i) % 1000003
    return x


def work_a(s):
    return spin(time.thread_time() + s)


def work_b(s):
    return spin(time.thread_time() + s)


def work_c(s):
    return spin(time.thread_time() + s)


if __name__ == "__main__":
    secs = float(sys.argv[1]) if len(sys.argv) > 1 else 0.8
    ts = [threading.Thread(target=f, args=(secs,)) for f in (work_a, work_b, work_c)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("threads done")
