# SPDX-License-Identifier: MIT
"""Three handlers taking known CPU shares (fib 50 %, work_dict 30 %, outer -> inner 20 % of
slices of the thread's CPU time), for the Python frame tests and benchmark: the script prints
its own accounting (the thread's CPU time around each handler) and exits with EXIT (0).
Slices are CPU time, not wall time, and their lengths random, 5-25.2 ms a round: two periods
of the BPF sampler's 99 Hz wide, so that each round starts at a uniformly random phase of its
clock. Rounds of 7-13 ms (the period +-3 ms) drifted against it only slowly, consecutive
samples fell on the same handler, and the shares moved 2-11 pp from run to run where 600-3,000
independent samples give 1-2 (bpf-python, 2026-11-29). With wall-time slices on a loaded
machine, a handler starts when the thread is scheduled back in, just after a kernel tick, and one shorter than the tick (4 ms) ends before the next: CPU-time timers,
checked at ticks, would then never see it (measured: work_dict 15 % of the samples for 37 %
of the CPU). Real services do not start their work on the scheduler's tick.
SECONDS are wall time; with CLOCK "cpu", the process's CPU time: the same number of samples
however loaded the machine is (the share bounds assume a sample count: 3 pp needs ~2,500 for
1 pp of standard error, and 6 s of wall time at load 10 gave 394).
Each handler's loop runs in its own frame: fib's once ran in run() (a call of fib(12) and a
clock read a turn), and the samples that fell there between calls named no handler, ~1 pp of
fib's share under in every sampler.
Usage: pysplit.py SECONDS [EXIT [CLOCK]]"""
import random
import sys
import time

SHARES = {"fib": 0.5, "work_dict": 0.3, "outer": 0.2}
spent = dict.fromkeys(SHARES, 0.0)
sink = 0


def fib(n, until=0.0):
    r = n if n < 2 else fib(n - 1) + fib(n - 2)
    while until and time.thread_time() < until:  # the handler's rounds, in fib's own frame
        r += fib(n)
    return r


def work_dict(until):
    d, s = {}, 0
    while time.thread_time() < until:
        for i in range(500):
            k = "k" + str(i % 97)
            d[k] = d.get(k, 0) + len(k)
            s += d[k]
    return s


def inner(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) % 1000003
    return x


def outer(until):
    s = 0
    while time.thread_time() < until:
        s += inner(2000) + inner(1000)
    return s


def run(name, ms):
    global sink
    c0 = time.thread_time()
    until = c0 + ms / 1000.0
    if name == "fib":
        sink += fib(12, until)
    elif name == "work_dict":
        sink += work_dict(until)
    else:
        sink += outer(until)
    spent[name] += time.thread_time() - c0


def main():
    clock = time.process_time if sys.argv[3:4] == ["cpu"] else time.monotonic
    end = clock() + float(sys.argv[1] if len(sys.argv) > 1 else 5)
    while clock() < end:
        period = random.uniform(5, 25.2)  # 2 sampling periods wide: see above
        for name, share in SHARES.items():
            run(name, period * share)
    total = sum(spent.values())
    for name in SHARES:
        print(f"{name} {100 * spent[name] / total:.2f}")
    print(f"sink {sink % 7}")
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)


if __name__ == "__main__":
    main()
