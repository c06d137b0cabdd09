/*
 * The system calls durability depends on.
 *
 * Layer: the core's lowest (every file of the module may use it; it
 * uses nothing of ours).  Every call whose result decides whether data is
 * durable (a write, a flush, a write-out, a hole punch, an io_uring
 * completion) goes through syncguard_sys, so that tests inject any errno
 * into it and count what a command cost (tests/unit); tests/syscalls.sh
 * fails the build's check when a file of the module calls one directly.
 * What a failed call means is the latch's (core/latch.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"

static ssize_t sys_pwritev2(int fd, const struct iovec *iov, int cnt,
			    off_t off, int flags)
{
	return pwritev2(fd, iov, cnt, off, flags);
}

static void log_stderr(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void (*syncguard_logf)(const char *fmt, ...) = log_stderr;

static int sys_open(const char *path, int flags)
{
	return open(path, flags);
}

static int sys_statx(int fd, unsigned int mask, struct statx *stx)
{
	return statx(fd, "", AT_EMPTY_PATH, mask, stx);
}

/* An io_uring completion's result as the kernel gave it. */
static int ring_result(enum syncguard_call call, int fd, int res)
{
	(void)call;
	(void)fd;
	return res;
}

struct syncguard_sysops syncguard_sys = {
	.pwritev2 = sys_pwritev2,
	.pread = pread,
	.fdatasync = fdatasync,
	.fsync = fsync,
	.sync_file_range = sync_file_range,
	.fallocate = fallocate,
	.open = sys_open,
	.statx = sys_statx,
	.ring_result = ring_result,
};

/*
 * EINTR and EAGAIN from a call that only moves data (a plain write, a
 * read, an open, a hole punch) say "not now": it is made again,
 * SYNCGUARD_RETRIES times at most, so that a file system that keeps
 * answering so cannot hold a worker for ever.  Never from a call that
 * reports writeback errors (a flush, a write-out, an RWF_DSYNC write):
 * there a retry's success proves nothing.  file_write_and_wait_range
 * returns the writeback's own error and drops the mapping's (errseq)
 * while advancing the descriptor past it, so an EINTR or EAGAIN can
 * stand in for an error no later call reports; FUSE writeback that fails
 * with EAGAIN, and a network file system's flush on reconnect, answer
 * EAGAIN for data that is gone (core/policy.c).
 */
bool syncguard_retry(int err, unsigned int *tries)
{
	return (err == EINTR || err == EAGAIN) &&
	       (*tries)++ < SYNCGUARD_RETRIES;
}

int syncguard_datasync(int fd)
{
	return syncguard_sys.fdatasync(fd) ? -errno : 0;
}

int syncguard_fsync(int fd)
{
	return syncguard_sys.fsync(fd) ? -errno : 0;
}

int syncguard_resource_errno(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOMEM ?
	       SYNCGUARD_ERESOURCE : err;
}

const char *syncguard_strerror(int err)
{
	if (err == SYNCGUARD_ERESOURCE)
		return "no descriptor, memory or ring slot for it now";
	return strerror(err);
}
