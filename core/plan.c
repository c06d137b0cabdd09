/*
 * What an asynchronous engine (the io_uring engine) may run of a command
 * itself: one plain read or write whose durability it can carry
 * (syncguard_plan), and what its completion means (syncguard_plan_done).
 * Everything else runs on a worker through core/exec.c.
 *
 * Layer: above exec.c, whose command checks it reuses (and shares
 * core/command.h with); it uses io.c, writesync.c, flush.c, mix.c and
 * latch.c.
 */
#include <errno.h>
#include <string.h>

#include "core.h"
#include "internal.h"
#include "command.h"

static bool plan_read(struct syncguard_lun *lun, const struct syncguard_cdb *c,
		      struct syncguard_plan *p)
{
	/* a FUA read waits for a flush unless nothing is dirty */
	if (c->fua && policy_reported(lun, SYNCGUARD_CLASS_READ_FUA).flush_before &&
	    !syncguard_lun_clean(lun))
		return false;
	/* O_DIRECT where the LUN reads so (core/lun.c), whole sectors only:
	 * a short Data-In goes to a worker, which reads through a copy */
	p->direct = lun->direct_reads;
	if (p->direct && p->len % lun->dio_align)
		return false;
	syncguard_count(&lun->stats->reads);
	return true;
}

/* Claim @p's granules in lun->mix for a write of @kind (core/mix.c); true
 * when it holds them, until drop_refs or syncguard_plan_written. */
static bool claim(struct syncguard_lun *lun, struct syncguard_plan *p,
		  enum syncguard_mix_kind kind)
{
	if (!syncguard_mix_try(&lun->mix, kind, p->off, p->len))
		return false;
	p->mix = kind;
	return true;
}

/* Release what claim() took, once. */
static void unclaim(struct syncguard_lun *lun, struct syncguard_plan *p)
{
	syncguard_mix_end(&lun->mix, p->mix, p->off, p->len);
	p->mix = SYNCGUARD_MIX_NONE;
}

/*
 * WCE is read with a reference on async_cached already held (Dekker
 * style, both sides sequentially consistent): either this command sees
 * a switch to WCE=0, or the switch sees the reference and waits for the
 * cached write to land before it flushes (syncguard_lun_set_wce).
 */
static bool plan_write(struct syncguard_lun *lun,
		       const struct syncguard_cdb *c, struct syncguard_plan *p)
{
	/* COMPARE AND WRITE and ORWRITE run alone (exclusive_begin) */
	__atomic_fetch_add(&lun->async_writes, 1, __ATOMIC_SEQ_CST);
	p->write_ref = true;
	if (__atomic_load_n(&lun->exclusive_running, __ATOMIC_SEQ_CST))
		return false;	/* syncguard_plan drops the ref */
	__atomic_fetch_add(&lun->async_cached, 1, __ATOMIC_SEQ_CST);
	p->persist = syncguard_write_persist(lun, policy(lun, c->fua ?
			SYNCGUARD_CLASS_WRITE_FUA : SYNCGUARD_CLASS_WRITE).persist);
	p->cached_ref = p->persist == SYNCGUARD_PERSIST_CACHED;
	if (!p->cached_ref)
		__atomic_fetch_sub(&lun->async_cached, 1, __ATOMIC_SEQ_CST);
	p->write = true;
	p->direct = syncguard_direct_ok(lun, p->off, p->len, false);
	/* A writeout or an error, on a worker.  So is a buffered RWF_DSYNC
	 * write: io_uring runs buffered writes that block one file at a
	 * time in its io-wq, so 32 FUA writes in flight became one
	 * (measured: 4.9k against 14.1k IOPS on worker threads, 4 KiB,
	 * QD32).  An O_DIRECT one does not block and stays here, where the
	 * file system honours it asynchronously (see core/lun.c). */
	if ((p->persist == SYNCGUARD_PERSIST_WRITTEN && !p->direct) ||
	    (p->persist != SYNCGUARD_PERSIST_CACHED &&
	     syncguard_lun_latched(lun)))
		return false;
	if (p->persist == SYNCGUARD_PERSIST_DURABLE) {
		syncguard_durable_begin(lun);
		p->durable_ref = true;
		p->dsync = syncguard_use_dsync(lun, &p->scored);
		if (p->dsync && !p->direct && lun->async_dsync_ok &&
		    syncguard_direct_ok(lun, p->off, p->len, true))
			p->direct = claim(lun, p, SYNCGUARD_MIX_DIRECT);
		if (p->dsync && !(p->direct && lun->async_dsync_ok))
			return false;	/* syncguard_plan drops the refs */
	}
	/* a page-cache write next to an O_DIRECT one waits on a worker */
	if (lun->mix.on && !p->direct && !claim(lun, p, SYNCGUARD_MIX_CACHED))
		return false;
	p->fua = c->fua;
	syncguard_count(c->fua ? &lun->stats->fua_writes : &lun->stats->writes);
	return true;
}

/* Let a switch to WCE=0 (see plan_write) and a COMPARE AND WRITE go
 * on, once per plan: the write is in the page cache or the device. */
static void drop_write_refs(struct syncguard_lun *lun,
			    struct syncguard_plan *plan)
{
	if (plan->cached_ref) {
		__atomic_fetch_sub(&lun->async_cached, 1, __ATOMIC_SEQ_CST);
		plan->cached_ref = false;
	}
	if (plan->write_ref) {
		__atomic_fetch_sub(&lun->async_writes, 1, __ATOMIC_SEQ_CST);
		plan->write_ref = false;
	}
}

/* Uncount a durable write in flight (see syncguard_use_dsync) once it is
 * answered, cancelled or sent to a worker: once per plan. */
static void drop_refs(struct syncguard_lun *lun, struct syncguard_plan *plan)
{
	drop_write_refs(lun, plan);
	unclaim(lun, plan);
	if (plan->durable_ref) {
		syncguard_durable_end(lun);
		plan->durable_ref = false;
	}
}

void syncguard_plan_cancel(struct syncguard_lun *lun,
			   struct syncguard_plan *plan)
{
	uint64_t *counter = !plan->write ? &lun->stats->reads :
			    plan->fua ? &lun->stats->fua_writes :
			    &lun->stats->writes;

	drop_refs(lun, plan);
	__atomic_fetch_sub(counter, 1, __ATOMIC_RELAXED);
}

bool syncguard_plan(struct syncguard_lun *lun, const struct syncguard_req *req,
		    struct syncguard_plan *plan)
{
	struct syncguard_cdb c;
	uint64_t bytes, sent;
	bool ok;

	memset(plan, 0, sizeof(*plan));
	if (syncguard_cdb_decode(req->cdb, req->cdb_len, &c) ||
	    (c.op != SYNCGUARD_OP_READ && c.op != SYNCGUARD_OP_WRITE) ||
	    syncguard_check_range(lun, c.lba, c.nblocks))
		return false;
	plan->off = to_bytes(lun, c.lba);
	/* what the CDB asks for, but no more than the initiator sent (a
	 * write) or has room for (a read) */
	bytes = to_bytes(lun, c.nblocks);
	sent = c.op == SYNCGUARD_OP_READ ? req->in_len : req->out_len;
	plan->len = (uint32_t)(bytes < sent ? bytes : sent);
	if (c.op == SYNCGUARD_OP_WRITE && torn_write(lun, bytes, sent))
		return false;	/* exec_write refuses it */
	ok = c.op == SYNCGUARD_OP_READ ? plan_read(lun, &c, plan) :
	     plan_write(lun, &c, plan);
	if (!ok)
		drop_refs(lun, plan);
	return ok;
}

void syncguard_plan_written(struct syncguard_lun *lun,
			    struct syncguard_plan *plan)
{
	if (plan->written)
		return;
	plan->written = true;
	/* in the page cache now, or (O_DIRECT without RWF_DSYNC) in the
	 * device's cache; plp's device cache is not volatile */
	if (plan->write && !plan->dsync &&
	    !(plan->direct && plan->persist == SYNCGUARD_PERSIST_WRITTEN))
		syncguard_mark_dirty(lun);
	drop_write_refs(lun, plan);
	unclaim(lun, plan);	/* done with the page cache or the device */
}

enum syncguard_reason syncguard_plan_done(struct syncguard_lun *lun,
					  struct syncguard_plan *plan, int err)
{
	enum syncguard_reason r = SYNCGUARD_OK;

	if (!err)
		syncguard_plan_written(lun, plan);
	else if (plan->write)	/* it may have reached a cache in part: a
				 * flush too many is the only cost */
		syncguard_mark_dirty(lun);
	drop_refs(lun, plan);
	/* an RWF_DSYNC write's failure latches as the policy says; a
	 * group flush's has latched where it ran (syncguard_flush_done); a
	 * plain write's does not */
	if (err && plan->dsync)
		syncguard_call_failed(lun, SYNCGUARD_CALL_DSYNC_WRITE, -err);
	if (err) {
		r = syncguard_reason_of_errno(-err, plan->write);
		syncguard_count(&lun->stats->errors);
	}
	return r;
}
