/*
 * Page cache and O_DIRECT on one write-back LUN.
 *
 * With bsopts direct=auto a write-back LUN writes plain writes into the
 * page cache (cheap, and a read cache of what was written) and its
 * RWF_DSYNC writes (FUA, or every write while WCE=0) with O_DIRECT: one
 * FUA write to the device instead of a page-cache copy, its writeout and
 * a flush, and through io_uring without a worker thread's hand-off.
 * Measured side by side on this disk, 4 KiB write-back FUA writes, three
 * rounds each: 5.3k against 6.6k IOPS at QD1, 24.0k against 31.8k at
 * QD32, with half the tgtd CPU time per write.
 *
 * Linux lets one file be written both ways, but not at the same time on
 * the same page.  An O_DIRECT write first writes back and drops the
 * cached pages it covers, writes, and drops them again (a read may have
 * brought the old data back meanwhile).  If a page-cache write dirties
 * one of those pages while the O_DIRECT write runs, the second drop
 * fails: the page keeps the old data of the O_DIRECT write's blocks,
 * and its writeback would later put them over a write acknowledged as
 * durable.  Linux then marks the file with EIO ("Page cache invalidation
 * failure on direct I/O") and the next flush fails.  Pages are wider
 * than blocks (eight 512-byte blocks in a 4 KiB page), so this needs no
 * overlapping writes from the initiator, only neighbours.
 *
 * So each write claims the pages it covers for its kind before it
 * starts and releases them when it is done, and a kind waits while the
 * other holds a page:
 *   - an O_DIRECT write never waits: if a page-cache write holds one of
 *     its pages it takes the page cache (RWF_DSYNC through it, as before
 *     this existed), which is just as durable;
 *   - a page-cache write on io_uring (tgtd's event thread, which must
 *     not block) that finds an O_DIRECT write on its pages goes to a
 *     worker thread, which claims the pages and waits there; its claim
 *     keeps new O_DIRECT writes off them, so the wait ends.
 * Everything else that touches the page cache (UNMAP's hole punch, the
 * pages of WRITE SAME and COMPARE AND WRITE) claims as a page-cache
 * write.  Reads claim nothing: on a file, an O_DIRECT write drops the
 * pages a read brought in meanwhile once it is done (iomap, for ext4 and
 * XFS, also when asynchronous; synchronous ones, which FUSE gets on the
 * worker threads, in the generic path).
 *
 * Not on a block device: there an asynchronous O_DIRECT write (the
 * io_uring path) does not drop the pages after it (block/fops.c only
 * does for a synchronous one), so a page a read cached meanwhile keeps
 * the old data, and a later page-cache write next to it would write that
 * back over the acknowledged write.  A write-back LUN on a block device
 * keeps every write in the page cache, as before this existed.
 * (Measured on a loop device, a mixed write workload with random reads
 * and every block read back after: without the claims an acknowledged
 * FUA write was lost once in 282,304 writes; with them none was in
 * 1,249,280, but that cannot rule the read case out.)
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "internal.h"

int syncguard_mix_init(struct syncguard_mix *m, bool on)
{
	long page = sysconf(_SC_PAGESIZE);
	int ret;

	m->on = on;
	m->waiting = 0;
	for (m->page_shift = 12; page > 0 && (1L << m->page_shift) < page;)
		m->page_shift++;
	ret = pthread_mutex_init(&m->lock, NULL);
	if (ret)
		return -ret;
	ret = pthread_cond_init(&m->drained, NULL);
	if (ret) {
		pthread_mutex_destroy(&m->lock);
		return -ret;
	}
	return 0;
}

void syncguard_mix_destroy(struct syncguard_mix *m)
{
	pthread_cond_destroy(&m->drained);
	pthread_mutex_destroy(&m->lock);
}

/* The slots of the pages of [off, off + len): the first, and how many
 * (at most every slot once). */
static unsigned int slots_of(const struct syncguard_mix *m, uint64_t off,
			     uint64_t len, unsigned int *first)
{
	uint64_t p0 = off >> m->page_shift, n;

	*first = (unsigned int)(p0 % SYNCGUARD_MIX_SLOTS);
	if (!len)
		return 0;
	n = ((off + len - 1) >> m->page_shift) - p0 + 1;
	return n < SYNCGUARD_MIX_SLOTS ? (unsigned int)n : SYNCGUARD_MIX_SLOTS;
}

/* Does any slot of the range hold a write in @count?  Under m->lock. */
static bool held(const uint32_t *count, unsigned int first, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (count[(first + i) % SYNCGUARD_MIX_SLOTS])
			return true;
	return false;
}

/* Add @delta to the range's slots in @count.  Under m->lock. */
static void add(uint32_t *count, unsigned int first, unsigned int n, int delta)
{
	for (unsigned int i = 0; i < n; i++)
		count[(first + i) % SYNCGUARD_MIX_SLOTS] += (uint32_t)delta;
}

bool syncguard_mix_try(struct syncguard_mix *m, enum syncguard_mix_kind kind,
		       uint64_t off, uint64_t len)
{
	bool direct = kind == SYNCGUARD_MIX_DIRECT;
	unsigned int first, n = slots_of(m, off, len, &first);
	bool ok;

	pthread_mutex_lock(&m->lock);
	ok = !held(direct ? m->cached : m->direct, first, n);
	if (ok)
		add(direct ? m->direct : m->cached, first, n, 1);
	pthread_mutex_unlock(&m->lock);
	return ok;
}

void syncguard_mix_wait(struct syncguard_mix *m, uint64_t off, uint64_t len)
{
	unsigned int first, n = slots_of(m, off, len, &first);

	pthread_mutex_lock(&m->lock);
	add(m->cached, first, n, 1);
	m->waiting++;
	while (held(m->direct, first, n))
		pthread_cond_wait(&m->drained, &m->lock);
	m->waiting--;
	pthread_mutex_unlock(&m->lock);
}

void syncguard_mix_end(struct syncguard_mix *m, enum syncguard_mix_kind kind,
		       uint64_t off, uint64_t len)
{
	unsigned int first, n = slots_of(m, off, len, &first);

	if (kind == SYNCGUARD_MIX_NONE)
		return;
	pthread_mutex_lock(&m->lock);
	add(kind == SYNCGUARD_MIX_DIRECT ? m->direct : m->cached, first, n, -1);
	if (kind == SYNCGUARD_MIX_DIRECT && m->waiting)
		pthread_cond_broadcast(&m->drained);
	pthread_mutex_unlock(&m->lock);
}
