/*
 * Measuring one point: N sessions, each keeping QD commands in flight,
 * in one poll loop (libiscsi's async API, as its test tool does: fill to
 * the depth, poll, iscsi_service, callbacks complete and refill).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "toolutil.h"
#include "syncbench.h"
#include "verify.h"

struct sess;

struct op {
	struct sess *s;
	uint64_t lba;
	uint32_t blocks;
	bool read, flush_after;
	bool flushing;		/* its WRITE is done, its flush is out */
	bool active;		/* in flight: neither free nor done */
	bool parked;		/* every:N: its WRITE is done, its flush waits
				 * for the writes issued before it */
	uint64_t write_no;	/* a WRITE's number in its session, from 1 */
	unsigned int retries;
	uint64_t start_ns;
	uint64_t cmd_ns;	/* when its current command went to libiscsi */
	uint64_t data_lat_ns;	/* its READ's or WRITE's latency */
	uint64_t flush_lat_ns;	/* its SYNCHRONIZE CACHE's */
	uint64_t retry_at;	/* waiting to be sent again from then, ns;
				 * 0 not waiting */
	uint64_t sent_ns;	/* when libiscsi's queue was empty after it
				 * was queued: it was on the wire; 0 not yet */
	uint64_t seq;		/* --verify stamp */
	unsigned char *buf;	/* data of this op */
	struct scsi_iovec rd;	/* a READ's data goes to the session's rbuf */
};

struct sess {
	struct run *run;
	unsigned int idx;
	struct iscsi_context *iscsi;
	int lun;
	bool dead, end_flushed;
	unsigned int inflight, nfree;
	struct op *slots, **free;
	unsigned char *rbuf;	/* READ data lands here, unread: no copy
				 * in libiscsi, and writes keep their data */
	uint64_t base, blocks;	/* region, logical blocks */
	uint64_t cursor;	/* next sequential offset in the region */
	uint64_t issued_bytes, writes_since_flush, writes_issued;
	uint64_t done_ns;	/* when it had nothing left to do; 0 running */
	bool starved;		/* --verify found no free block: wait
				 * for an answer, not for the next
				 * arrival */
	struct session_result res;
};

struct run {
	const struct config *c;
	const struct target_info *ti;
	const struct run_params *p;
	struct result *r;
	struct sess s[MAX_SESSIONS];
	unsigned int nsess;
	uint64_t t0, t_measure, t_stop, last_tick, last_iv, ops_at_tick;
	uint64_t next_iv;	/* the next --interval boundary, on the grid */
	uint64_t rng;
	uint64_t nonce;		/* point_nonce: this point's write data */
	struct histogram iv_hist;
	uint64_t iv_ops, iv_bytes;
	struct verify_map *vmap;
	uint8_t *busy;		/* --verify: blocks with a write in flight */
	uint64_t starved;	/* --verify: no free block for a command */
	unsigned int retry_waiting;	/* commands in their backoff */
	uint16_t ua_shown[8];	/* unit attentions (ASC/ASCQ) said so far */
	unsigned int n_ua_shown;
	struct target_sample at_measure; /* the target's counters when the
					 * warm-up ended; -1: unknown, -2:
					 * not read yet */
	bool closing;		/* contexts being destroyed: ignore callbacks */
	uint64_t last_progress;	/* when the target last answered */
	uint64_t unheard;	/* commands libiscsi failed since then */
	struct pacer pace[MAX_SESSIONS];	/* open loop (rate.c) */
};

static uint64_t rnd(struct run *rn)
{
	return xorshift64(&rn->rng);
}

/* ---- completing ---- */

static bool retryable(int status, struct scsi_task *t)
{
	return status == SCSI_STATUS_BUSY || status == SCSI_STATUS_TASK_SET_FULL ||
	       (status == SCSI_STATUS_CHECK_CONDITION && t &&
		t->sense.key == SCSI_SENSE_UNIT_ATTENTION);
}

static void note_error(struct run *rn, struct op *op, const char *what,
		       int status, struct scsi_task *t)
{
	char why[160];

	rn->r->errors++;
	if (rn->r->errors > 5)
		return;
	if (status == SCSI_STATUS_CHECK_CONDITION && t)
		fprintf(stderr, PROG ": %s lba %" PRIu64 ": CHECK CONDITION, "
			"%s\n", what, op->lba,
			syncguard_sense_text(&t->sense, why, sizeof(why)));
	else
		fprintf(stderr, PROG ": %s lba %" PRIu64 ": status 0x%x: %s\n",
			what, op->lba, status, iscsi_get_error(op->s->iscsi));
	if (rn->r->errors == 5)
		fprintf(stderr, PROG ": (further errors counted, not shown)\n");
}

/* Say a unit attention once per ASC/ASCQ (SPC-4 5.14): it is retried,
 * but it tells the user that what is measured changed under the run
 * (MODE PARAMETERS CHANGED: the WCE bit may have; CAPACITY DATA HAS
 * CHANGED: the LUN was moved; a reset or a new session: commands lost). */
static void note_unit_attention(struct run *rn, struct scsi_task *t)
{
	char why[160];

	if (!t || t->sense.key != SCSI_SENSE_UNIT_ATTENTION)
		return;
	rn->r->unit_attentions++;
	/* another initiator or the administrator changed a mode page (the
	 * Caching page's WCE among them) under the run */
	if (t->sense.ascq == 0x2a01)
		rn->r->mode_changed = true;
	for (unsigned int i = 0; i < rn->n_ua_shown; i++)
		if (rn->ua_shown[i] == t->sense.ascq)
			return;
	if (rn->n_ua_shown == sizeof(rn->ua_shown) / sizeof(rn->ua_shown[0]))
		return;
	rn->ua_shown[rn->n_ua_shown++] = (uint16_t)t->sense.ascq;
	fprintf(stderr, PROG ": the target reported a unit attention, %s; "
		"retried (the run goes on, on what changed)\n",
		syncguard_sense_text(&t->sense, why, sizeof(why)));
}

/* One answered command of @op: its latency kept in the op until the
 * op is counted (account), so that the per-command histograms count
 * exactly the operations the run counts (a WRITE answered in the
 * warm-up whose SYNCHRONIZE CACHE is answered after it belongs to a
 * counted operation). */
static void note_command(struct op *op)
{
	uint64_t lat = now_ns() - op->cmd_ns;

	if (op->flushing || !op->blocks)
		op->flush_lat_ns = lat;
	else
		op->data_lat_ns = lat;
}

/* @op's commands into their histograms (a retried one's last send) */
static void account_commands(struct run *rn, const struct op *op)
{
	enum syncguard_cmd k;

	if (op->blocks) {
		k = op->read ? CMD_READ : rn->p->sync == SYNC_FUA ?
		    CMD_WRITE_FUA : CMD_WRITE;
		syncguard_hist_add(&rn->r->cmd_hist[k], op->data_lat_ns);
	}
	if (op->flushing || !op->blocks)
		syncguard_hist_add(&rn->r->cmd_hist[CMD_SYNC_CACHE],
				   op->flush_lat_ns);
}

/* Count a completed operation (after the warm-up); the flush --sync end
 * adds is timed with the run but is not an operation of its own. */
static void account(struct run *rn, struct op *op, uint64_t now)
{
	uint64_t bytes = (uint64_t)op->blocks * rn->ti->block_size;

	account_commands(rn, op);
	if (!op->blocks && rn->p->sync != SYNC_FLUSH_ONLY) {
		rn->r->flushes++;
		return;
	}
	/* a retried operation's latency holds its backoff and the answers
	 * it got before, as the application waiting for it saw: counted
	 * with the others (left out, the slowest would flatter every
	 * percentile), and also apart (tests/syncbench.sh, "a unit
	 * attention mid-run") */
	syncguard_hist_add(&rn->r->hist, now - op->start_ns);
	syncguard_hist_add(&rn->iv_hist, now - op->start_ns);
	if (op->retries)
		syncguard_hist_add(&rn->r->retried_hist, now - op->start_ns);
	rn->r->ops++;
	rn->r->bytes += bytes;
	rn->iv_ops++;
	rn->iv_bytes += bytes;
	op->s->res.ops++;
	if (op->flushing)
		rn->r->flushes++;
	if (op->read)
		rn->r->reads++;
	else if (op->blocks)
		rn->r->writes++;
	else
		rn->r->flushes++;
}

/* A command ended: @status is libiscsi's (GOOD, another SCSI status the
 * target sent, or its own CANCELLED, ERROR, TIMEOUT; -1: not sent).
 * Only an answer from the target is progress (give_up): with libiscsi's
 * timeouts counted, a hung target would keep a --bytes run going for
 * ever. */
static void op_done(struct op *op, int status)
{
	struct sess *s = op->s;
	struct run *rn = s->run;
	bool ok = status == SCSI_STATUS_GOOD;
	uint64_t now = now_ns();

	if (ok && rn->vmap && !op->read && op->blocks)
		syncguard_verify_note_acked(rn->vmap, op->lba, op->blocks, op->seq);
	if (rn->busy && !op->read && op->blocks)
		memset(rn->busy + op->lba, 0, op->blocks);
	if (status >= 0 && status < SCSI_STATUS_CANCELLED) {
		rn->last_progress = now;
		rn->unheard = 0;
	} else if (status >= SCSI_STATUS_CANCELLED) {
		rn->unheard++;
	}
	/* counted when answered in the measured window, as fio counts after
	 * its ramp_time: counting only commands *issued* in it would leave
	 * its first latency's worth of answers out of a window that still
	 * counts that time (dead time that lowers IOPS) */
	if (ok && now >= rn->t_measure) {
		account(rn, op, now);
		if (op->sent_ns >= op->start_ns) {
			rn->r->queued_ns += op->sent_ns - op->start_ns;
			rn->r->queued_n++;
		}
	}
	op->active = false;
	s->inflight--;
	s->free[s->nfree++] = op;
	s->starved = false;
}

/*
 * every:N: may the SYNCHRONIZE CACHE that follows write @op go?  Only
 * once every write the session issued before it is answered: a flush
 * covers the writes completed before it (SBC-3 5.22), so one sent while
 * some of the N were still in flight would not cover them, and the
 * discipline would measure less than it promises.
 */
static bool earlier_writes_answered(const struct op *op)
{
	const struct sess *s = op->s;

	for (unsigned int k = 0; k < s->run->p->qd; k++) {
		const struct op *o = &s->slots[k];

		if (o != op && o->active && !o->parked && !o->flushing &&
		    !o->read && o->blocks && o->write_no < op->write_no)
			return false;
	}
	return true;
}

static int submit_flush(struct op *op);

static void resubmit(struct op *op);

static void release_parked(struct sess *s);

static void data_cb(struct iscsi_context *iscsi, int status, void *data,
		    void *priv)
{
	struct op *op = priv;
	struct run *rn = op->s->run;

	(void)iscsi;
	if (rn->closing) {	/* libiscsi failing what a dead session held */
		if (data)
			scsi_free_scsi_task(data);
		return;
	}
	if (retryable(status, data) && op->retries++ < MAX_RETRIES) {
		rn->r->retries++;
		if (status == SCSI_STATUS_CHECK_CONDITION)
			note_unit_attention(rn, data);
		else
			rn->r->busy_answers++;
		scsi_free_scsi_task(data);
		/* sent again after a backoff (1, 2, 4, 8, 16 ms): at once, a
		 * busy target would get it back while still busy */
		op->retry_at = now_ns() + (1000000ull << (op->retries - 1));
		rn->retry_waiting++;
		return;
	}
	if (status != SCSI_STATUS_GOOD)
		note_error(rn, op, op->read ? "READ(16)" : op->blocks ?
			   "WRITE(16)" : "SYNCHRONIZE CACHE(16)", status, data);
	else
		note_command(op);
	if (data)
		scsi_free_scsi_task(data);
	if (status == SCSI_STATUS_GOOD && op->flush_after) {
		op->flush_after = false;
		if (rn->p->sync == SYNC_EVERY && !earlier_writes_answered(op)) {
			op->parked = true;
			return;		/* release_parked sends its flush */
		}
		op->flushing = true;
		if (!submit_flush(op))
			return;
	}
	op_done(op, status);
	release_parked(op->s);
}

/* every:N: the flushes whose earlier writes are now all answered */
static void release_parked(struct sess *s)
{
	for (unsigned int k = 0; k < s->run->p->qd; k++) {
		struct op *o = &s->slots[k];

		if (!o->parked || !earlier_writes_answered(o))
			continue;
		o->parked = false;
		o->flushing = true;
		if (submit_flush(o)) {
			note_error(s->run, o, "SYNCHRONIZE CACHE(16)", -1, NULL);
			op_done(o, -1);
		}
	}
}

/* ---- submitting ---- */

static int submit_flush(struct op *op)
{
	struct sess *s = op->s;

	op->cmd_ns = now_ns();
	return iscsi_synchronizecache16_task(s->iscsi, s->lun, 0, 0, 0, 0,
					     data_cb, op) ? 0 : -1;
}

static int submit_data(struct op *op)
{
	struct sess *s = op->s;
	struct run *rn = s->run;
	uint32_t len = op->blocks * rn->ti->block_size;
	bool fua = rn->p->sync == SYNC_FUA;

	if (!op->blocks)
		return submit_flush(op);
	op->cmd_ns = now_ns();
	if (op->read) {
		op->rd.iov_base = s->rbuf;
		op->rd.iov_len = len;
		return iscsi_read16_iov_task(s->iscsi, s->lun, op->lba, len,
			(int)rn->ti->block_size, 0, 0, 0, 0, 0, data_cb, op,
			&op->rd, 1) ? 0 : -1;
	}
	return iscsi_write16_task(s->iscsi, s->lun, op->lba, op->buf, len,
		(int)rn->ti->block_size, 0, 0, fua, 0, 0, data_cb, op) ? 0 : -1;
}

/* a retry sends again what failed: the flush of a WRITE+flush pair once
 * its WRITE is done, else the command itself */
static void resubmit(struct op *op)
{
	if (op->flushing ? submit_flush(op) : submit_data(op)) {
		note_error(op->s->run, op, "resubmit", -1, NULL);
		op_done(op, -1);
	}
}

/* An offset for the next command of @s: random or sequential, inside
 * its region, clear of writes in flight when verifying. */
static uint64_t pick_lba(struct sess *s, uint32_t blocks)
{
	struct run *rn = s->run;
	uint64_t slots = s->blocks / blocks, lba;

	for (int tries = 0; tries < 16; tries++) {
		if (rnd(rn) % 100 < rn->p->random_pct) {
			lba = s->base + (rnd(rn) % slots) * blocks;
		} else {
			lba = s->base + s->cursor;
			s->cursor = (s->cursor + blocks) % (slots * blocks);
		}
		if (!rn->busy || !memchr(rn->busy + lba, 1, blocks))
			return lba;
	}
	return UINT64_MAX;
}

/*
 * Make each logical block of @op's write unlike any other this process
 * writes: 16 bytes at its start, the point's nonce (point_nonce) with
 * the session and the write's number, and the block's LBA.  Without it
 * a slot would write the same buffer again and again, and a
 * deduplicating backend (ZFS dedup, VDO) or one that skips a write of
 * what is already there (ZFS nopwrite) would store next to nothing; a
 * later point (iozone's rewriters, --curve's steps) would write the
 * same bytes as an earlier one (tests/syncbench.sh, "distinct").
 * --verify stamps the blocks its own way.
 */
static void stamp_unique(const struct run *rn, struct op *op, uint32_t blocks)
{
	uint64_t id = rn->nonce ^ ((uint64_t)op->s->idx << 48) ^ op->write_no;
	for (uint32_t k = 0; k < blocks; k++) {
		uint8_t *b = op->buf + (size_t)k * rn->ti->block_size;
		uint64_t lba = op->lba + k;

		memcpy(b, &id, sizeof(id));
		memcpy(b + sizeof(id), &lba, sizeof(lba));
	}
}

/* Fill @op for the next command; false when none is due. */
static bool next_op(struct sess *s, struct op *op)
{
	struct run *rn = s->run;
	const struct run_params *p = rn->p;
	uint32_t blocks = (uint32_t)(p->xfer / rn->ti->block_size);

	op->read = p->sync != SYNC_FLUSH_ONLY && rnd(rn) % 100 < p->read_pct;
	op->blocks = p->sync == SYNC_FLUSH_ONLY ? 0 : blocks;
	op->flush_after = !op->read && (p->sync == SYNC_FLUSH ||
		(p->sync == SYNC_EVERY && ++s->writes_since_flush >= rn->c->every));
	if (op->flush_after && p->sync == SYNC_EVERY)
		s->writes_since_flush = 0;
	op->lba = op->blocks ? pick_lba(s, blocks) : 0;
	if (op->lba == UINT64_MAX)
		return false;
	if (!op->read && op->blocks) {
		op->write_no = ++s->writes_issued;
		if (!rn->vmap)
			stamp_unique(rn, op, blocks);
	}
	if (rn->vmap && !op->read) {
		op->seq = syncguard_verify_next_seq(rn->vmap);
		syncguard_verify_stamp(op->buf, op->lba, blocks, rn->ti->block_size,
				       op->seq, s->idx);
		syncguard_verify_note_issued(rn->vmap, op->lba, blocks, op->seq);
		memset(rn->busy + op->lba, 1, blocks);
	}
	s->issued_bytes += p->xfer;
	return true;
}

static bool due(struct sess *s, uint64_t now)
{
	struct run *rn = s->run;

	if (syncguard_interrupted || s->dead)
		return false;
	if (rn->p->bytes)
		return s->issued_bytes < rn->p->bytes;
	return now < rn->t_stop;
}

/* Send what is due: closed loop, a command for every free slot; open
 * loop (--rate), the arrivals whose time has come, as far as free slots
 * go (the others wait, and their wait counts in their latency, which
 * starts at the arrival's intended time). */
static void fill(struct sess *s)
{
	uint64_t now = now_ns();
	struct pacer *pc = &s->run->pace[s->idx];

	while (s->nfree && due(s, now) && syncguard_pacer_ready(pc, now)) {
		struct op *op = s->free[--s->nfree];

		op->retries = 0;
		op->flushing = op->parked = false;
		if (!next_op(s, op)) {
			s->free[s->nfree++] = op;
			s->run->starved++;
			s->starved = true;
			return;
		}
		op->start_ns = syncguard_pacer_take(pc, now_ns());
		op->sent_ns = 0;
		if (submit_data(op)) {
			note_error(s->run, op, "submit", -1, NULL);
			s->free[s->nfree++] = op;
			s->dead = true;
			return;
		}
		op->active = true;
		s->inflight++;
	}
}

/* --sync end: once a session's writes are done, one timed flush */
static void end_flush(struct sess *s)
{
	struct op *op;

	if (s->run->p->sync != SYNC_END || s->end_flushed || s->inflight ||
	    s->dead || !s->nfree)
		return;
	s->end_flushed = true;
	op = s->free[--s->nfree];
	op->blocks = 0;
	op->read = op->flush_after = op->flushing = false;
	op->start_ns = now_ns();
	if (submit_flush(op)) {
		s->free[s->nfree++] = op;
		return;
	}
	op->active = true;
	s->inflight++;
}

/* ---- the loop ---- */

/* --interval of this point, seconds (0: none): the option's when it
 * was given, else the preset's own */
static double interval_s(const struct run *rn)
{
	return rn->c->interval > 0 ? rn->c->interval : rn->p->interval;
}

/* One --interval line: the operations completed since the last one, up
 * to @now (nanoseconds, now_ns's clock). */
static void emit_interval(struct run *rn, uint64_t now)
{
	double dt = (double)(now - rn->last_iv) / 1e9;
	struct result *r = rn->r;
	struct interval iv = { (double)(now - rn->t_measure) / 1e9,
		(double)rn->iv_ops / dt, (double)rn->iv_bytes / dt / 1e6,
		(double)syncguard_hist_percentile(&rn->iv_hist, 99) / 1e3 };
	struct interval *n = realloc(r->iv, (r->niv + 1) * sizeof(*n));

	if (n) {
		r->iv = n;
		r->iv[r->niv++] = iv;
	}
	syncguard_report_interval(rn->c, &iv);
	rn->last_iv = now;
	rn->iv_ops = rn->iv_bytes = 0;
	syncguard_hist_init(&rn->iv_hist);
}

static void tick(struct run *rn, uint64_t now)
{
	const struct config *c = rn->c;

	if (c->progress && now - rn->last_tick >= 1000000000ull) {
		double dt = (double)(now - rn->last_tick) / 1e9;

		fprintf(stderr, "\r%6.1fs %10.0f IOPS  errors %" PRIu64 "  ",
			(double)(now - rn->t0) / 1e9,
			(double)(rn->r->ops - rn->ops_at_tick) / dt, rn->r->errors);
		rn->last_tick = now;
		rn->ops_at_tick = rn->r->ops;
	}
	uint64_t every = (uint64_t)(interval_s(rn) * 1e9);

	/* boundaries on a fixed grid from the start of the measurement, so a
	 * late line does not push every later one back */
	if (every && now >= rn->next_iv) {
		emit_interval(rn, now);
		while (rn->next_iv <= now)
			rn->next_iv += every;
	}
}

/* How long pump may wait in poll, milliseconds: 100, or less to be on
 * time for the next --interval boundary. */
static int wait_ms(const struct run *rn)
{
	uint64_t now = now_ns();

	if (interval_s(rn) <= 0 || rn->next_iv <= now)
		return interval_s(rn) > 0 ? 0 : 100;
	return rn->next_iv - now >= 100000000ull ? 100 :
	       (int)((rn->next_iv - now + 999999) / 1000000);
}

/* When to stop waiting for commands in flight: after --timeout seconds
 * without a single completion (a target that died or hung, in either
 * --time or --bytes mode), or --timeout past the planned end; 2 s after
 * Ctrl-C. */
static bool give_up(const struct run *rn, uint64_t now)
{
	uint64_t limit = syncguard_interrupted ? 2000000000ull :
			 rn->c->timeout * 1000000000ull;

	if (!limit)
		return false;
	if (now > rn->last_progress && now - rn->last_progress > limit)
		return true;
	return (syncguard_interrupted || !rn->p->bytes) && now > rn->t_stop &&
	       now - rn->t_stop > limit;
}

/* Once libiscsi's queue of @s is empty, every command queued before is
 * on the wire: stamp those not stamped yet */
static void note_sent(struct sess *s)
{
	uint64_t now;

	if (iscsi_out_queue_length(s->iscsi))
		return;
	now = now_ns();
	for (unsigned int k = 0; k < s->run->p->qd; k++)
		if (s->slots[k].active && !s->slots[k].sent_ns)
			s->slots[k].sent_ns = now;
}

/* Hold (@on 1) or push (@on 0) what @s writes to its socket. libiscsi
 * sends a PDU's header and its data in two system calls, and with
 * TCP_NODELAY each goes out as a segment of its own that wakes the
 * target for 48 bytes; the kernel initiator sends both as one (MSG_MORE).
 * Corking a pass's writes makes libiscsi's wire look like the kernel's
 * and halves the segments (tests/syncbench.sh, "headers sent corked").
 * A failure loses only the coalescing, so it is ignored. */
static void cork(struct sess *s, int on)
{
	(void)setsockopt(iscsi_get_fd(s->iscsi), IPPROTO_TCP, TCP_CORK, &on,
			 sizeof(on));
}

/* iscsi_service(@s, @revents) (0 or -1), its writes corked */
static int service(struct sess *s, int revents)
{
	bool corked = (revents & POLLOUT) && iscsi_out_queue_length(s->iscsi);
	int rc;

	if (corked)
		cork(s, 1);
	rc = iscsi_service(s->iscsi, revents);
	if (corked)
		cork(s, 0);
	return rc;
}

/* What answers freed, queued again and written out at once: waiting
 * for the next poll to say that the socket takes it would add a round
 * of the loop (about 15 of 82 us at QD1) to every command */
static void refill(struct sess *s)
{
	fill(s);
	for (int i = 0; i < 8 && !s->dead && iscsi_out_queue_length(s->iscsi) &&
	     (iscsi_which_events(s->iscsi) & POLLOUT); i++)
		if (service(s, POLLOUT) < 0)
			return;		/* the next pump says so */
	note_sent(s);
}

/* Send again the commands of @s whose backoff is over; the earliest
 * backoff still running into *@next (ns; kept when later) */
static void retry_due(struct sess *s, uint64_t now, uint64_t *next)
{
	struct run *rn = s->run;

	for (unsigned int k = 0; rn->retry_waiting && k < rn->p->qd; k++) {
		struct op *op = &s->slots[k];

		if (!op->retry_at)
			continue;
		if (op->retry_at > now) {
			*next = *next && *next < op->retry_at ? *next :
				op->retry_at;
			continue;
		}
		op->retry_at = 0;
		rn->retry_waiting--;
		resubmit(op);
	}
}

/* The earliest arrival still to send of a session that could send it
 * (a free slot, a free block), ns; 0 none: the open loop's deadline for
 * poll */
static uint64_t next_arrival(struct run *rn)
{
	uint64_t next = 0;

	for (unsigned int i = 0; i < rn->nsess; i++) {
		struct sess *s = &rn->s[i];
		const struct pacer *pc = &rn->pace[i];

		if (!pc->on || !s->nfree || s->starved ||
		    pc->next_ns >= rn->t_stop || !due(s, now_ns()))
			continue;
		if (!next || pc->next_ns < next)
			next = pc->next_ns;
	}
	return next;
}

/* the commands in flight, all sessions */
static unsigned int inflight(const struct run *rn)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < rn->nsess; i++)
		n += rn->s[i].dead ? 0 : rn->s[i].inflight;
	return n;
}

/* Commands in flight, or for an open loop with none in flight, 1 while
 * arrivals are still to come (0: the run is over) */
static unsigned int pump(struct run *rn)
{
	struct pollfd pfd[MAX_SESSIONS];
	unsigned int busy = 0;
	uint64_t next_retry = 0, next_in;
	struct timespec ts;
	int ms;

	for (unsigned int i = 0; i < rn->nsess; i++) {
		struct sess *s = &rn->s[i];

		if (!s->dead)
			retry_due(s, now_ns(), &next_retry);
		fill(s);
		end_flush(s);
		/* done: nothing in flight and nothing more due (with none in
		 * flight it may only have found no free block, --verify) */
		if (!s->inflight && !s->done_ns && !due(s, now_ns()))
			s->done_ns = now_ns();
		pfd[i].fd = s->dead ? -1 : iscsi_get_fd(s->iscsi);
		pfd[i].events = s->dead ? 0 : (short)iscsi_which_events(s->iscsi);
		busy += s->dead ? 0 : s->inflight;
	}
	next_in = next_arrival(rn);
	if (!busy && !next_in)
		return 0;
	ms = wait_ms(rn);
	if (next_retry) {	/* no later than the first backoff's end */
		uint64_t now = now_ns();
		int retry_ms = next_retry <= now ? 0 :
			       (int)((next_retry - now + 999999) / 1000000);

		ms = retry_ms < ms ? retry_ms : ms;
	}
	/* open loop: wake at the next arrival, to the microsecond (poll's
	 * milliseconds would send every one up to 1 ms late) */
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	if (next_in) {
		uint64_t now = now_ns();
		uint64_t left = next_in > now ? next_in - now : 0;

		if (left < (uint64_t)ms * 1000000) {
			ts.tv_sec = (time_t)(left / 1000000000);
			ts.tv_nsec = (long)(left % 1000000000);
		}
	}
	if (ppoll(pfd, rn->nsess, &ts, NULL) < 0 && errno != EINTR)
		return 0;
	for (unsigned int i = 0; i < rn->nsess; i++) {
		struct sess *s = &rn->s[i];

		if (!s->dead && service(s, pfd[i].revents) < 0) {
			fprintf(stderr, PROG ": session %u: connection failed: %s\n",
				i, iscsi_get_error(s->iscsi));
			s->dead = true;
			rn->r->errors += s->inflight;
			rn->r->unanswered += s->inflight;
		}
		if (!s->dead)
			refill(s);
	}
	return busy ? busy : 1;
}

static void loop(struct run *rn)
{
	for (;;) {
		uint64_t now = now_ns();
		unsigned int busy;

		if (rn->at_measure.syncs == -2 && now >= rn->t_measure)
			syncguard_target_sample(rn->ti->target, rn->s[0].lun,
						&rn->at_measure);
		busy = pump(rn);
		if (syncguard_interrupted && now < rn->t_stop)
			rn->t_stop = now;
		/* an open loop between arrivals, nothing in flight: nothing
		 * is owed, and --timeout counts from the next command */
		if (!inflight(rn))
			rn->last_progress = now_ns();
		tick(rn, now_ns());
		if (!busy)
			break;
		if (give_up(rn, now)) {
			busy = inflight(rn);
			fprintf(stderr, PROG ": %u command(s) still unanswered; "
				"giving up\n", busy);
			rn->r->unanswered += busy;
			rn->r->errors += busy;
			break;
		}
	}
	/* the last, partial interval (its operations are in the totals),
	 * unless it is a sliver of the drain after a full one */
	uint64_t end = now_ns();

	if (interval_s(rn) > 0 && rn->iv_ops &&
	    end - rn->last_iv >= (uint64_t)(interval_s(rn) * 1e8))
		emit_interval(rn, end);
	if (rn->c->progress)
		fputc('\n', stderr);
}

/* ---- sessions ---- */

static int no_memory(const struct run_params *p)
{
	fprintf(stderr, PROG ": cannot allocate %u buffers of %" PRIu64
		" bytes\n", p->qd, p->xfer);
	return -1;
}

/* The bytes from the LUN's start a point's commands go to: the preset's
 * own (iozone's files), else --span, else the whole LUN */
static uint64_t point_span(const struct config *c, const struct target_info *ti,
			   const struct run_params *p)
{
	return p->span ? p->span : c->span ? c->span :
	       ti->blocks * ti->block_size;
}

/* @len bytes of xorshift64 output from @seed: write data that does not
 * compress (a compressing backend, such as a zvol with compression on,
 * would flatter a repeating pattern) */
static void fill_random(uint8_t *buf, uint64_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1, v = 0;

	for (uint64_t b = 0; b < len; b++) {
		if (!(b % 8))
			v = xorshift64(&x);
		buf[b] = (uint8_t)(v >> (8 * (b % 8)));
	}
}

/*
 * A session's part of a split span of @span bytes among @nsess sessions,
 * in bytes: an equal share, cut down to a multiple of the LUN's physical
 * block, so that every part starts on one (else, with 3 sessions on a
 * 4 KiB-physical LUN, two parts would start 1 and 2 KiB into a physical
 * block, and every aligned-looking write of theirs would straddle two).
 */
static uint64_t split_part(const struct target_info *ti, uint64_t span,
			   unsigned int nsess)
{
	uint64_t unit = ti->phys_block_size > ti->block_size ?
			ti->phys_block_size : ti->block_size;

	return span / nsess / unit * unit;
}

static int open_session(struct run *rn, struct sess *s, unsigned int i,
			uint64_t span_blocks)
{
	const struct run_params *p = rn->p;
	uint64_t xfer_blocks = p->xfer / rn->ti->block_size;
	uint64_t part = split_part(rn->ti, span_blocks * rn->ti->block_size,
				   rn->nsess) / rn->ti->block_size;
	bool split = rn->c->split_span || p->split;

	s->run = rn;
	s->idx = i;
	s->base = split ? i * part : 0;
	s->blocks = split ? part : span_blocks;
	s->cursor = split ? 0 :
		    (i * part) / xfer_blocks * xfer_blocks % s->blocks;
	s->slots = calloc(p->qd, sizeof(*s->slots));
	s->free = calloc(p->qd, sizeof(*s->free));
	if (!s->slots || !s->free || posix_memalign((void **)&s->rbuf, 4096,
						      p->xfer))
		return no_memory(p);
	for (unsigned int k = 0; k < p->qd; k++) {
		struct op *op = &s->slots[k];

		op->s = s;
		if (posix_memalign((void **)&op->buf, 4096, p->xfer))
			return no_memory(p);
		fill_random(op->buf, p->xfer, rn->c->seed + i * 1024 + k);
		s->free[s->nfree++] = op;
	}
	s->iscsi = syncguard_target_login(rn->c, &s->lun, NULL, 0);
	return s->iscsi ? 0 : -1;
}

static void close_session(struct sess *s, bool clean)
{
	if (s->iscsi) {
		if (clean && !s->dead)
			SYNCGUARD_HELD(iscsi_logout_sync(s->iscsi));
		iscsi_destroy_context(s->iscsi);
	}
	for (unsigned int k = 0; s->slots && k < s->run->p->qd; k++)
		free(s->slots[k].buf);
	free(s->slots);
	free(s->free);
	free(s->rbuf);
}

/* Device syncs per operation from the target's counters, when they are
 * this run's: the file of that name counted the commands the run sent,
 * give or take what was in flight at either end and the retries.  One
 * that counted fewer belongs to another tgtd exporting the same target
 * name; one that counted more (by over 10%) also served other load, its
 * own or another tgtd's: either way it says nothing of this run. */
static void flushes_per_op(struct run *rn, struct result *r)
{
	const struct target_sample *b = &rn->at_measure;
	struct target_sample a;
	double sent = (double)(r->reads + r->writes + r->flushes);
	double edge = 2.0 * rn->p->qd * rn->nsess, counted;

	syncguard_target_sample(rn->ti->target, rn->s[0].lun, &a);
	counted = a.commands - b->commands;
	if (b->syncs < 0 || a.syncs < b->syncs || !r->ops ||
	    counted < sent - edge ||
	    counted > 1.1 * sent + edge + (double)r->retries) {
		r->target_writes[0] = r->target_batching[0] = '\0';
		r->target_sync_loop[0] = r->target_engine[0] = '\0';
		return;
	}
	r->flushes_per_op = (a.syncs - b->syncs) / (double)r->ops;
	syncguard_target_ways(rn->ti->target, rn->s[0].lun, r);
}

bool syncguard_point_writes(const struct config *c, const struct run_params *p)
{
	return c->verify || (p->read_pct < 100 && p->sync != SYNC_FLUSH_ONLY);
}

const char *syncguard_point_problem(const struct config *c, const struct target_info *ti,
				    const struct run_params *p)
{
	static char msg[200];
	uint64_t lun_bytes = ti->blocks * ti->block_size;
	uint64_t span = point_span(c, ti, p);
	unsigned int nsess = p->sessions ? p->sessions : c->sessions;
	bool split = c->split_span || p->split;

	if (p->xfer % ti->block_size)
		snprintf(msg, sizeof(msg), "--block-size %" PRIu64 " is not a "
			 "multiple of the LUN's %u-byte logical block", p->xfer,
			 ti->block_size);
	else if (ti->max_transfer && p->xfer / ti->block_size > ti->max_transfer)
		snprintf(msg, sizeof(msg), "--block-size %" PRIu64 " exceeds the "
			 "LUN's MAXIMUM TRANSFER LENGTH (%u blocks)", p->xfer,
			 ti->max_transfer);
	else if (span > lun_bytes)
		snprintf(msg, sizeof(msg), "--span %" PRIu64 " is larger than the "
			 "LUN (%" PRIu64 " bytes)", span, lun_bytes);
	else if (span % ti->block_size)	/* else cut down, silently */
		snprintf(msg, sizeof(msg), "--span %" PRIu64 " is not a multiple "
			 "of the LUN's %u-byte logical block", span,
			 ti->block_size);
	else if ((split ? split_part(ti, span, nsess) : span) < p->xfer)
		snprintf(msg, sizeof(msg), "%s (%" PRIu64 " bytes) cannot hold "
			 "one command of %" PRIu64 " bytes", split ?
			 "each session's part of the span" : "the span",
			 split ? split_part(ti, span, nsess) : span, p->xfer);
	else if (p->bytes && p->bytes < p->xfer)
		snprintf(msg, sizeof(msg), "--bytes %" PRIu64 " is less than one "
			 "command of %" PRIu64 " bytes", p->bytes, p->xfer);
	else if (ti->write_protected && syncguard_point_writes(c, p))
		snprintf(msg, sizeof(msg), "the LUN is write protected (WP=1 in "
			 "MODE SENSE): only reads (--read-pct 100) or --sync "
			 "flush-only can run");
	else if (c->warmup > 0 && p->bytes)	/* a preset's --bytes point */
		snprintf(msg, sizeof(msg), "--warmup goes with timed runs: this "
			 "point moves %" PRIu64 " bytes, which the warm-up would "
			 "use up", p->bytes);
	else
		return NULL;
	return msg;
}

static void summarize(struct run *rn, uint64_t end)
{
	struct result *r = rn->r;

	r->seconds = end > rn->t_measure ? (double)(end - rn->t_measure) / 1e9 : 0;
	r->iops = r->seconds > 0 ? (double)r->ops / r->seconds : 0;
	r->mbps = r->seconds > 0 ? (double)r->bytes / r->seconds / 1e6 : 0;
	r->nsess = rn->nsess;
	for (unsigned int i = 0; i < rn->nsess; i++) {
		uint64_t done = rn->s[i].done_ns ? rn->s[i].done_ns : end;
		double secs = done > rn->t_measure ?
			      (double)(done - rn->t_measure) / 1e9 : 0;

		/* a session that finished its --bytes early is rated on its
		 * own time, as iozone rates each process */
		r->sess[i] = rn->s[i].res;
		r->sess[i].iops = secs > 0 ? (double)r->sess[i].ops / secs : 0;
	}
	r->interrupted = syncguard_interrupted;
}

/* --verify keeps a second write off a block until the first is
 * answered: on a small span the queue runs below its depth, which the
 * result (labelled with the depth asked for) must not hide.
 * The depth reached is Little's: commands per second x mean latency. */
static void note_starved(const struct run *rn, const struct result *r)
{
	double want = (double)rn->p->qd * rn->nsess;
	double got = r->iops * syncguard_hist_mean(&r->hist) / 1e9;

	if (!rn->starved || !r->ops || got >= 0.9 * want)
		return;
	fprintf(stderr, PROG ": verify: the queue ran at %.1f commands in "
		"flight of %.0f (a block is not written again while a write "
		"to it is in flight; a larger --span keeps the queue full)\n",
		got, want);
}

/* Say so when --bytes is more than a session's part of the span: its
 * writes wrap and rewrite it (iozone's files of that size would not). */
static void note_wrap(const struct config *c, const struct target_info *ti,
		      const struct run_params *p, unsigned int nsess)
{
	uint64_t span = point_span(c, ti, p);
	bool split = c->split_span || p->split;
	uint64_t part = split ? split_part(ti, span, nsess) : span;

	if (p->bytes > part && part)
		fprintf(stderr, PROG ": note: each session moves %" PRIu64
			" bytes within %s of %" PRIu64 " bytes: it wraps, "
			"%.1f times over\n", p->bytes, split ?
			"its part of the span" : "the span", part,
			(double)p->bytes / (double)part);
}

/* The random offsets' generator state for the next point of this run:
 * each point of a sweep (-q 1,32, a --curve's steps) draws its own, or
 * each would re-read, from the page cache, what the point before it had
 * just read or written (tests/syncbench.sh, "each point of a sweep").
 * The first point's depends on the seed alone, so --seed N repeats a
 * single-point run's offsets. */
static uint64_t point_rng(uint64_t seed)
{
	static uint64_t points;		/* points run by this process */
	uint64_t x = (seed * 0x9e3779b97f4a7c15ull + 1) ^
		     (points++ * 0xbf58476d1ce4e5b9ull);

	return x ? x : 1;		/* xorshift64's one bad state */
}

/* A slice of --start-at's wait, up to @ms: what the target sends the
 * idle sessions is answered (a NOP-In left unanswered drops them) */
static void serve_idle(void *arg, int ms)
{
	struct run *rn = arg;
	struct pollfd pfd[MAX_SESSIONS];

	for (unsigned int i = 0; i < rn->nsess; i++) {
		pfd[i].fd = iscsi_get_fd(rn->s[i].iscsi);
		pfd[i].events = (short)iscsi_which_events(rn->s[i].iscsi);
		pfd[i].revents = 0;
	}
	if (poll(pfd, rn->nsess, ms) <= 0)
		return;
	for (unsigned int i = 0; i < rn->nsess; i++)
		if (pfd[i].revents)
			iscsi_service(rn->s[i].iscsi, pfd[i].revents);
}

/* The unit attentions the sessions collected while they waited (tgt
 * keeps one per LUN added or deleted on the target meanwhile, more than
 * an operation's retries): taken by TEST UNIT READY before the clock
 * starts (tests/proto check_modes.c, test_modes_ring_shared) */
static void clear_attentions(struct run *rn)
{
	for (unsigned int i = 0; i < rn->nsess; i++) {
		for (int k = 0; k < 256; k++) {
			struct scsi_task *t = SYNCGUARD_HELD(
				iscsi_testunitready_sync(rn->s[i].iscsi,
							 rn->s[i].lun));
			bool ua = t && t->status == SCSI_STATUS_CHECK_CONDITION &&
				  t->sense.key == SCSI_SENSE_UNIT_ATTENTION;

			if (t)
				scsi_free_scsi_task(t);
			if (!ua)
				break;
		}
	}
}

/* This process's CPU and faults since @ru0, over @ns of the point */
static void note_rusage(struct result *r, const struct rusage *ru0,
			uint64_t ns)
{
	struct rusage ru;
	double us = (double)ns / 1e3;

	if (getrusage(RUSAGE_SELF, &ru) || us <= 0)
		return;
	r->usr_cpu = ((double)(ru.ru_utime.tv_sec - ru0->ru_utime.tv_sec) * 1e6 +
		      (double)(ru.ru_utime.tv_usec - ru0->ru_utime.tv_usec)) /
		     us * 100;
	r->sys_cpu = ((double)(ru.ru_stime.tv_sec - ru0->ru_stime.tv_sec) * 1e6 +
		      (double)(ru.ru_stime.tv_usec - ru0->ru_stime.tv_usec)) /
		     us * 100;
	r->ctx = (uint64_t)((ru.ru_nvcsw - ru0->ru_nvcsw) +
			    (ru.ru_nivcsw - ru0->ru_nivcsw));
	r->majf = (uint64_t)(ru.ru_majflt - ru0->ru_majflt);
	r->minf = (uint64_t)(ru.ru_minflt - ru0->ru_minflt);
}

/* A number no other point of any run writes: the clock, this process
 * and its count of points */
static uint64_t point_nonce(void)
{
	static uint64_t points;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
	       ((uint64_t)getpid() << 40) ^ (++points << 32);
}

int syncguard_run_point(const struct config *c, const struct target_info *ti,
			const struct run_params *p, struct result *r)
{
	struct rusage ru0;
	struct run rn = { .c = c, .ti = ti, .p = p, .r = r,
			  .nsess = p->sessions ? p->sessions : c->sessions,
			  .rng = point_rng(c->seed), .nonce = point_nonce() };
	uint64_t span_blocks = point_span(c, ti, p) /
			       ti->block_size;
	const char *why = syncguard_point_problem(c, ti, p);
	int ret = why ? -2 : 0;

	if (why)
		fprintf(stderr, PROG ": %s\n", why);
	else
		note_wrap(c, ti, p, rn.nsess);
	memset(r, 0, sizeof(*r));
	r->p = *p;
	r->flushes_per_op = -1;
	syncguard_hist_init(&r->hist);
	syncguard_hist_init(&r->retried_hist);
	for (int k = 0; k < SYNCGUARD_NCMD; k++)
		syncguard_hist_init(&r->cmd_hist[k]);
	syncguard_hist_init(&rn.iv_hist);
	if (!ret && c->verify && !(rn.vmap = syncguard_verify_map_new(span_blocks,
							     &rn.busy)))
		ret = -2;
	for (unsigned int i = 0; !ret && i < rn.nsess; i++)
		ret = open_session(&rn, &rn.s[i], i, span_blocks);
	if (!ret && syncguard_start_wait(c, serve_idle, &rn))
		clear_attentions(&rn);
	if (!ret && syncguard_interrupted)
		ret = -1;	/* Ctrl-C in the wait: no result */
	if (!ret) {
		rn.at_measure.syncs = -2;
		getrusage(RUSAGE_SELF, &ru0);
		rn.t0 = rn.last_tick = rn.last_progress = now_ns();
		rn.t_measure = rn.last_iv = rn.t0 + (uint64_t)(c->warmup * 1e9);
		rn.next_iv = rn.t_measure + (uint64_t)(interval_s(&rn) * 1e9);
		rn.t_stop = p->bytes ? UINT64_MAX / 2 :
			    rn.t_measure + (uint64_t)(p->seconds * 1e9);
		for (unsigned int i = 0; i < rn.nsess; i++)
			syncguard_pacer_init(&rn.pace[i], p, i, rn.nsess, rn.t0,
					     rn.t_measure, c->seed);
		loop(&rn);
		/* rated until the last answer counted, or, for a target
		 * that stopped answering, until it went quiet (its last
		 * commands hung, or libiscsi failed them: timed out) */
		uint64_t end = now_ns();

		r->gone = r->unanswered || rn.unheard;
		if (r->gone)
			end = rn.last_progress;
		/* an open loop is rated over its schedule, not up to its
		 * last answer: --rate 0.5 -t 2 sends one operation in 2 s,
		 * 0.5 IOPS, however fast it was answered */
		else if (p->rate > 0 && !syncguard_interrupted &&
			 end < rn.t_stop)
			end = rn.t_stop;
		summarize(&rn, end);
		note_rusage(r, &ru0, end - rn.t0);
		syncguard_pacer_summarize(rn.pace, rn.nsess, rn.t_stop, r);
		note_starved(&rn, r);
		flushes_per_op(&rn, r);
		if (rn.vmap && (r->gone || rn.s[0].dead)) {
			fprintf(stderr, PROG ": verify: skipped, the target "
				"stopped answering\n");
			ret = -1;
		} else if (rn.vmap) {
			/* a target that dies now fails the READs: libiscsi's
			 * reconnect would retry them for ever */
			iscsi_set_noautoreconnect(rn.s[0].iscsi, 1);
			ret = syncguard_verify_readback(rn.vmap, rn.s[0].iscsi, rn.s[0].lun,
							ti, c->state, r);
			r->verify_ran = true;
			r->verify_complete = !ret;
		}
		/* it holds what a complete read-back found: when none is
		 * written (a cut-short run), say so */
		if (ret && rn.vmap && c->state)
			fprintf(stderr, PROG ": verify: %s not saved: the "
				"read-back did not complete (to check a LUN "
				"after a power cut, use iscsi-crashtest)\n",
				c->state);
	}
	rn.closing = true;
	for (unsigned int i = 0; i < rn.nsess; i++)
		close_session(&rn.s[i], !r->gone);
	syncguard_verify_map_free(rn.vmap, rn.busy);
	return ret;
}
