/*
 * The io_uring engine: plain READs and WRITEs, and the group flushes they
 * and SYNCHRONIZE CACHE need, submitted from tgtd's event thread and
 * completed there when io_uring says so -- no hand-off to a worker
 * thread and back, which on a small machine costs as much as the I/O.
 * (Measured: tgt's aio store, O_DIRECT through libaio from the event
 * thread, did 39.9k 4 KiB FUA writes/s at QD32 where syncguard's plp
 * mode, the same O_DIRECT writes through the worker threads, did 18.6k.)
 *
 * What a command needs is planned by the core (syncguard_plan); anything
 * that is not one plain read or write -- WRITE AND VERIFY, WRITE SAME,
 * UNMAP, COMPARE AND WRITE, a FUA read with dirty data, a plp write
 * O_DIRECT cannot take, an error to report -- still runs on tgt's
 * worker threads through core/exec.c.  Both paths share the LUN's
 * counters, dirty tracking and latch.
 *
 * Group commit, event-driven: a command whose data must be durable joins
 * the waiters of the next device flush (IORING_OP_FSYNC, DATASYNC).  Only
 * one runs at a time, on a descriptor of its own (Linux reports a
 * writeback error once per open file description); the commands that
 * joined while it ran are all answered by the single next one.
 *
 * One ring serves every LUN of the tgtd: each io_uring_enter that carries
 * O_DIRECT writes notifies the device (a virtio kick traps to the
 * hypervisor), and LUNs that each held their own few writes made several
 * enters where one would do.  A completion's user_data names its LUN
 * (struct syncguard_ring_tag); the group flush, its descriptor and its
 * waiters stay the LUN's own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <liburing.h>

#include "glue.h"
#include "internal.h"	/* the engines share the core's primitives */

#define RING_ENTRIES 256

/* liburing before 2.2 (the kernel's values; Debian 12 has 2.3) */
#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN	(1U << 8)
#endif
#ifndef IORING_SETUP_TASKRUN_FLAG
#define IORING_SETUP_TASKRUN_FLAG	(1U << 9)
#endif

/* One command in flight in the engine. */
struct uring_op {
	struct syncguard_ring_tag tag;	/* first: the CQE's user_data */
	struct scsi_cmd *cmd;
	struct syncguard_plan plan;
	enum syncguard_reason reason;	/* for defer() */
	int err;			/* errno behind it, for the log */
	uint32_t done;		/* bytes transferred so far */
	unsigned int tries;	/* EINTR/EAGAIN so far (syncguard_retry) */
	int fd;			/* the descriptor the I/O goes to */
	bool own_fd;		/* fd is from the O_DIRECT pool (dsync) */
	bool scored;		/* a durable write: write_sync=auto's trial
				 * counts it when answered GOOD */
	uint8_t *bounce;	/* aligned copy for O_DIRECT, or NULL */
	struct uring_op *next;	/* flush waiters, or the ready list */
};

/* The ring every attached LUN (uring.flush_on) shares; tgtd's event
 * thread only.  It runs while the list of LUNs is not empty. */
static struct {
	struct io_uring ring;
	struct syncguard_bs *luns;	/* them, linked by uring.next */
	unsigned int ops;		/* commands in the ring, every LUN's */
	struct uring_op *ready;		/* answers deferred to the event loop */
	struct syncguard_bs *quiescing;	/* only its answers go out now */
	bool flush_stalled;		/* a flush found no SQE: retry */
	/* submission batching (rules: core/flush.c): reads and writes
	 * prepared and not yet submitted, and how many of them the last
	 * pass of tgtd's loop saw; how many held are O_DIRECT; O_DIRECT
	 * ones prepared and not yet completed; since when the first held
	 * waits (us, syncguard_now_us); and the event that ends the wait
	 * (tgt's scheduled events run before every epoll_wait) */
	unsigned int held, held_seen, held_direct, io_inflight;
	unsigned int quiet;	/* passes in a row that brought no new read or
				 * write, while some are held; 0 at each
				 * submission */
	struct syncguard_bs *held_luns;	/* whose I/O is held, linked by
					 * uring.held_next */
	uint64_t held_since_us;
	unsigned int submit_failures;	/* failed submits in a row */
	struct syncguard_depth depth;	/* the most ops at once, lately */
	struct event_data submit_ev;
	struct event_data answer_ev;	/* answers deferred outside run_ring */
} ring;

static void defer(struct uring_op *op, enum syncguard_reason r);

/* What prepare() took for @op: its descriptor, its aligned copy. */
static void release(struct syncguard_bs *bs, struct uring_op *op)
{
	if (op->own_fd)
		syncguard_direct_fd_put(&bs->lun, op->fd);
	op->own_fd = false;
	free(op->bounce);
	op->bounce = NULL;
}

/* Answer @op.  While one LUN is quiesced (from a tgtadm request) other
 * LUNs' answers wait for the event loop, where tgt expects them. */
static void finish(struct uring_op *op, enum syncguard_reason r)
{
	struct syncguard_bs *bs = op->tag.bs;
	struct syncguard_result res = { .reason = r, .err = op->err };
	struct scsi_cmd *cmd = op->cmd;

	if (ring.quiescing && ring.quiescing != bs) {
		defer(op, r);
		return;
	}
	syncguard_answer(cmd, &res);
	release(bs, op);
	free(op);
	bs->uring.inflight--;
	ring.ops--;
	target_cmd_io_done(cmd, scsi_get_result(cmd));
}

/* What is held goes with the enter about to be made: counted as one
 * submission of each LUN it carries, and no longer held.  Returns how
 * many held were O_DIRECT. */
static unsigned int unhold(void)
{
	unsigned int direct = ring.held_direct;
	struct syncguard_bs *bs;

	for (bs = ring.held_luns; bs; bs = bs->uring.held_next) {
		syncguard_count(&bs->lun.stats->ring_submits);
		bs->uring.held = 0;
	}
	ring.held_luns = NULL;
	ring.held = ring.held_direct = ring.quiet = 0;
	return direct;
}

/*
 * Submission.  An SQE, once prepared, reaches the kernel with the next
 * io_uring_enter even if this one fails (liburing has published the SQ
 * tail), so a failed submit is not a failed command: it is logged, and
 * uring_event submits again.  A full SQ (never, with the ring's commands
 * capped below RING_ENTRIES) is submitted to make room.  The first
 * failure of a run is logged, and the first success after it: a submit
 * that keeps failing is retried on every pass of tgtd's loop, which
 * would fill the log.
 */
static void submit(void)
{
	unsigned int direct = unhold();
	int ret;

	ret = io_uring_submit(&ring.ring);
	if (ret >= 0) {
		if (ring.submit_failures)
			eprintf("syncguard: io_uring submit works again, after "
				"%u failures\n", ring.submit_failures);
		ring.submit_failures = 0;
		return;
	}
	if (!ring.submit_failures++)
		eprintf("syncguard: io_uring submit: %s (retried until it "
			"works)\n", strerror(-ret));
	/* what stays in the ring is retried at the end of the loop's pass:
	 * with nothing else in flight no completion would wake run_ring */
	ring.held = io_uring_sq_ready(&ring.ring);
	ring.held_direct = direct < ring.held ? direct : ring.held;
	if (ring.held) {
		ring.held_since_us = syncguard_now_us();
		ring.held_seen = 0;
		tgt_add_sched_event(&ring.submit_ev);
	}
}

static struct io_uring_sqe *get_sqe(void)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring.ring);

	if (!sqe) {
		submit();
		sqe = io_uring_get_sqe(&ring.ring);
	}
	return sqe;
}

/*
 * Submission batching (the rules: syncguard_submit_hold, core/flush.c),
 * over every LUN's reads and writes.  What waits is submitted by the
 * next io_uring_enter: a flush's; the one that reaches the batch limit,
 * or that completes the few commands a low-depth initiator keeps in
 * flight (ring.depth, noted as each command enters the ring);
 * quiesce's; or submit_event's, after SUBMIT_QUIET passes of tgtd's loop
 * in a row that brought no other, or once the first has waited its
 * longest.
 */

/* tgt's scheduled event, before each epoll_wait while anything is held
 * (epoll_wait then does not sleep). */
static void submit_event(struct event_data *ev)
{
	struct syncguard_bs *bs;

	(void)ev;
	if (!ring.held)
		return;
	ring.quiet = ring.held != ring.held_seen ? 0 : ring.quiet + 1;
	if (syncguard_submit_due(syncguard_now_us() - ring.held_since_us,
				 ring.quiet, ring.io_inflight > ring.held_direct ?
				 ring.io_inflight - ring.held_direct : 0)) {
		for (bs = ring.held_luns; bs; bs = bs->uring.held_next)
			syncguard_count(&bs->lun.stats->ring_held_submits);
		submit();
		return;
	}
	ring.held_seen = ring.held;
	tgt_add_sched_event(&ring.submit_ev);
}

/* A read or write of @bs just prepared; @direct: O_DIRECT, to the
 * device. */
static void submit_io(struct syncguard_bs *bs, bool direct)
{
	syncguard_count(&bs->lun.stats->ring_ios);
	if (!bs->uring.held++) {
		bs->uring.held_next = ring.held_luns;
		ring.held_luns = bs;
	}
	ring.held++;
	if (direct) {
		ring.held_direct++;
		ring.io_inflight++;
	}
	if (!syncguard_submit_hold(ring.held, ring.ops, &ring.depth)) {
		submit();
		return;
	}
	if (ring.held == 1) {
		ring.held_since_us = syncguard_now_us();
		ring.held_seen = 0;
		tgt_add_sched_event(&ring.submit_ev);
	}
}

/* ---- the group flush (each LUN its own) ---- */

/* Start the device flush that answers the pending waiters.  Without an
 * SQE they stay pending, and run_ring tries again. */
static void start_flush(struct syncguard_bs *bs)
{
	struct syncguard_uring *u = &bs->uring;
	struct io_uring_sqe *sqe = get_sqe();

	if (!sqe) {
		ring.flush_stalled = true;
		return;
	}
	u->current = u->pending;
	u->pending = NULL;
	u->flushing = true;
	u->flush_covers = syncguard_lun_dirty(&bs->lun);
	u->flush_start_us = syncguard_now_us();
	io_uring_prep_fsync(sqe, u->flush_fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data(sqe, &u->flush_tag);
	submit();
}

/* No flush of the LUN runs or waits out its batching hold: the next
 * one may start. */
static bool flush_free(const struct syncguard_uring *u)
{
	return !u->flushing && !u->batching;
}

/* Start the next flush now, or after a batching wait (core/flush.c) in
 * which more commands join it; the timer's completion starts it. */
static void next_flush(struct syncguard_bs *bs)
{
	struct syncguard_uring *u = &bs->uring;
	unsigned int us = syncguard_flush_hold_us(&bs->lun);
	struct io_uring_sqe *sqe;

	if (!us || !(sqe = get_sqe())) {
		start_flush(bs);
		return;
	}
	u->batch_ts.tv_sec = 0;
	u->batch_ts.tv_nsec = (long long)us * 1000;
	io_uring_prep_timeout(sqe, &u->batch_ts, 0, 0);
	io_uring_sqe_set_data(sqe, &u->batch_tag);
	submit();
	u->batching = true;
}

/* @op's data (if any) is in a volatile cache (the page cache, or with
 * O_DIRECT the device's): answer it after the first device flush that
 * starts from now on. */
static void join_flush(struct syncguard_bs *bs, struct uring_op *op)
{
	struct syncguard_uring *u = &bs->uring;

	op->next = u->pending;
	u->pending = op;
	if (flush_free(u))
		next_flush(bs);
}

/*
 * The flush that answers u->current is over.  An answer can run a
 * command at once: where the waiter's connection has closed, tgt frees
 * its task inside target_cmd_io_done and starts the commands an ORDERED
 * or HEAD OF QUEUE one held back (target.c, post_cmd_done), and a
 * SYNCHRONIZE CACHE among them joins, and may start, the next flush of
 * this LUN from within finish().  So the waiters are taken off
 * u->current before the first answer, and the next flush starts only
 * where no such command started one (test_modes_ordered_flush_closed).
 */
static void flush_done(struct syncguard_bs *bs, int res)
{
	struct syncguard_uring *u = &bs->uring;
	struct uring_op *op, *next, *waiters = u->current;
	unsigned int n = 0, writes = 0, lone = 0;
	uint64_t us = syncguard_now_us() - u->flush_start_us;

	u->flushing = false;
	u->current = NULL;
	for (op = waiters; op; op = op->next)
		n++;
	/* every waiter gets this flush's own result, whatever the errno */
	res = syncguard_flush_done(&bs->lun, u->flush_covers, res, us, n);
	for (op = waiters; op; op = next) {
		next = op->next;
		op->err = -res;
		writes += op->scored && !op->err && op->plan.scored;
		lone += op->scored && !op->err && !op->plan.scored;
		finish(op, syncguard_plan_done(&bs->lun, &op->plan, -op->err));
	}
	if (n > 1)
		__atomic_fetch_add(&bs->lun.stats->flushes_coalesced, n - 1,
				   __ATOMIC_RELAXED);
	syncguard_durable_answered(&bs->lun, writes, lone);
	if (u->pending && flush_free(u))
		next_flush(bs);
}

/* ---- reads and writes ---- */

/* Queue the (rest of the) transfer of @op; 0 or -SYNCGUARD_ERESOURCE
 * (no SQE: answered BUSY, the initiator retries). */
static int queue_io(struct uring_op *op)
{
	struct io_uring_sqe *sqe = get_sqe();
	struct scsi_cmd *cmd = op->cmd;
	uint32_t left = op->plan.len - op->done;
	uint64_t off = op->plan.off + op->done;

	if (!sqe)
		return -SYNCGUARD_ERESOURCE;
	if (!op->plan.write)
		io_uring_prep_read(sqe, op->fd, (uint8_t *)scsi_get_in_buffer(cmd) +
				   op->done, left, off);
	else
		io_uring_prep_write(sqe, op->fd, (op->bounce ? op->bounce :
				    (uint8_t *)scsi_get_out_buffer(cmd)) + op->done,
				    left, off);
	if (op->plan.dsync)
		sqe->rw_flags = RWF_DSYNC;
	if (op->tag.bs->uring.async)	/* never on the event thread */
		sqe->flags |= IOSQE_ASYNC;
	io_uring_sqe_set_data(sqe, &op->tag);
	submit_io(op->tag.bs, op->plan.direct);
	return 0;
}

/* Choose the descriptor: O_DIRECT (a write through an aligned copy if
 * its buffer is not, a read to a worker; an RWF_DSYNC write on one of
 * its own, see "sync descriptors" in core/lun.c), else the LUN's.  0,
 * or -SYNCGUARD_ERESOURCE (no memory, no descriptor) and the like, after
 * which release() gives back what was taken. */
static int prepare(struct syncguard_bs *bs, struct uring_op *op)
{
	struct syncguard_lun *lun = &bs->lun;

	op->fd = lun->fd;
	op->scored = op->plan.write &&
		     op->plan.persist == SYNCGUARD_PERSIST_DURABLE;
	if (!op->plan.direct)
		return 0;
	op->fd = lun->dfd;
	if (!op->plan.write)	/* a worker reads into an aligned copy */
		return (uintptr_t)scsi_get_in_buffer(op->cmd) %
		       lun->dio_mem_align ? -EINVAL : 0;
	if (!syncguard_direct_buf(lun, scsi_get_out_buffer(op->cmd),
				  op->plan.len, &op->bounce))
		return -SYNCGUARD_ERESOURCE;
	if (op->plan.dsync) {
		int fd = syncguard_direct_fd_get(lun);

		if (fd < 0)
			return fd;	/* the caller releases the copy */
		op->fd = fd;
		op->own_fd = true;
		syncguard_count(&lun->stats->dsync_writes);
	}
	syncguard_count(&lun->stats->direct_writes);
	return 0;
}

/*
 * @op's transfer is complete (@err 0) or failed: a durable write by group
 * commit joins the next flush, the rest is answered.  Never answers from
 * inside bs_cmd_submit: a flush completes later, and anything else goes
 * through defer().
 */
static void io_done(struct uring_op *op, int err)
{
	struct syncguard_bs *bs = op->tag.bs;
	bool joins = !err && op->plan.write && !op->plan.dsync &&
		     op->plan.persist == SYNCGUARD_PERSIST_DURABLE;

	/* durable (or written, plp) on its own: unless a flush failed
	 * meanwhile (the group flush's waiters are judged in flush_done) */
	if (!err && op->plan.write && !joins &&
	    op->plan.persist != SYNCGUARD_PERSIST_CACHED)
		err = syncguard_lun_lost_meanwhile(&bs->lun);
	if (op->plan.dsync && !err && op->scored)
		syncguard_durable_answered(&bs->lun, op->plan.scored,
					   !op->plan.scored);
	if (joins) {
		syncguard_plan_written(&bs->lun, &op->plan);
		join_flush(bs, op);
		return;
	}
	op->err = -err;
	defer(op, syncguard_plan_done(&bs->lun, &op->plan, err));
}

/*
 * Answer @op from the event loop, never from inside bs_cmd_submit: tgt
 * still uses the command after its submit hook returns, and completing
 * it frees it.  run_ring answers the ready list after its completions;
 * what is deferred outside it waits for answer_event (wake).
 */
static void defer(struct uring_op *op, enum syncguard_reason r)
{
	op->reason = r;
	op->next = ring.ready;
	ring.ready = op;
}

/* Answers deferred outside run_ring go out before tgtd's loop next
 * waits (a scheduled event: no system call). */
static void wake(void)
{
	if (ring.ready)
		tgt_add_sched_event(&ring.answer_ev);
}

/* A new op of @bs for @cmd, or NULL (the ring is full, or no memory). */
static struct uring_op *new_op(struct syncguard_bs *bs, struct scsi_cmd *cmd)
{
	struct uring_op *op;

	if (ring.ops >= RING_ENTRIES - 2 || !(op = calloc(1, sizeof(*op))))
		return NULL;
	op->tag.kind = SYNCGUARD_RING_IO;
	op->tag.bs = bs;
	op->cmd = cmd;
	return op;
}

/* A command of @bs is in the ring from now until finish() answers it:
 * counted, and noted for the depth the initiators keep. */
static void enter(struct syncguard_bs *bs)
{
	bs->uring.inflight++;
	ring.ops++;
	syncguard_depth_note(&ring.depth, ring.ops);
}

/* bs_cmd_submit: plain reads and writes here, the rest on a worker */
int bs_syncguard_cmd_submit(struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct syncguard_req req = {
		.cdb = cmd->scb, .cdb_len = (size_t)cmd->scb_len,
		.out = scsi_get_out_buffer(cmd),
		.out_len = scsi_get_out_length(cmd),
		.in = scsi_get_in_buffer(cmd), .in_len = scsi_get_in_length(cmd),
	};
	struct uring_op *op;
	int err;

	if (bs->open)
		syncguard_lun_note_cdb(&bs->lun, cmd->scb,
				       (size_t)cmd->scb_len);
	if (!bs->uring.on || !(op = new_op(bs, cmd)))
		return syncguard_workers_submit(cmd);
	if (!syncguard_plan(&bs->lun, &req, &op->plan)) {
		free(op);
		return syncguard_workers_submit(cmd);
	}
	if (op->plan.len && prepare(bs, op)) {	/* a worker may manage */
		release(bs, op);
		syncguard_plan_cancel(&bs->lun, &op->plan);
		free(op);
		return syncguard_workers_submit(cmd);
	}
	set_cmd_async(cmd);
	enter(bs);
	err = 0;
	if (op->plan.len)
		err = queue_io(op);
	else
		io_done(op, 0);	/* nothing to move: at most a flush */
	if (err) {
		op->err = -err;
		defer(op, syncguard_plan_done(&bs->lun, &op->plan, err));
	}
	wake();
	return 0;
}

/* What a completion of @op (a read or write; NULL: @bs's flush)
 * reports, through the system-call table (tests inject errnos there). */
static int ring_result(struct syncguard_bs *bs, struct uring_op *op, int res)
{
	enum syncguard_call call = !op ? SYNCGUARD_CALL_FLUSH :
		op->plan.dsync ? SYNCGUARD_CALL_DSYNC_WRITE : SYNCGUARD_CALL_WRITE;

	return syncguard_sys.ring_result(call, op ? op->fd : bs->uring.flush_fd,
					 res);
}

/* A transfer's completion @res (through ring_result): maybe short
 * (queue the rest). */
static void reap_io(struct uring_op *op, int res)
{
	if (op->plan.direct)
		ring.io_inflight--;
	if (res > 0) {
		op->done += (uint32_t)res;
		op->tries = 0;		/* progress: a new count of retries */
	}
	/* a plain write's EINTR and EAGAIN are retried, an RWF_DSYNC
	 * write's are its sync's: a failure (syncguard_retry) */
	if ((res < 0 && !op->plan.dsync && syncguard_retry(-res, &op->tries)) ||
	    (res > 0 && op->done < op->plan.len)) {
		int err = queue_io(op);	/* the rest, or again */

		if (err)
			io_done(op, err);
		return;
	}
	io_done(op, res < 0 ? res : res == 0 && op->done < op->plan.len ?
		-EIO : 0);
}

/* One completion: a transfer, a LUN's flush, or its batch timer. */
static void reap(struct io_uring_cqe *cqe)
{
	struct syncguard_ring_tag *tag = io_uring_cqe_get_data(cqe);
	struct syncguard_bs *bs = tag->bs;
	struct uring_op *op;
	int res;

	if (tag->kind == SYNCGUARD_RING_BATCH) {  /* -ETIME: the wait is over */
		bs->uring.batching = false;
		if (bs->uring.pending && flush_free(&bs->uring))
			start_flush(bs);
		return;
	}
	op = tag->kind == SYNCGUARD_RING_IO ? (struct uring_op *)tag : NULL;
	res = ring_result(bs, op, cqe->res);
	if (op)
		reap_io(op, res);
	else	/* the flush: any errno fails it (syncguard_retry says why) */
		flush_done(bs, res < 0 ? res : 0);
}

/* Answer what is ready.  While a LUN is quiesced, finish() puts other
 * LUNs' answers back, so passes go on only while one answers some of
 * the quiesced LUN's: an answer can bring tgt's next command of that
 * LUN (one held behind an ORDERED one, say), whose own answer may be
 * ready at once, and syncguard_uring_quiesce would wait in the kernel
 * for a completion it no longer has coming. */
static void answer_ready(void)
{
	struct uring_op *op, *next;
	bool again = true;

	while (again && (op = ring.ready) != NULL) {
		ring.ready = NULL;
		again = false;
		for (; op; op = next) {
			next = op->next;
			again |= !ring.quiescing || op->tag.bs == ring.quiescing;
			finish(op, op->reason);
		}
	}
}

/* Reap every completion, answer what is ready, and retry what found
 * the ring busy. */
static void run_ring(void)
{
	struct io_uring_cqe *cqe;
	struct syncguard_bs *bs;

	while (io_uring_peek_cqe(&ring.ring, &cqe) == 0) {
		reap(cqe);
		io_uring_cqe_seen(&ring.ring, cqe);
	}
	answer_ready();
	/* a submit failed (held I/O waits for submit_event, or goes along) */
	if (io_uring_sq_ready(&ring.ring) > ring.held)
		submit();
	if (!ring.flush_stalled)
		return;
	ring.flush_stalled = false;	/* a flush that found no SQE */
	for (bs = ring.luns; bs; bs = bs->uring.next)
		if (bs->uring.pending && flush_free(&bs->uring))
			start_flush(bs);
}

/* The ring's fd is readable (epoll, level-triggered): completions are
 * waiting.  Reaping them all makes it unreadable again: no eventfd, no
 * read(2) per wake-up. */
static void uring_event(int fd, int events, void *data)
{
	(void)fd;
	(void)events;
	(void)data;
	run_ring();
}

/* tgt's scheduled event for wake(). */
static void answer_event(struct event_data *ev)
{
	(void)ev;
	run_ring();
}

void syncguard_uring_quiesce(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);

	if (!bs->uring.flush_on)
		return;
	ring.quiescing = bs;
	/* answer what is ready first: a deferred answer has no completion
	 * to wait for */
	for (run_ring(); bs->uring.inflight ||
	     __atomic_load_n(&bs->lun.async_cached, __ATOMIC_SEQ_CST);
	     run_ring()) {
		int ret;

		unhold();	/* submitted here, with the rest */
		ret = io_uring_submit_and_wait(&ring.ring, 1);
		/* a failed enter leaves its SQEs in the ring, and the caller
		 * waits for their writes (syncguard_lun_apply_wce): try again
		 * (the kernel's EAGAIN and EBUSY pass) rather than return */
		if (ret < 0 && ret != -EINTR) {
			eprintf("syncguard: io_uring wait: %s (retried)\n",
				strerror(-ret));
			usleep(1000);
		}
	}
	ring.quiescing = NULL;
	wake();		/* other LUNs' answers, put back meanwhile */
}

/*
 * SYNCHRONIZE CACHE that needs a device flush (the event thread already
 * answered the rest, glue/synccache.c): join the engine's group flush.
 * This works with reads and writes on either engine (it only needs their
 * data written, to the page cache or the device, and counted dirty,
 * which both do before they complete), so the ring also runs for
 * flushes alone where engine=auto leaves reads and writes on the workers: a waiting SYNCHRONIZE CACHE
 * then holds no worker thread.  (Measured on the 2 ms-flush FUSE model,
 * write-back WRITE+SYNCHRONIZE CACHE at QD32: with every waiter parked
 * on one of tgt's 16 workers, the writes queued behind them and a flush
 * answered about 5 commands.)
 * Returns false when there is no ring; the caller takes tgt's path.
 */
bool syncguard_uring_sync_cache(struct scsi_cmd *cmd)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(cmd->dev);
	struct uring_op *op;

	/* a soft latch is rechecked on a worker (syncguard_lun_recheck) */
	if (!bs->uring.flush_on || syncguard_lun_latched(&bs->lun) ||
	    !(op = new_op(bs, cmd)))
		return false;
	syncguard_count(&bs->lun.stats->sync_caches);
	/* a flush failure is a WRITE ERROR; nothing was written by it */
	op->plan.write = op->plan.written = true;
	op->plan.persist = SYNCGUARD_PERSIST_DURABLE;
	set_cmd_async(cmd);
	scsi_set_in_resid_by_actual(cmd, 0);
	enter(bs);
	join_flush(bs, op);
	return true;
}

/* ---- set-up ---- */

/*
 * Can the file system try I/O without blocking (RWF_NOWAIT)?  Where it
 * cannot, io_uring does not always hand the request to its io-wq
 * threads: a FUSE file's poll calls it writable, so io_uring tries the
 * write in the submitting thread, tgtd's event thread, and FUSE first
 * asks its daemon for the file's attributes and waits for the answer
 * (perf: fuse_do_getattr under io_write in io_req_task_submit; a
 * stopped daemon stopped every LUN and login: tests/stall.sh).  So on
 * such a file the engine sends reads and writes straight to io-wq
 * (IOSQE_ASYNC, queue_io), and its reads may go O_DIRECT too
 * (syncguard_lun_writes_async).  engine=auto leaves them to the LUN's
 * worker threads there.  io-wq runs one write to a file at a time: an
 * O_DIRECT write that the file system finishes asynchronously (FUSE
 * with async direct I/O) leaves it at once, but a page-cache write does
 * not, nor a direct write where the file system completes it before
 * returning (ZFS before 2.3 takes O_DIRECT as buffered; a FUSE daemon
 * without async direct I/O), and 32 writes in flight would become one.
 * Nothing tells them apart at open.  The workers also keep a stuck
 * device's commands to its LUN, where on the ring they could take its
 * 254 places from every other LUN.  io-wq against the workers on the
 * FUSE model (docs/performance.md, the io_uring engine): O_DIRECT writes
 * 0.94-1.4x, durable page-cache writes 0.72-0.83x.
 */
static bool nowait_capable(int fd)
{
	char byte;
	struct iovec iov = { &byte, 1 };

	return preadv2(fd, &iov, 1, 0, RWF_NOWAIT) >= 0 || errno != EOPNOTSUPP;
}

/*
 * Completions reach the event thread cooperatively: without
 * IORING_SETUP_COOP_TASKRUN, each one interrupts the thread with an IPI
 * to run io_uring's task work, wherever it is in tgtd's loop; with it,
 * the work waits for the thread's next system call (tgtd makes several
 * per command), a sleeping thread is still woken, and TASKRUN_FLAG
 * tells io_uring_peek_cqe to enter the kernel for work still pending.
 * Measured side by side (QD32 4 KiB, 6-10 rounds of 2 s): write-back
 * plain writes 44.8k IOPS against 33.4k, write-through FUA writes 31.4k
 * against 23.6k, write-back WRITE+SYNCHRONIZE CACHE 17.8k against 15.9k,
 * plp plain writes 32.8k against 26.7k; QD1 unchanged.  Kernels before
 * 5.19 refuse the flags (EINVAL) and get a ring without them.
 * Returns 0 or -errno from io_uring_queue_init.
 */
static int ring_init(struct io_uring *r)
{
	int ret = io_uring_queue_init(RING_ENTRIES, r,
				      IORING_SETUP_COOP_TASKRUN |
				      IORING_SETUP_TASKRUN_FLAG);

	if (ret != -EINVAL)
		return ret;
	eprintf("syncguard: io_uring without COOP_TASKRUN (a kernel before "
		"5.19): completions interrupt tgtd's event thread\n");
	return io_uring_queue_init(RING_ENTRIES, r, 0);
}

/* Start the shared ring for its first user: 0 or -errno. */
static int ring_start(void)
{
	int ret = ring_init(&ring.ring);

	if (ret)
		return ret;
	ret = tgt_event_add(ring.ring.ring_fd, EPOLLIN, uring_event, NULL);
	if (ret) {
		io_uring_queue_exit(&ring.ring);
		return ret;
	}
	tgt_init_sched_event(&ring.submit_ev, submit_event, NULL);
	tgt_init_sched_event(&ring.answer_ev, answer_event, NULL);
	return 0;
}

/* Its last user has gone (nothing of theirs is in it). */
static void ring_stop(void)
{
	tgt_event_del(ring.ring.ring_fd);
	tgt_remove_sched_event(&ring.submit_ev);
	tgt_remove_sched_event(&ring.answer_ev);
	io_uring_queue_exit(&ring.ring);
	ring.held = ring.held_seen = ring.held_direct = ring.quiet = 0;
	ring.held_luns = NULL;
	ring.io_inflight = ring.submit_failures = 0;
	/* the next LUNs start afresh */
	ring.depth = (struct syncguard_depth){ 0 };
	ring.flush_stalled = false;
}

/*
 * io-wq, io_uring's threads for what cannot complete without blocking,
 * is one pool per submitting thread: every LUN's group flush, and the
 * reads and writes a file cannot take without blocking, share tgtd's
 * event thread's.  By default at most 4 per CPU of them run at once
 * (or as many as the ring has entries, if fewer),
 * and a flush stuck on a device that no longer answers (a stopped FUSE
 * daemon, a suspended ZFS pool, an NFS server gone) holds one until it
 * answers: with 4 per CPU such LUNs, every other LUN's flush queued
 * behind them and its durable writes went unanswered
 * (tests/stall-pool.sh).  The ring holds at most RING_ENTRIES - 2
 * commands and one flush per LUN, so with a pool of RING_ENTRIES
 * threads plus one per LUN no request waits for a thread another holds
 * (io-wq still runs the writes to one file one at a time); io-wq starts
 * a thread only when a request blocks and none is free, so the bound
 * costs nothing until they do.  Needs Linux 5.15, and the kernel takes
 * no more than tgtd's RLIMIT_NPROC: either way the smaller pool is
 * logged.
 */
static void iowq_bound(void)
{
	unsigned int max[2] = { RING_ENTRIES, 0 };	/* 0: leave the
						 * unbounded pool as is */
	const struct syncguard_bs *bs;
	unsigned int want;
	int ret;

	for (bs = ring.luns; bs; bs = bs->uring.next)
		max[0]++;
	want = max[0];
	ret = io_uring_register_iowq_max_workers(&ring.ring, max);
	if (!ret) {		/* { 0, 0 } reads the sizes in force */
		max[0] = max[1] = 0;
		ret = io_uring_register_iowq_max_workers(&ring.ring, max);
	}
	if (ret)
		eprintf("syncguard: io-wq keeps its default size (%s): a flush "
			"stuck on one device can hold up other LUNs'\n",
			strerror(-ret));
	else if (max[0] && max[0] < want)	/* 0: no pool yet to ask */
		eprintf("syncguard: io-wq runs at most %u requests at once, not "
			"%u (tgtd's RLIMIT_NPROC): flushes stuck on that many "
			"devices can hold up other LUNs'\n", max[0], want);
}

int syncguard_uring_open(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct syncguard_uring *u = &bs->uring;
	int ret;

	memset(u, 0, sizeof(*u));
	u->flush_fd = -1;
	u->flush_tag = (struct syncguard_ring_tag){ SYNCGUARD_RING_FLUSH, bs };
	u->batch_tag = (struct syncguard_ring_tag){ SYNCGUARD_RING_BATCH, bs };
	if (bs->opts.engine == SYNCGUARD_ENGINE_THREADS)
		return 0;
	ret = ring.luns ? 0 : ring_start();
	if (!ret) {
		u->flush_fd = syncguard_sync_fd_get(&bs->lun);
		ret = u->flush_fd < 0 ? u->flush_fd : 0;
		if (ret && !ring.luns)
			ring_stop();
	}
	if (ret)
		return bs->opts.engine == SYNCGUARD_ENGINE_URING ? ret : 0;
	u->next = ring.luns;
	ring.luns = bs;
	iowq_bound();
	u->flush_on = true;
	u->async = !nowait_capable(bs->lun.fd);
	u->on = bs->opts.engine == SYNCGUARD_ENGINE_URING || !u->async;
	if (u->on)
		syncguard_lun_writes_async(&bs->lun);
	return 0;
}

/* After tgt has no command of @lu left (it refuses to delete a LUN that
 * has); anything still in the ring is finished first, since the ring
 * outlives the LUN. */
void syncguard_uring_close(struct scsi_lu *lu)
{
	struct syncguard_bs *bs = SYNCGUARD_BS(lu);
	struct syncguard_uring *u = &bs->uring;
	struct syncguard_bs **p;

	if (u->flush_on) {
		syncguard_uring_quiesce(lu);
		for (p = &ring.luns; *p != bs; p = &(*p)->uring.next)
			;
		*p = u->next;
		if (!ring.luns)
			ring_stop();
		else
			iowq_bound();
	}
	if (u->flush_fd >= 0)
		syncguard_sync_fd_put(&bs->lun, u->flush_fd);
	memset(u, 0, sizeof(*u));
	u->flush_fd = -1;
}
