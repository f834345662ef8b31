/* SPDX-License-Identifier: MIT */
/*
 * port/net.h — TCP sockets for the collector and its clients. Every socket we hand out is
 * non-blocking and close-on-exec; reads and writes wait with poll() against an absolute
 * CLOCK_MONOTONIC deadline (0 = none), so no peer can stall a caller past its deadline.
 */
#ifndef EDGEPROF_PORT_NET_H
#define EDGEPROF_PORT_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Splits "HOST:PORT", "[V6]:PORT" or ":PORT" (host empty = any). 0 or -EINVAL.
 */
int net_split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen);

/* Listens on HOST:PORT (SO_REUSEADDR). Returns the fd or -errno with err filled in. */
int net_listen(const char *hostport, int backlog, char *err, size_t errlen);

/* The local port a socket is bound to (after listening on port 0), or -errno. */
int net_local_port(int fd);

/* Accepts one connection (TCP_NODELAY set); peer gets "ip:port". fd, -EAGAIN, or -errno. */
int net_accept(int lfd, char *peer, size_t peerlen);

/* Connects to host:port before deadline_ns. Returns the fd or -errno with err filled in. */
int net_connect(const char *host, const char *port, uint64_t deadline_ns, char *err,
		size_t errlen);

/* Waits for events (POLLIN/POLLOUT) on fd: 0, -ETIMEDOUT or -errno. */
int net_wait(int fd, short events, uint64_t deadline_ns);

/* > 0 bytes read, 0 at end of stream, or -errno (-ETIMEDOUT). */
ssize_t net_read(int fd, void *buf, size_t len, uint64_t deadline_ns);
/* Writes everything: 0 or -errno. */
int net_write(int fd, const void *buf, size_t len, uint64_t deadline_ns);

#endif /* EDGEPROF_PORT_NET_H */
