# SPDX-License-Identifier: MIT
"""A hot loop on known lines, for the Python line tests: hot()'s loop (the lines marked HOT)
takes nearly all of the CPU, called from main() on the line marked CALL. The tests find the
lines by their marks, so the file may move. Usage: pylines.py SECONDS"""
import sys
import time


def hot(n):
    x = 0
    for i in range(n):  # HOT
        x = (x * 31 + i) % 1000003  # HOT
    return x


def main():
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 5)
    s = 0
    while time.monotonic() < end:
        s += hot(20000)  # CALL
    print(f"sink {s % 7}")


if __name__ == "__main__":
    main()
