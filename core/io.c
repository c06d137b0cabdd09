/*
 * How a write reaches the level the policy asks (syncguard_lun_write):
 * cached, written (plp) or durable; where it goes (O_DIRECT or the page
 * cache, core/mix.c), on which descriptor (the sync descriptors, one per
 * durability call), with which call (RWF_DSYNC, a group flush, a
 * write-out); and reads and hole punches.  Every system call goes
 * through syncguard_sys (core/sys.c).
 *
 * Layer: below exec.c, plan.c and lun.c; it uses writesync.c, flush.c,
 * mix.c and latch.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "core.h"
#include "internal.h"

/*
 * Another descriptor of the file or device lun->fd has open, never of
 * whatever its path names now: a rename or a new file under the old name
 * after the LUN was created must not move its writes and flushes to
 * another file (test_open_rename_keeps_the_file: a second LUN could
 * then be created on the path).  Opening /proc/self/fd/N opens the same inode
 * again with @flags (a new open file description, which sees every
 * writeback error from now on); the device and inode are checked all
 * the same.  Returns the descriptor, or -errno (-ESTALE: not the same).
 */
int syncguard_reopen(const struct syncguard_lun *lun, int flags)
{
	char self[32];
	struct stat a, b;
	unsigned int tries = 0;
	int fd;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", lun->fd);
	while ((fd = syncguard_sys.open(self, flags | O_CLOEXEC)) < 0)
		if (!syncguard_retry(errno, &tries))
			return -errno;
	if (fstat(fd, &a) || fstat(lun->fd, &b) || a.st_dev != b.st_dev ||
	    a.st_ino != b.st_ino || a.st_rdev != b.st_rdev) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* ---- durability primitives ---- */

/*
 * Sync descriptors.  Linux reports a writeback error once per open file
 * description (errseq): when two threads flush through one descriptor
 * and both flushes covered pages that failed, one sees EIO and the other
 * gets 0, and would answer GOOD for data that never reached the device.
 * So every call that makes data durable (RWF_DSYNC write, fdatasync,
 * sync_file_range) runs on a descriptor that no other call uses at the
 * same time, opened separately (dup() would share the description).
 * Each descriptor then sees every error since it last reported one; a
 * new one also sees errors nobody has seen yet, but not one another has
 * reported.  That is enough for an RWF_DSYNC write, which vouches for
 * its own pages only, whose errors come after its descriptor was
 * opened.  A group flush vouches for every write before it, so it runs
 * on a descriptor opened with the LUN, before any write: lun->group_fd
 * on the worker threads (their group flushes run one at a time,
 * core/flush.c), and on the io_uring engine the descriptor it takes
 * from the pool as the LUN opens and keeps to itself (glue/uring.c,
 * syncguard_uring_open; its flushes too run one at a time).  A
 * descriptor the pool opened while another call had just taken an
 * error, not yet latched, would have missed it.  The
 * power-cut test (scripts/crashtest.sh) loses acknowledged plp writes
 * without separate descriptors.
 */
static int pool_get(struct syncguard_lun *lun, bool direct)
{
	struct syncguard_fd_pool *p = &lun->pool[direct];
	int fd = -1;

	pthread_mutex_lock(&lun->pool_lock);
	if (p->n)
		fd = p->fds[--p->n];
	pthread_mutex_unlock(&lun->pool_lock);
	if (fd < 0)
		fd = syncguard_reopen(lun, O_RDWR | (direct ? O_DIRECT : 0));
	/* out of descriptors or memory: nothing written yet, BUSY */
	return fd < 0 ? -syncguard_resource_errno(-fd) : fd;
}

/* Idle descriptors a pool keeps, per kind: a queue depth of 32 or so
 * reuses them; the rest of a burst's are closed again.  Kept without a
 * bound, 260 stay open after one run at QD128 x 2 sessions, out of
 * tgtd's RLIMIT_NOFILE for every LUN. */
#define POOL_IDLE_MAX	64u

static void pool_put(struct syncguard_lun *lun, bool direct, int fd)
{
	struct syncguard_fd_pool *p = &lun->pool[direct];

	pthread_mutex_lock(&lun->pool_lock);
	if (p->n == p->cap && p->cap < POOL_IDLE_MAX) {
		unsigned int cap = p->cap ? p->cap * 2 : 16;
		int *fds = realloc(p->fds, cap * sizeof(*fds));

		if (fds) {
			p->fds = fds;
			p->cap = cap;
		}
	}
	if (p->n < p->cap) {
		p->fds[p->n++] = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&lun->pool_lock);
	if (fd >= 0)
		close(fd);
}

int syncguard_sync_fd_get(struct syncguard_lun *lun)
{
	return pool_get(lun, false);
}

void syncguard_sync_fd_put(struct syncguard_lun *lun, int fd)
{
	pool_put(lun, false, fd);
}

int syncguard_direct_fd_get(struct syncguard_lun *lun)
{
	return pool_get(lun, true);
}

void syncguard_direct_fd_put(struct syncguard_lun *lun, int fd)
{
	pool_put(lun, true, fd);
}

/* Write all of @len bytes at @off through @fd, retrying short writes,
 * and EINTR and EAGAIN of a plain write (syncguard_retry; an RWF_DSYNC
 * write's are its sync's, a failure).  @flags: pwritev2 flags (RWF_DSYNC
 * or 0).  0 or -errno. */
static int write_all(int fd, const uint8_t *buf, size_t len, uint64_t off,
		     int flags)
{
	unsigned int tries = 0;

	while (len) {
		struct iovec iov = { (void *)buf, len };
		ssize_t n = syncguard_sys.pwritev2(fd, &iov, 1, (off_t)off,
						   flags);

		if (n < 0 && !(flags & RWF_DSYNC) &&
		    syncguard_retry(errno, &tries))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;	/* no progress: never loop forever */
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/* Write out [off, off+len) to the device through @fd and wait, no cache
 * flush; a failure latches (SYNCGUARD_CALL_WRITEOUT).  @fd is a sync
 * descriptor taken before the data was written: one opened after could
 * miss a writeback error of that data that another descriptor had
 * already reported (errseq samples at open; see "sync descriptors").
 * Nothing for @len 0, which sync_file_range reads as "to the end of the
 * file" (a FUA write of no blocks on plp would write out the whole
 * file).  0 or -errno. */
static int writeout(struct syncguard_lun *lun, int fd, uint64_t off,
		    uint64_t len)
{
	unsigned int how = SYNC_FILE_RANGE_WAIT_BEFORE |
			   SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;

	if (!len)
		return 0;
	syncguard_count(&lun->stats->writeouts);
	if (syncguard_sys.sync_file_range(fd, (off_t)off, (off_t)len, how))
		return syncguard_call_failed(lun, SYNCGUARD_CALL_WRITEOUT, errno);
	return 0;
}

/* How one write goes (route) and what it holds until unroute. */
struct route {
	bool direct;			/* O_DIRECT, else the page cache */
	enum syncguard_mix_kind held;	/* its claim in lun->mix */
	uint8_t *bounce;		/* aligned copy, or NULL */
};

/*
 * Where a write (@dsync: an RWF_DSYNC one) goes: O_DIRECT where
 * syncguard_direct_ok says so and, on a LUN that writes both ways, its
 * granules are free of page-cache writes; through an aligned copy if
 * *@buf is not aligned (then *@buf points to the copy).  Else the page
 * cache, after any O_DIRECT write in its granules (core/mix.c).  0, or
 * -SYNCGUARD_ERESOURCE when the copy found no memory (the page cache is
 * no way out: see open_direct); unroute() in every case.
 */
static int route(struct syncguard_lun *lun, const uint8_t **buf, size_t len,
		 uint64_t off, bool dsync, struct route *r)
{
	r->bounce = NULL;
	r->held = SYNCGUARD_MIX_NONE;
	r->direct = syncguard_direct_ok(lun, off, len, dsync);
	if (r->direct && lun->mix.on) {
		r->direct = syncguard_mix_try(&lun->mix, SYNCGUARD_MIX_DIRECT,
					      off, len);
		r->held = r->direct ? SYNCGUARD_MIX_DIRECT : SYNCGUARD_MIX_NONE;
	}
	if (!r->direct) {
		if (lun->mix.on) {
			syncguard_mix_wait(&lun->mix, off, len);
			r->held = SYNCGUARD_MIX_CACHED;
		}
		return 0;
	}
	*buf = syncguard_direct_buf(lun, *buf, len, &r->bounce);
	if (!*buf)
		return -SYNCGUARD_ERESOURCE;
	syncguard_count(&lun->stats->direct_writes);
	return 0;
}

/* The write routed by @r to @len bytes at @off is over. */
static void unroute(struct syncguard_lun *lun, struct route *r,
		    size_t len, uint64_t off)
{
	syncguard_mix_end(&lun->mix, r->held, off, len);
	r->held = SYNCGUARD_MIX_NONE;
	free(r->bounce);
	r->bounce = NULL;
}

/*
 * This write's data, its metadata and the device cache, before return:
 * RWF_DSYNC, O_DIRECT where the LUN's writes go so.  Every file system
 * in Linux's tree takes RWF_DSYNC (since 4.7; only a file without
 * write_iter refuses it, before writing), so an EOPNOTSUPP is the sync's
 * (a FUSE daemon's FSYNC answer, a device's failed flush) and latches as
 * any other (SYNCGUARD_CALL_DSYNC_WRITE; test_exec_dsync_eopnotsupp_latches).
 * 0 or -errno.
 */
static int write_durable(struct syncguard_lun *lun, const uint8_t *buf,
			 size_t len, uint64_t off)
{
	struct route r;
	int fd, err;

	err = route(lun, &buf, len, off, true, &r);
	fd = err ? err : r.direct ? syncguard_direct_fd_get(lun) :
			 syncguard_sync_fd_get(lun);
	if (fd < 0) {
		unroute(lun, &r, len, off);
		return fd;
	}
	syncguard_count(&lun->stats->dsync_writes);
	err = write_all(fd, buf, len, off, RWF_DSYNC);
	if (err)
		syncguard_call_failed(lun, SYNCGUARD_CALL_DSYNC_WRITE, -err);
	if (r.direct)
		syncguard_direct_fd_put(lun, fd);
	else
		syncguard_sync_fd_put(lun, fd);
	unroute(lun, &r, len, off);
	return err;
}

/* One plain write through the LUN's descriptor for it (see route); whether
 * it went O_DIRECT in *@direct.  0 or -errno. */
static int write_plain(struct syncguard_lun *lun, const uint8_t *buf,
		       size_t len, uint64_t off, bool *direct)
{
	struct route r;
	int err;

	err = route(lun, &buf, len, off, false, &r);
	*direct = r.direct;
	if (!err)
		err = write_all(r.direct ? lun->dfd : lun->fd, buf, len, off, 0);
	unroute(lun, &r, len, off);
	return err;
}

/* A write into the page cache, or with O_DIRECT into the device's cache:
 * volatile until the next device flush.  Counted dirty even when it
 * failed: part of it may have reached the cache (a flush too many is
 * the only cost). */
static int write_cached(struct syncguard_lun *lun, const uint8_t *buf,
			size_t len, uint64_t off)
{
	bool direct;
	int err = write_plain(lun, buf, len, off, &direct);

	syncguard_mark_dirty(lun);
	return err;
}

/* plp: written to the device and waited for, no flush: O_DIRECT, or a
 * buffered write and its writeout, on a sync descriptor taken before the
 * write (see writeout).  0 or -errno. */
static int write_written(struct syncguard_lun *lun, const uint8_t *buf,
			 size_t len, uint64_t off)
{
	/* route() sends it O_DIRECT exactly so (plp writes one way) */
	bool direct = syncguard_direct_ok(lun, off, len, false) && !lun->mix.on;
	int fd = direct ? -1 : syncguard_sync_fd_get(lun), err;

	if (!direct && fd < 0)
		return fd;
	err = write_plain(lun, buf, len, off, &direct);
	if (!err && !direct)	/* fd < 0 cannot be: then direct was */
		err = fd >= 0 ? writeout(lun, fd, off, len) : -EIO;
	if (fd >= 0)
		syncguard_sync_fd_put(lun, fd);
	return err;
}

static int write_persist_durable(struct syncguard_lun *lun, const uint8_t *buf,
				 size_t len, uint64_t off)
{
	bool scored;
	int err;

	syncguard_durable_begin(lun);
	if (syncguard_use_dsync(lun, &scored)) {
		err = write_durable(lun, buf, len, off);
	} else {
		err = write_cached(lun, buf, len, off);
		if (!err)
			err = syncguard_lun_flush(lun, false);
	}
	syncguard_durable_end(lun);
	if (!err)
		syncguard_durable_answered(lun, scored, !scored);
	return err;
}

bool syncguard_direct_ok(struct syncguard_lun *lun, uint64_t off, size_t len,
			 bool dsync)
{
	return (lun->direct_io || (lun->mix.on && dsync)) && len &&
	       !(off % lun->dio_align) && !(len % lun->dio_align);
}

const uint8_t *syncguard_direct_buf(struct syncguard_lun *lun,
				    const uint8_t *buf, size_t len,
				    uint8_t **bounce)
{
	*bounce = NULL;
	if (!((uintptr_t)buf % lun->dio_mem_align))
		return buf;
	if (posix_memalign((void **)bounce, 4096, len))
		return NULL;
	memcpy(*bounce, buf, len);
	return *bounce;
}

int syncguard_lun_write(struct syncguard_lun *lun, const uint8_t *buf,
			size_t len, uint64_t off, enum syncguard_persist persist)
{
	int err = 0;

	if (persist != SYNCGUARD_PERSIST_CACHED && syncguard_lun_recheck(lun))
		return -syncguard_lun_latched(lun);
	switch (persist) {
	case SYNCGUARD_PERSIST_CACHED:
		return write_cached(lun, buf, len, off);
	case SYNCGUARD_PERSIST_DURABLE:
		err = write_persist_durable(lun, buf, len, off);
		break;
	case SYNCGUARD_PERSIST_WRITTEN:
		err = write_written(lun, buf, len, off);
		break;
	}
	/* a failure has latched where the policy says (the call that
	 * failed knows: write_durable, writeout, the group flush) */
	if (!err && persist != SYNCGUARD_PERSIST_CACHED)
		err = syncguard_lun_lost_meanwhile(lun);
	return err;
}

int syncguard_lun_persist(struct syncguard_lun *lun,
			  enum syncguard_persist persist)
{
	/* WRITTEN asks for the data in the device: a flush gives that and
	 * more (plp writes its data WRITTEN as it goes, so none comes here) */
	if (persist == SYNCGUARD_PERSIST_CACHED)
		return 0;
	return syncguard_lun_flush(lun, false);
}

/* Exactly @len bytes at @off from @fd: 0 or -errno (-EIO at EOF). */
static int read_all(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	unsigned int tries = 0;

	while (len) {
		ssize_t n = syncguard_sys.pread(fd, buf, len, (off_t)off);

		if (n < 0 && syncguard_retry(errno, &tries))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;	/* the file shrank under us */
		buf += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int syncguard_lun_read(struct syncguard_lun *lun, uint8_t *buf, size_t len,
		       uint64_t off)
{
	size_t whole;
	uint8_t *bounce;
	int err;

	if (!lun->direct_reads)
		return read_all(lun->fd, buf, len, off);
	whole = (len + lun->dio_align - 1) / lun->dio_align * lun->dio_align;
	if (whole == len && !((uintptr_t)buf % lun->dio_mem_align))
		return read_all(lun->dfd, buf, len, off);
	/* a short Data-In ends inside a block, or an unaligned buffer: the
	 * whole sectors into an aligned copy (@off starts a block, a block
	 * is whole sectors, so they are within the LUN) */
	if (posix_memalign((void **)&bounce, 4096, whole))
		return -SYNCGUARD_ERESOURCE;
	err = read_all(lun->dfd, bounce, whole, off);
	if (!err)
		memcpy(buf, bounce, len);
	free(bounce);
	return err;
}

static int punch_aligned(struct syncguard_lun *lun, uint64_t off,
			 uint64_t len)
{
	unsigned int tries = 0;
	int err = 0;

	/* it changes the page cache (zeroes a partial page): core/mix.c */
	if (lun->mix.on)
		syncguard_mix_wait(&lun->mix, off, len);
	/* On a block device this is blkdev_fallocate: zeroes the range and
	 * discards where the device can, so reads return zeroes (LBPRZ). */
	while (syncguard_sys.fallocate(lun->fd, FALLOC_FL_PUNCH_HOLE |
				       FALLOC_FL_KEEP_SIZE, (off_t)off,
				       (off_t)len)) {
		if (!syncguard_retry(errno, &tries)) {
			err = -errno;
			break;
		}
	}
	if (lun->mix.on)
		syncguard_mix_end(&lun->mix, SYNCGUARD_MIX_CACHED, off, len);
	/* new metadata, volatile; after a failure too (part of the range
	 * may be punched) */
	syncguard_mark_dirty(lun);
	return err;
}

/* zeroes written over @len bytes at @off (less than one sector) */
static int zero_bytes(struct syncguard_lun *lun, uint64_t off, uint64_t len)
{
	uint8_t *zero;
	int err;

	if (!len)
		return 0;
	zero = calloc(1, len);
	if (!zero)
		return -SYNCGUARD_ERESOURCE;
	err = syncguard_lun_write(lun, zero, len, off, SYNCGUARD_PERSIST_CACHED);
	free(zero);
	return err;
}

/*
 * A block device deallocates whole logical sectors of its own
 * (blkdev_fallocate refuses anything else with EINVAL), which a LUN with
 * smaller blocks (512 on a 4 KiB-sector device) need not give: the
 * whole sectors inside the range are deallocated, and the blocks at
 * either end that share a sector with blocks outside it are written
 * with zeroes, so the range reads back as zeroes as LBPRZ=1 says (else
 * its UNMAP fails as a MEDIUM ERROR: test_blockdev_unmap_within_sectors).
 */
int syncguard_lun_punch(struct syncguard_lun *lun, uint64_t off, uint64_t len)
{
	uint64_t g = lun->punch_align ? lun->punch_align : 1;
	uint64_t head = (off + g - 1) / g * g, tail = (off + len) / g * g;
	int err;

	if (head >= tail)
		return zero_bytes(lun, off, len);
	err = zero_bytes(lun, off, head - off);
	if (!err)
		err = punch_aligned(lun, head, tail - head);
	if (!err)
		err = zero_bytes(lun, tail, off + len - tail);
	return err;
}
