/* SPDX-License-Identifier: MIT */
/* port/file.h — file helpers with the durability the agent and collector promise. */
#ifndef EDGEPROF_PORT_FILE_H
#define EDGEPROF_PORT_FILE_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Writes data to path so that a crash leaves either the old file or the new one, never a mix:
 * write to a temporary name in the same directory, fsync it, rename over path, fsync the
 * directory. Returns 0 or -errno.
 */
int port_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* fsync the directory that holds path (a rename or create is durable only after this). */
int port_fsync_parent_dir(const char *path);

/*
 * Reads a whole file of at most max bytes into a malloc'd buffer (NUL-terminated for text).
 * Returns 0, -EFBIG when larger than max, or -errno. *data is NULL on error.
 */
int port_file_read_all(const char *path, size_t max, void **data, size_t *len);

/*
 * One read() of a small file (a /proc or sysfs value) into buf, NUL-terminated: at most
 * size - 1 bytes, no allocation. Returns the bytes read, or -errno.
 */
ssize_t port_file_read_small(const char *path, char *buf, size_t size);

/*
 * mkdir -p: creates path and every missing directory above it, each with mode (less the
 * umask). A directory that exists is fine; a component that is not a directory gives -ENOTDIR.
 * Returns 0 or -errno of the first mkdir that failed. The directories a user names (output
 * dir, a ring's or spool's parent, the registry) are created this way, as perf and Go do.
 */
int port_mkdir_p(const char *path, mode_t mode);

/* port_mkdir_p() of the directory that holds path ("a/b/f" -> "a/b"; nothing for "f"). */
int port_mkdir_parent(const char *path, mode_t mode);

/* write()/read() loops that finish the job across short writes and EINTR: 0 or -errno. */
int port_write_full(int fd, const void *buf, size_t len);
int port_pwrite_full(int fd, const void *buf, size_t len, off_t off);
int port_pread_full(int fd, void *buf, size_t len, off_t off);

#endif /* EDGEPROF_PORT_FILE_H */
