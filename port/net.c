// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "port/clock.h"
#include "port/net.h"

int net_split_hostport(const char *s, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon, *h = s;
	size_t hl;

	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	if (hl >= hostlen || strlen(colon + 1) >= portlen || !colon[1])
		return -EINVAL;
	memcpy(host, h, hl);
	host[hl] = '\0';
	strcpy(port, colon + 1);
	return 0;
}

static int net_set_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int net_resolve(const char *host, const char *port, bool passive, struct addrinfo **res,
		       char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	int ret;

	hints.ai_flags = passive ? AI_PASSIVE : 0;
	ret = getaddrinfo(host && *host ? host : NULL, port, &hints, res);
	if (ret) {
		snprintf(err, errlen, "%s:%s: %s", host ? host : "", port, gai_strerror(ret));
		return -EINVAL;
	}
	return 0;
}

int net_listen(const char *hostport, int backlog, char *err, size_t errlen)
{
	char host[256], port[32];
	struct addrinfo *res, *ai;
	int fd = -EADDRNOTAVAIL, one = 1;

	if (net_split_hostport(hostport, host, sizeof(host), port, sizeof(port))) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", hostport);
		return -EINVAL;
	}
	if (net_resolve(host, port, true, &res, err, errlen))
		return -EINVAL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			fd = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) && !listen(fd, backlog))
			break;
		snprintf(err, errlen, "listen on %s: %s", hostport, strerror(errno));
		close(fd);
		fd = -errno;
	}
	freeaddrinfo(res);
	return fd;
}

int net_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -EAFNOSUPPORT;
}

int net_accept(int lfd, char *peer, size_t peerlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int fd, one = 1, port = 0;

	fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return (errno == EWOULDBLOCK) ? -EAGAIN : -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	} else if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	if (peer)
		snprintf(peer, peerlen, "%s:%d", host, port);
	return fd;
}

int net_wait(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = events };
		int timeout = -1, n;

		if (deadline_ns) {
			uint64_t now = port_clock_mono_ns();

			if (now >= deadline_ns)
				return -ETIMEDOUT;
			timeout = (int)((deadline_ns - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
		}
		n = poll(&pfd, 1, timeout);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

static int net_connect_one(const struct addrinfo *ai, uint64_t deadline_ns)
{
	int fd, one = 1, soerr = 0, ret;
	socklen_t len = sizeof(soerr);

	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
		return fd;
	if (errno != EINPROGRESS) {
		ret = -errno;
		goto out_close;
	}
	ret = net_wait(fd, POLLOUT, deadline_ns);
	if (ret)
		goto out_close;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
		soerr = errno;
	if (!soerr)
		return fd;
	ret = -soerr;
out_close:
	close(fd);
	return ret;
}

int net_connect(const char *host, const char *port, uint64_t deadline_ns, char *err,
		size_t errlen)
{
	struct addrinfo *res, *ai;
	int fd = -EHOSTUNREACH;

	if (net_resolve(host, port, false, &res, err, errlen))
		return -EINVAL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = net_connect_one(ai, deadline_ns);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0)
		snprintf(err, errlen, "connect to %s:%s: %s", host, port, strerror(-fd));
	else
		(void)net_set_flags(fd);
	return fd;
}

ssize_t net_read(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
	for (;;) {
		ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
		int ret;

		if (n >= 0)
			return n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = net_wait(fd, POLLIN, deadline_ns);
		if (ret)
			return ret;
	}
}

int net_write(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int ret;

		if (n >= 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = net_wait(fd, POLLOUT, deadline_ns);
		if (ret)
			return ret;
	}
	return 0;
}
