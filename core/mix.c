/*
 * Page cache and O_DIRECT on one write-back LUN.
 *
 * With bsopts direct=auto a write-back LUN writes plain writes into the
 * page cache (cheap, and a read cache of what was written) and its
 * RWF_DSYNC writes (FUA, or every write while WCE=0) with O_DIRECT: one
 * FUA write to the device instead of a page-cache copy, its writeout and
 * a flush, and through io_uring without a worker thread's hand-off.
 * Measured side by side against RWF_DSYNC through the page cache, 4 KiB
 * write-back FUA writes: 5.0-5.5k against 3.8-4.6k IOPS at QD1, with
 * 43-52 against 105-130 us of tgtd CPU per write, and 25.7-26.8k
 * against 17.6-21.3k at QD32 (docs/performance.md).
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
 * Linux drops and writes back whole folios, and a file's folios can be
 * larger than a page (ext4 and XFS cache data in folios of up to a
 * PMD, 2 MiB on x86-64, naturally aligned; 16 KiB readahead folios
 * and 1 MiB ones after large writes occur): a page-cache
 * write to one page of a folio and an O_DIRECT write to another page of
 * it collide just the same (with 4 KiB claims, a mixed write workload
 * made Linux fail the O_DIRECT write's drop and latch EIO on the file
 * in 6 of 9 runs).  So the unit of a claim is the largest folio, the
 * "granule" below (the PMD size, from transparent_hugepage/
 * hpage_pmd_size; 2 MiB when that is missing).
 *
 * So each write claims the granules it covers for its kind before it
 * starts and releases them when it is done, and a kind waits while the
 * other holds a granule:
 *   - an O_DIRECT write never waits: if a page-cache write holds one of
 *     its granules it takes the page cache (RWF_DSYNC through it, as
 *     a LUN without O_DIRECT writes), which is just as durable;
 *   - a page-cache write on io_uring (tgtd's event thread, which must
 *     not block) that finds an O_DIRECT write on its granules goes to a
 *     worker thread, which claims them and waits there; its claim keeps
 *     new O_DIRECT writes off them, so the wait ends.
 * The O_DIRECT writes a worker waits for may be io_uring's, which only
 * the event thread reaps: so the event thread must never wait for a
 * worker that may be waiting here.  It does so only for WCE changes
 * (write_lock, taken by every worker write): a switch to WCE=1 takes no
 * lock (syncguard_lun_set_wce), and one to WCE=0 from tgtadm first lets
 * the ring finish every command it has (syncguard_uring_quiesce).
 * Without that, toggling WCE with MODE SELECT under load hangs tgtd
 * within a second (test_modes_wce_toggle_under_load).
 * Everything else that touches the page cache (UNMAP's hole punch, the
 * pages of WRITE SAME and COMPARE AND WRITE) claims as a page-cache
 * write.  Reads claim nothing: on a file, an O_DIRECT write drops the
 * pages a read brought in meanwhile once it is done (iomap, for ext4 and
 * XFS, also when asynchronous; synchronous ones, on the worker threads,
 * in the generic path; elsewhere the mix's RWF_DSYNC writes run there:
 * core/lun.c, async_dsync_ok).
 *
 * Not on a block device: there an asynchronous O_DIRECT write (the
 * io_uring path) does not drop the pages after it (block/fops.c only
 * does for a synchronous one), so a page a read cached meanwhile keeps
 * the old data, and a later page-cache write next to it would write that
 * back over the acknowledged write.  A write-back LUN on a block device
 * keeps every write in the page cache
 * (test_blockdev_write_back_page_cache).
 * (Measured on a loop device, a mixed write workload with random reads
 * and every block read back after: without the claims an acknowledged
 * FUA write was lost once in 282,304 writes; with them none was in
 * 1,249,280, but that cannot rule the read case out.)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "internal.h"

/* The largest folio the page cache may use, in bytes: at least a page. */
static unsigned long granule_bytes(void)
{
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
			"r");
	unsigned long pmd = 0;
	long page = sysconf(_SC_PAGESIZE);

	if (f) {
		if (fscanf(f, "%lu", &pmd) != 1)
			pmd = 0;
		fclose(f);
	}
	if (!pmd)
		pmd = 2ul << 20;
	return page > 0 && (unsigned long)page > pmd ? (unsigned long)page : pmd;
}

int syncguard_mix_init(struct syncguard_mix *m, bool on)
{
	unsigned long granule = on ? granule_bytes() : 4096;
	int ret;

	m->on = on;
	m->waiting = 0;
	for (m->granule_shift = 12; (1ul << m->granule_shift) < granule;)
		m->granule_shift++;
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

/* The slots of the granules of [off, off + len): the first, and how
 * many (at most every slot once). */
static unsigned int slots_of(const struct syncguard_mix *m, uint64_t off,
			     uint64_t len, unsigned int *first)
{
	uint64_t p0 = off >> m->granule_shift, n;

	*first = (unsigned int)(p0 % SYNCGUARD_MIX_SLOTS);
	if (!len)
		return 0;
	n = ((off + len - 1) >> m->granule_shift) - p0 + 1;
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
