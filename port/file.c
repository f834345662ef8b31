// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/file.h"

int port_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int port_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int port_pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA; /* short file: the caller asked for bytes that are not there */
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

int port_fsync_parent_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int fd, err = 0;

	if (!slash) {
		strcpy(dir, ".");
	} else if (slash == path) {
		strcpy(dir, "/");
	} else {
		size_t n = (size_t)(slash - path);

		if (n >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		err = -errno;
	close(fd);
	return err;
}

int port_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	struct stat st;
	size_t n = strlen(path);

	if (!n)
		return -ENOENT;
	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	/* Walk down from the top: each prefix ending before a '/' (and the whole path). */
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		if (stat(buf, &st))
			return -errno;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		*p = c;
		if (c == '\0')
			return 0;
		while (p[1] == '/')	/* "a//b" and a trailing "/" */
			p++;
		if (p[1] == '\0')
			return 0;
	}
}

int port_mkdir_parent(const char *path, mode_t mode)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash || slash == path)
		return 0;	/* the current or the root directory */
	n = (size_t)(slash - path);
	if (n >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = '\0';
	return port_mkdir_p(dir, mode);
}

int port_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, err;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	err = port_write_full(fd, data, len);
	if (!err && fsync(fd))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err) {
		unlink(tmp);
		return err;
	}
	return port_fsync_parent_dir(path);
}

ssize_t port_file_read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

int port_file_read_all(const char *path, size_t max, void **data, size_t *len)
{
	size_t cap = 0, used = 0;
	char *buf = NULL;
	int fd, err = 0;

	*data = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Read until EOF rather than trusting st_size (/proc files report 0); max+1 bytes tell. */
	for (;;) {
		ssize_t n;

		if (used == cap) {
			char *nbuf;

			if (cap > max) {
				err = -EFBIG;
				break;
			}
			cap = cap ? cap * 2 : 4096;
			if (cap > max + 1)
				cap = max + 1;
			nbuf = realloc(buf, cap + 1);
			if (!nbuf) {
				err = -ENOMEM;
				break;
			}
			buf = nbuf;
		}
		n = read(fd, buf + used, cap - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	if (!err && used > max)
		err = -EFBIG;
	if (err) {
		free(buf);
		return err;
	}
	buf[used] = '\0';
	*data = buf;
	*len = used;
	return 0;
}
