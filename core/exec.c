/*
 * Executing SBC-3 commands against a LUN.  One small function per
 * command, chosen from a table by the decoded operation; each asks
 * syncguard_policy() what durability it owes and never decides that
 * itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"
#include "command.h"

typedef enum syncguard_reason exec_fn(struct syncguard_lun *lun,
				      const struct syncguard_req *req,
				      const struct syncguard_cdb *c,
				      struct syncguard_result *res);

#define CHUNK_BYTES (1u << 20)	/* bounce buffers: WRITE SAME, VERIFY */

enum syncguard_reason syncguard_check_range(const struct syncguard_lun *lun,
					    uint64_t lba, uint64_t n)
{
	uint64_t cap = capacity(lun);

	if (lba > cap || n > cap - lba || (n == 0 && lba >= cap))
		return SYNCGUARD_ERR_LBA_RANGE;
	return SYNCGUARD_OK;
}

enum syncguard_reason syncguard_check_verify(const struct syncguard_lun *lun,
					     const struct syncguard_cdb *c)
{
	enum syncguard_reason r = syncguard_check_range(lun, c->lba, c->nblocks);

	if (r)
		return r;
	if (c->bytchk == 2 ||
	    (c->bytchk == 3 && c->op == SYNCGUARD_OP_WRITE_VERIFY))
		return SYNCGUARD_ERR_INVALID_CDB;	/* reserved */
	return SYNCGUARD_OK;
}

/* The errno behind the last I/O error of this thread's command. */
static __thread int last_errno;

static enum syncguard_reason io_reason(int neg_errno, bool writing)
{
	last_errno = -neg_errno;
	return syncguard_reason_of_errno(-neg_errno, writing);
}

/* A CHUNK_BYTES buffer, page-aligned so O_DIRECT takes it without a
 * copy (malloc's is 16 bytes off); NULL without memory.  free() it. */
static uint8_t *chunk_alloc(void)
{
	void *p;

	return posix_memalign(&p, 4096, CHUNK_BYTES) ? NULL : p;
}

/* Compare @len bytes of the medium at @off with @expect (@stride bytes,
 * repeated: one block for BYTCHK=3, else @len).  MISCOMPARE carries the
 * byte offset of the first difference (SBC-3 5.3, 5.33). */
static enum syncguard_reason compare_medium(struct syncguard_lun *lun,
					    uint64_t off, const uint8_t *expect,
					    uint64_t len, uint64_t stride,
					    struct syncguard_result *res)
{
	uint8_t *buf = chunk_alloc();
	enum syncguard_reason r = SYNCGUARD_OK;

	if (!buf)
		return io_reason(-SYNCGUARD_ERESOURCE, false);
	for (uint64_t done = 0; done < len && r == SYNCGUARD_OK;) {
		size_t n = len - done < CHUNK_BYTES ? len - done : CHUNK_BYTES;
		int err = syncguard_lun_read(lun, buf, n, off + done);

		if (err) {
			r = io_reason(err, false);
			break;
		}
		for (size_t i = 0; i < n; i++) {
			if (buf[i] != expect[(done + i) % stride]) {
				res->info = done + i;
				res->info_valid = true;
				r = SYNCGUARD_ERR_MISCOMPARE;
				break;
			}
		}
		done += n;
	}
	free(buf);
	return r;
}

static enum syncguard_reason exec_read(struct syncguard_lun *lun,
				       const struct syncguard_req *req,
				       const struct syncguard_cdb *c,
				       struct syncguard_result *res)
{
	struct syncguard_action a = policy_reported(lun, c->fua ?
		SYNCGUARD_CLASS_READ_FUA : SYNCGUARD_CLASS_READ);
	enum syncguard_reason r = syncguard_check_range(lun, c->lba, c->nblocks);
	uint64_t len = to_bytes(lun, c->nblocks);
	int err = 0;

	syncguard_count(&lun->stats->reads);
	if (r)
		return r;
	/* Data-In shorter than the transfer: fill exactly what goes out
	 * (tgt reports the residual); never leave stale buffer bytes */
	if (len > req->in_len)
		len = req->in_len;
	/* the flush's failure is a write's (WRITE ERROR), the read's a read's */
	if (a.flush_before && (err = syncguard_lun_flush(lun, true)) != 0)
		return io_reason(err, true);
	err = syncguard_lun_read(lun, req->in, len, to_bytes(lun, c->lba));
	if (err)
		return io_reason(err, false);
	res->in_done = (uint32_t)len;
	return SYNCGUARD_OK;
}

/* WRITE(6/10/12/16) and WRITE AND VERIFY(10/12/16) */
static enum syncguard_reason exec_write(struct syncguard_lun *lun,
					const struct syncguard_req *req,
					const struct syncguard_cdb *c,
					struct syncguard_result *res)
{
	bool verify = c->op == SYNCGUARD_OP_WRITE_VERIFY;
	bool fua = c->fua || verify;	/* see policy.c on WRITE AND VERIFY */
	struct syncguard_action a;
	enum syncguard_reason r = verify ? syncguard_check_verify(lun, c) :
		syncguard_check_range(lun, c->lba, c->nblocks);
	uint64_t len = to_bytes(lun, c->nblocks), off = to_bytes(lun, c->lba);
	int err;

	syncguard_count(fua ? &lun->stats->fua_writes : &lun->stats->writes);
	if (r)
		return r;
	if (torn_write(lun, len, req->out_len))
		return SYNCGUARD_ERR_INVALID_IU;
	/* Data-Out shorter than the transfer by whole blocks (an iSCSI
	 * residual overflow: EDTL below the CDB's length): write what was
	 * sent, as tgt's rdwr does; tgt reports the residual */
	if (len > req->out_len)
		len = req->out_len;
	pthread_rwlock_rdlock(&lun->write_lock);
	a = policy(lun, fua ? SYNCGUARD_CLASS_WRITE_FUA : SYNCGUARD_CLASS_WRITE);
	err = syncguard_lun_write(lun, req->out, len, off,
				  syncguard_write_persist(lun, a.persist));
	pthread_rwlock_unlock(&lun->write_lock);
	if (err)
		return io_reason(err, true);
	if (verify && c->bytchk)
		return compare_medium(lun, off, req->out, len, len ? len : 1,
				      res);
	return SYNCGUARD_OK;
}

/*
 * The part of SYNCHRONIZE CACHE that needs no I/O: range check, a latched
 * error (reported in every mode: the data it covered may be gone), a
 * mode with nothing volatile, or nothing dirty since the last completed
 * flush.  Returns true with *@r set when that answers the command.
 */
static bool sync_cache_quick(struct syncguard_lun *lun,
			     const struct syncguard_cdb *c,
			     enum syncguard_reason *r)
{
	struct syncguard_action a = policy_reported(lun,
						    SYNCGUARD_CLASS_SYNC_CACHE);
	int err = syncguard_lun_latched(lun);

	*r = syncguard_check_range(lun, c->lba, c->nblocks);
	if (*r)
		return true;
	if (err && syncguard_lun_latched_soft(lun))
		return false;	/* rechecked by the flush, on a worker */
	if (err) {
		*r = io_reason(-err, true);
		return true;
	}
	/* plp's SYNCHRONIZE CACHE flushes nothing, but while a switch to
	 * WCE=0 is pending (the one at open: what the LUN found may still
	 * be volatile) it waits for a flush as the other modes' does
	 * (test_exec_plp_sync_cache_during_switch) */
	if (!a.flush_before && !syncguard_lun_switch_pending(lun))
		return true;
	if (syncguard_lun_clean(lun)) {
		syncguard_count(&lun->stats->flushes_elided);
		return true;
	}
	return false;
}

/* What SYNCHRONIZE CACHE of @c's range answers: sync_cache_quick, else
 * after the core's group flush. */
static enum syncguard_reason sync_cache(struct syncguard_lun *lun,
					const struct syncguard_cdb *c)
{
	enum syncguard_reason r;
	int err;

	if (sync_cache_quick(lun, c, &r))
		return r;
	err = syncguard_lun_flush(lun, true);
	return err ? io_reason(err, true) : SYNCGUARD_OK;
}

static enum syncguard_reason exec_sync_cache(struct syncguard_lun *lun,
					     const struct syncguard_req *req,
					     const struct syncguard_cdb *c,
					     struct syncguard_result *res)
{
	(void)req;
	(void)res;
	syncguard_count(&lun->stats->sync_caches);
	return sync_cache(lun, c);
}

bool syncguard_start_stop_flushes(const struct syncguard_cdb *c)
{
	enum { START_VALID = 0x0, STANDBY = 0x3, FORCE_STANDBY_0 = 0xb };

	return c->op == SYNCGUARD_OP_START_STOP && !c->no_flush &&
	       ((c->power_condition == START_VALID && !c->start) ||
		c->power_condition == STANDBY ||
		c->power_condition == FORCE_STANDBY_0);
}

/* START STOP UNIT (SBC-3 5.25) that stops access to the medium: every
 * cached block written first, as SYNCHRONIZE CACHE of the whole medium
 * (glue/cmdtable.c sends only those here; tgt answers the others).  An
 * initiator that stops a unit without a SYNCHRONIZE CACHE before it
 * counts on this; answered GOOD without it, the write-back LUN's cache
 * would be lost at a power cut after (test_exec_start_stop_flushes). */
static enum syncguard_reason exec_start_stop(struct syncguard_lun *lun,
					     const struct syncguard_req *req,
					     const struct syncguard_cdb *c,
					     struct syncguard_result *res)
{
	(void)req;
	(void)res;
	return syncguard_start_stop_flushes(c) ? sync_cache(lun, c) :
						 SYNCGUARD_OK;
}

bool syncguard_sync_cache_now(struct syncguard_lun *lun, const uint8_t *cdb,
			      size_t len, enum syncguard_reason *reason)
{
	struct syncguard_cdb c;

	if (syncguard_cdb_decode(cdb, len, &c) || c.op != SYNCGUARD_OP_SYNC_CACHE)
		return false;
	if (!sync_cache_quick(lun, &c, reason))
		return false;	/* counted by whoever runs the flush */
	syncguard_count(&lun->stats->sync_caches);
	if (*reason != SYNCGUARD_OK)
		syncguard_count(&lun->stats->errors);
	return true;
}

static enum syncguard_reason exec_verify(struct syncguard_lun *lun,
					 const struct syncguard_req *req,
					 const struct syncguard_cdb *c,
					 struct syncguard_result *res)
{
	enum syncguard_reason r = syncguard_check_verify(lun, c);
	uint64_t len = to_bytes(lun, c->nblocks);
	uint64_t stride = c->bytchk == 3 ? to_bytes(lun, 1) : len;

	if (r || c->bytchk == 0 || len == 0)
		return r;
	if (req->out_len < stride)
		return SYNCGUARD_ERR_PARAM_LEN;
	return compare_medium(lun, to_bytes(lun, c->lba), req->out, len,
			      stride, res);
}

/* Fill @buf (@n blocks) with copies of the WRITE SAME block for LBAs
 * starting at @lba; LBDATA puts each LBA's low 32 bits first (SBC-3). */
static void fill_same(const struct syncguard_lun *lun, uint8_t *buf,
		      const uint8_t *block, uint64_t n, uint64_t lba,
		      bool lbdata)
{
	size_t bs = (size_t)to_bytes(lun, 1);

	for (uint64_t i = 0; i < n; i++) {
		uint8_t *b = buf + i * bs;
		uint32_t l = (uint32_t)(lba + i);

		memcpy(b, block, bs);
		if (lbdata) {
			b[0] = l >> 24;
			b[1] = l >> 16;
			b[2] = l >> 8;
			b[3] = l;
		}
	}
}

static enum syncguard_reason write_same_data(struct syncguard_lun *lun,
					     const uint8_t *block,
					     const struct syncguard_cdb *c,
					     uint64_t nblocks)
{
	uint64_t per = CHUNK_BYTES >> lun->block_shift;
	uint8_t *buf = chunk_alloc();
	enum syncguard_persist each;
	struct syncguard_action a;
	int err = 0;

	if (!buf)
		return io_reason(-SYNCGUARD_ERESOURCE, true);
	if (per > nblocks)
		per = nblocks;
	fill_same(lun, buf, block, per, c->lba, c->lbdata);
	pthread_rwlock_rdlock(&lun->write_lock);
	a = policy(lun, SYNCGUARD_CLASS_WRITE);
	/* plp: each chunk written to the device as it goes (its write-out's
	 * descriptor taken before its data, core/lun.c writeout); durable:
	 * cached chunks, then one flush for all */
	each = a.persist == SYNCGUARD_PERSIST_WRITTEN ? a.persist :
	       SYNCGUARD_PERSIST_CACHED;
	for (uint64_t done = 0; !err && done < nblocks; done += per) {
		uint64_t n = nblocks - done < per ? nblocks - done : per;

		if (c->lbdata)
			fill_same(lun, buf, block, n, c->lba + done, true);
		err = syncguard_lun_write(lun, buf, to_bytes(lun, n),
					  to_bytes(lun, c->lba + done), each);
	}
	if (!err && each == SYNCGUARD_PERSIST_CACHED)
		err = syncguard_lun_persist(lun, a.persist);
	pthread_rwlock_unlock(&lun->write_lock);
	free(buf);
	return err ? io_reason(err, true) : SYNCGUARD_OK;
}

static uint64_t be(const uint8_t *p, int bytes)
{
	uint64_t v = 0;

	while (bytes--)
		v = v << 8 | *p++;
	return v;
}

/* UNMAP block descriptor i (SBC-3 5.28.2): LBA, then number of blocks */
#define DESC_LBA(d, i) be((d) + 16 * (i), 8)
#define DESC_LEN(d, i) be((d) + 16 * (i) + 8, 4)

/* Deallocate @n validated ranges, @lba[i] for @len[i] blocks (or the
 * @n block descriptors at @desc when @lba is NULL), then persist the new
 * allocation as the UNMAP policy says. */
static enum syncguard_reason unmap_ranges(struct syncguard_lun *lun,
					  const uint64_t *lba,
					  const uint64_t *len,
					  const uint8_t *desc, uint64_t n)
{
	struct syncguard_action a;
	int err = 0;

	pthread_rwlock_rdlock(&lun->write_lock);
	a = policy(lun, SYNCGUARD_CLASS_UNMAP);
	for (uint64_t i = 0; !err && i < n; i++) {
		uint64_t at = lba ? lba[i] : DESC_LBA(desc, i);
		uint64_t count = lba ? len[i] : DESC_LEN(desc, i);

		if (count)
			err = syncguard_lun_punch(lun, to_bytes(lun, at),
						  to_bytes(lun, count));
	}
	if (!err)
		err = syncguard_lun_persist(lun, a.persist);
	pthread_rwlock_unlock(&lun->write_lock);
	return err ? io_reason(err, true) : SYNCGUARD_OK;
}

static bool all_zero(const uint8_t *p, uint64_t len)
{
	while (len--)
		if (*p++)
			return false;
	return true;
}

static enum syncguard_reason exec_write_same(struct syncguard_lun *lun,
					     const struct syncguard_req *req,
					     const struct syncguard_cdb *c,
					     struct syncguard_result *res)
{
	uint64_t n = c->nblocks;
	enum syncguard_reason r;
	uint8_t *zero;

	(void)res;
	if ((c->unmap && !lun->thin) || c->pbdata || (c->ndob && c->lbdata))
		return SYNCGUARD_ERR_INVALID_CDB;
	/* with UNMAP the block is not needed (tgt accepts none); with NDOB
	 * (SBC-4) there is none and the blocks read back as zeroes */
	if (!c->unmap && !c->ndob && req->out_len < to_bytes(lun, 1))
		return SYNCGUARD_ERR_PARAM_LEN;
	if (n == 0 && c->lba < capacity(lun))	/* 0: to the end (SBC-3) */
		n = capacity(lun) - c->lba;
	r = syncguard_check_range(lun, c->lba, n);
	if (r)
		return r;
	/* SBC-4 (WRITE SAME and unmap operations): with UNMAP the blocks
	 * must read as if the block had been written, and an unmapped block
	 * reads as zeroes (LBPRZ=1), so only a block of zeroes (or none:
	 * NDOB, or tgt's none) is unmapped; any other is written (else it
	 * would be unmapped, answered GOOD, and read back as zeroes:
	 * test_exec_write_same_unmap_data) */
	if (c->unmap && (c->ndob || req->out_len < to_bytes(lun, 1) ||
			 (!c->lbdata && all_zero(req->out, to_bytes(lun, 1)))))
		return unmap_ranges(lun, &c->lba, &n, NULL, 1);
	if (!c->ndob)
		return write_same_data(lun, req->out, c, n);
	zero = calloc(1, to_bytes(lun, 1));
	if (!zero)
		return io_reason(-SYNCGUARD_ERESOURCE, true);
	r = write_same_data(lun, zero, c, n);
	free(zero);
	return r;
}

/* UNMAP (SBC-3 5.28): 8-byte parameter list header, then descriptors */
static enum syncguard_reason exec_unmap(struct syncguard_lun *lun,
					const struct syncguard_req *req,
					const struct syncguard_cdb *c,
					struct syncguard_result *res)
{
	const uint8_t *desc = req->out + 8;
	enum syncguard_reason r = SYNCGUARD_OK;
	/* the PARAMETER LIST LENGTH, within what arrived (a descriptor
	 * past it is not unmapped: test_exec_unmap_parameter_list_length) */
	uint64_t plen = be(req->cdb + 7, 2), n;

	(void)res;
	(void)c;
	if (!lun->thin)
		return SYNCGUARD_ERR_INVALID_OPCODE;
	if (req->cdb[1] & 0x01)		/* ANCHOR: not supported */
		return SYNCGUARD_ERR_INVALID_CDB;
	if (plen > req->out_len)
		plen = req->out_len;
	if (plen == 0)
		return SYNCGUARD_OK;
	if (plen < 8)
		return SYNCGUARD_ERR_PARAM_LEN;
	n = be(req->out + 2, 2) / 16;
	if (n > (plen - 8) / 16)
		n = (plen - 8) / 16;
	for (uint64_t i = 0; i < n && !r; i++) {	/* validate all first */
		uint64_t lba = DESC_LBA(desc, i), len = DESC_LEN(desc, i);

		/* SBC-3 5.28: only LBA + blocks beyond the capacity is out
		 * of range; 0 blocks at the capacity itself is not */
		if (lba > capacity(lun) || len > capacity(lun) - lba)
			r = SYNCGUARD_ERR_LBA_RANGE;
	}
	return r || !n ? r : unmap_ranges(lun, NULL, NULL, desc, n);
}

/*
 * A write that reads the medium first (COMPARE AND WRITE, ORWRITE) is
 * atomic against every other write of the LUN (SBC-3 5.3, 5.12): the
 * workers' writes take write_lock; an asynchronous engine's
 * (syncguard_plan) go to the workers from the moment exclusive_running is
 * set, and the ones it already planned are waited for (Dekker style with
 * plan_write: either the plan sees exclusive_running or this sees its
 * reference).  They need no worker to finish, so the wait ends.
 */
static void exclusive_begin(struct syncguard_lun *lun)
{
	__atomic_fetch_add(&lun->exclusive_running, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&lun->async_writes, __ATOMIC_SEQ_CST))
		usleep(50);
	pthread_rwlock_wrlock(&lun->write_lock);
}

static void exclusive_end(struct syncguard_lun *lun)
{
	pthread_rwlock_unlock(&lun->write_lock);
	__atomic_fetch_sub(&lun->exclusive_running, 1, __ATOMIC_SEQ_CST);
}

static enum syncguard_reason exec_compare_and_write(
	struct syncguard_lun *lun, const struct syncguard_req *req,
	const struct syncguard_cdb *c, struct syncguard_result *res)
{
	enum syncguard_reason r = syncguard_check_range(lun, c->lba, c->nblocks);
	uint64_t len = to_bytes(lun, c->nblocks), off = to_bytes(lun, c->lba);
	struct syncguard_action a;
	int err;

	/* a write, as exec_write counts them */
	syncguard_count(c->fua ? &lun->stats->fua_writes : &lun->stats->writes);
	if (r || (len == 0 && req->out_len == 0))
		return r;	/* 0 blocks: nothing to do (SBC-3 5.3) */
	/* SBC-3 5.3: beyond MAXIMUM COMPARE AND WRITE LENGTH, or Data-Out
	 * other than the compare and the write blocks */
	if ((lun->max_caw_blocks && c->nblocks > lun->max_caw_blocks) ||
	    req->out_len != 2 * len)
		return SYNCGUARD_ERR_INVALID_CDB;
	exclusive_begin(lun);
	a = policy(lun, c->fua ? SYNCGUARD_CLASS_WRITE_FUA :
		   SYNCGUARD_CLASS_WRITE);
	r = compare_medium(lun, off, req->out, len, len, res);
	if (r == SYNCGUARD_OK) {
		err = syncguard_lun_write(lun, req->out + len, len, off,
					  a.persist);
		r = err ? io_reason(err, true) : SYNCGUARD_OK;
	}
	exclusive_end(lun);
	return r;
}

/*
 * ORWRITE(16) (SBC-3 5.12): each block written is the OR of what the
 * medium holds and what the initiator sent, read and written as one
 * step against every other write; FUA as for WRITE (the policy's
 * WRITE_FUA class), DPO a hint.  Its own writes follow the mode
 * contract as every write does.
 */
static enum syncguard_reason exec_orwrite(struct syncguard_lun *lun,
					  const struct syncguard_req *req,
					  const struct syncguard_cdb *c,
					  struct syncguard_result *res)
{
	enum syncguard_reason r = syncguard_check_range(lun, c->lba, c->nblocks);
	uint64_t len = to_bytes(lun, c->nblocks), off = to_bytes(lun, c->lba);
	struct syncguard_action a;
	uint8_t *buf;
	int err;

	(void)res;
	syncguard_count(c->fua ? &lun->stats->fua_writes : &lun->stats->writes);
	if (r || len == 0)
		return r;
	if (torn_write(lun, len, req->out_len))
		return SYNCGUARD_ERR_INVALID_IU;
	if (len > req->out_len)		/* whole blocks, as exec_write */
		len = req->out_len;
	if (posix_memalign((void **)&buf, 4096, len))
		return io_reason(-SYNCGUARD_ERESOURCE, true);
	exclusive_begin(lun);
	a = policy(lun, c->fua ? SYNCGUARD_CLASS_WRITE_FUA :
		   SYNCGUARD_CLASS_WRITE);
	err = syncguard_lun_read(lun, buf, len, off);
	if (err) {
		r = io_reason(err, false);
	} else {
		for (uint64_t i = 0; i < len; i++)
			buf[i] |= req->out[i];
		err = syncguard_lun_write(lun, buf, len, off,
				syncguard_write_persist(lun, a.persist));
		r = err ? io_reason(err, true) : SYNCGUARD_OK;
	}
	exclusive_end(lun);
	free(buf);
	return r;
}

static enum syncguard_reason exec_pre_fetch(struct syncguard_lun *lun,
					    const struct syncguard_req *req,
					    const struct syncguard_cdb *c,
					    struct syncguard_result *res)
{
	enum syncguard_reason r = syncguard_check_range(lun, c->lba, c->nblocks);

	(void)req;
	(void)res;
	/* A hint: its failure is no error.  Not where reads go O_DIRECT (a
	 * block device, or io_uring's writes elsewhere than on ext4 and XFS:
	 * syncguard_lun_writes_async): nothing of ours would read those
	 * pages, and pages cached while an io_uring O_DIRECT write is in
	 * flight keep old data for other readers of the device. */
	if (!r && !lun->direct_reads)
		(void)posix_fadvise(lun->fd, (off_t)to_bytes(lun, c->lba),
				    (off_t)to_bytes(lun, c->nblocks),
				    POSIX_FADV_WILLNEED);
	return r;
}

static exec_fn *const handlers[SYNCGUARD_OP_COUNT] = {
	[SYNCGUARD_OP_READ] = exec_read,
	[SYNCGUARD_OP_WRITE] = exec_write,
	[SYNCGUARD_OP_WRITE_VERIFY] = exec_write,
	[SYNCGUARD_OP_VERIFY] = exec_verify,
	[SYNCGUARD_OP_SYNC_CACHE] = exec_sync_cache,
	[SYNCGUARD_OP_WRITE_SAME] = exec_write_same,
	[SYNCGUARD_OP_UNMAP] = exec_unmap,
	[SYNCGUARD_OP_COMPARE_AND_WRITE] = exec_compare_and_write,
	[SYNCGUARD_OP_ORWRITE] = exec_orwrite,
	[SYNCGUARD_OP_PRE_FETCH] = exec_pre_fetch,
	[SYNCGUARD_OP_START_STOP] = exec_start_stop,
};

void syncguard_execute(struct syncguard_lun *lun,
		       const struct syncguard_req *req,
		       struct syncguard_result *res)
{
	struct syncguard_cdb c;
	int ret = syncguard_cdb_decode(req->cdb, req->cdb_len, &c);

	memset(res, 0, sizeof(*res));
	last_errno = 0;
	if (ret == -ENOTSUP || (!ret && !handlers[c.op]))
		res->reason = SYNCGUARD_ERR_INVALID_OPCODE;
	else if (ret)
		res->reason = SYNCGUARD_ERR_INVALID_CDB;
	else
		res->reason = handlers[c.op](lun, req, &c, res);
	if (res->reason != SYNCGUARD_OK) {
		syncguard_count(&lun->stats->errors);
		res->err = last_errno;
	}
}
