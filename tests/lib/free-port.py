# SPDX-License-Identifier: MIT
"""Prints a TCP port on 127.0.0.1 that is free now, picked below the kernel's ephemeral range
(net.ipv4.ip_local_port_range): a port taken from that range (bound to 0, then released) was
handed again to a server a test started later on port 0, and the test's own server then found
its port in use (docs-commands, once in CI). Ports outside the range are never handed out so."""
import random
import socket

lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(10000, lo) if lo > 11000 else 0
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
        print(s.getsockname()[1])
        break
    except OSError:
        continue
    finally:
        s.close()
