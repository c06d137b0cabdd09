/*
 * iscsi-crashtest: the workload and the checker of the power-cut test.
 *
 *   iscsi-crashtest run --journal FILE [options] URL
 *     Several sessions, each with several commands in flight, issue a
 *     random mix of plain writes, FUA writes and SYNCHRONIZE CACHE until
 *     every connection is gone (the target was killed) or --time ends.
 *     Every logical block written carries its LBA, the write's id and a
 *     checksum.  The journal records, per command, when it was issued
 *     and acknowledged on one logical clock, and the WCE bit the LUN
 *     reported: enough to know what the mode contract promised for each
 *     write at any instant.
 *
 *   iscsi-crashtest sync --journal FILE URL
 *     After a restart (tgtd killed and started again, no power lost):
 *     what a new LUN promises for the old one's writes.  It reads WCE:
 *     0 promises everything acknowledged before is durable (the mode
 *     contract: WCE=0 is never reported over volatile data); 1 sends
 *     one SYNCHRONIZE CACHE(10).  Appends that as a SYNCHRONIZE CACHE
 *     to the journal, issued after every command in it, with the
 *     answer (GOOD for a WCE=0 report), so check judges by it.
 *
 *   iscsi-crashtest check --journal FILE URL
 *     Reads every block back and checks the contract: a write that was
 *     durable when the power went (acknowledged with WCE=0; or FUA; or
 *     followed by a SYNCHRONIZE CACHE issued after its acknowledgement
 *     and answered GOOD) must still be there, or a later write to the
 *     same block; every block holds zeroes (never written) or exactly
 *     what one write to it wrote, never a torn or foreign block.
 *     Prints one line: durable writes checked, lost writes, bad blocks.
 *
 * No two writes in flight overlap, so the writes to one block are
 * totally ordered and "later" is well defined.
 * Exit status: 0 contract held, 1 losses or bad blocks or I/O failure,
 * 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "toolutil.h"

#define PROG "iscsi-crashtest"
#define MAX_SESSIONS 64
#define MAGIC 0x3154534852434753ull	/* "SGCRSHT1" */
#define ID_BITS 40			/* write id; run id above it */

struct cfg {
	const char *url, *journal;
	bool all_acked;		/* check: no power was lost */
	bool alternate;		/* run: write, SYNCHRONIZE CACHE, write ... */
	unsigned int sessions, qd, max_blocks, fua_pct, sync_pct;
	double seconds;
	uint64_t seed;
};

/* One command of the workload, as the journal records it. */
struct rec {
	char kind;		/* 'W' write, 'S' SYNCHRONIZE CACHE */
	bool fua;
	unsigned int session;
	uint64_t id, lba;
	uint32_t n;		/* blocks */
	uint64_t issued, acked;	/* logical clock; acked 0 = never */
	int status;		/* SCSI status, -1 = never answered */
};

struct session {
	struct iscsi_context *iscsi;
	int lun;
	unsigned int inflight;
	bool dead;
	bool sync_next;		/* --alternate: a SYNCHRONIZE CACHE is due */
};

struct run {
	struct cfg cfg;
	struct session s[MAX_SESSIONS];
	uint32_t bs;
	uint64_t blocks;
	int wce;
	uint8_t *busy;		/* per block: a write in flight */
	struct rec *recs;
	size_t nrecs, cap;
	uint64_t clock, rng;
	uint64_t deadline_ns;
	uint32_t run_id;	/* 24 bits, in every block: tells this run's
				 * writes from an earlier run's on the LUN */
};

struct pending {
	struct run *r;
	size_t rec;
	uint8_t *buf;
};

static volatile sig_atomic_t stop;

/* ---- the block format ---- */

struct blkhdr {
	uint64_t magic, lba, id, csum;
};

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t block_sum(const uint8_t *b, uint32_t bs)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < bs; i++) {
		uint8_t c = (i >= 24 && i < 32) ? 0 : b[i];	/* csum field */

		h = (h ^ c) * 0x100000001b3ull;
	}
	return h;
}

static void make_block(uint8_t *b, uint32_t bs, uint64_t lba, uint64_t id)
{
	struct blkhdr h = { MAGIC, lba, id, 0 };
	uint64_t x = mix(id ^ (lba << 20));

	for (uint32_t i = sizeof(h); i < bs; i += 8) {
		x = mix(x);
		memcpy(b + i, &x, bs - i < 8 ? bs - i : 8);
	}
	memcpy(b, &h, sizeof(h));
	h.csum = block_sum(b, bs);
	memcpy(b, &h, sizeof(h));
}

/* Write id a block holds: 0 all zeroes, UINT64_MAX not a valid block
 * for @lba (torn, garbage or misplaced). */
static uint64_t block_id(const uint8_t *b, uint32_t bs, uint64_t lba)
{
	struct blkhdr h;
	uint32_t i;

	for (i = 0; i < bs && !b[i]; i++)
		;
	if (i == bs)
		return 0;
	memcpy(&h, b, sizeof(h));
	if (h.magic != MAGIC || h.lba != lba || h.csum != block_sum(b, bs))
		return UINT64_MAX;
	return h.id;
}

/* ---- shared set-up ---- */

static struct iscsi_context *login(const char *url_s, int *lun)
{
	struct iscsi_context *iscsi = iscsi_create_context(
		"iqn.2026-11.org.syncguard:crashtest");
	struct iscsi_url *url;

	if (!iscsi)
		return NULL;
	url = iscsi_parse_full_url(iscsi, url_s);
	if (!url) {
		fprintf(stderr, PROG ": %s: %s\n", url_s, iscsi_get_error(iscsi));
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	iscsi_set_targetname(iscsi, url->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_noautoreconnect(iscsi, 1);	/* a cut is final */
	*lun = url->lun;
	if (iscsi_full_connect_sync(iscsi, url->portal, url->lun)) {
		fprintf(stderr, PROG ": login to %s: %s\n", url_s,
			iscsi_get_error(iscsi));
		iscsi_destroy_url(url);
		iscsi_destroy_context(iscsi);
		return NULL;
	}
	iscsi_destroy_url(url);
	return iscsi;
}

static int lun_geometry(struct iscsi_context *iscsi, int lun, uint32_t *bs,
			uint64_t *blocks, int *wce)
{
	struct scsi_task *t = iscsi_readcapacity16_sync(iscsi, lun);
	struct scsi_readcapacity16 *rc;
	struct scsi_mode_sense *ms;
	struct scsi_mode_page *pg;

	if (!t || t->status || !(rc = scsi_datain_unmarshall(t))) {
		if (t)
			scsi_free_scsi_task(t);
		return -1;
	}
	*bs = rc->block_length;
	*blocks = rc->returned_lba + 1;
	scsi_free_scsi_task(t);
	*wce = -1;
	t = iscsi_modesense10_sync(iscsi, lun, 0, 1, SCSI_MODESENSE_PC_CURRENT,
				   SCSI_MODEPAGE_CACHING, 0, 255);
	if (t && !t->status && (ms = scsi_datain_unmarshall(t)) &&
	    (pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0)))
		*wce = pg->caching.wce;
	if (t)
		scsi_free_scsi_task(t);
	return *wce < 0 || *bs < sizeof(struct blkhdr) ? -1 : 0;
}

/* lun_geometry, tried for up to 5 s: a target taken offline for a moment
 * (scripts/lifecycle.sh does, while 64 sessions log in) answers NOT
 * READY meanwhile, and a run that starts then must not fail for it. */
static int lun_geometry_retry(struct iscsi_context *iscsi, int lun,
			      uint32_t *bs, uint64_t *blocks, int *wce)
{
	struct timespec pause = { 0, 100 * 1000 * 1000 };

	for (int i = 0; i < 50; i++) {
		if (!lun_geometry(iscsi, lun, bs, blocks, wce))
			return 0;
		nanosleep(&pause, NULL);
	}
	return -1;
}

/* ---- run: the workload ---- */

static uint64_t rnd(struct run *r)
{
	return xorshift64(&r->rng);
}

static struct rec *new_rec(struct run *r, char kind, unsigned int sess)
{
	struct rec *x;

	if (r->nrecs == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 4096;
		struct rec *n = realloc(r->recs, cap * sizeof(*n));

		if (!n)
			return NULL;
		r->recs = n;
		r->cap = cap;
	}
	x = &r->recs[r->nrecs++];
	*x = (struct rec){ .kind = kind, .session = sess, .id = r->nrecs,
			   .issued = ++r->clock, .status = -1 };
	return x;
}

static void done_cb(struct iscsi_context *iscsi, int status, void *data,
		    void *priv)
{
	struct pending *p = priv;
	struct rec *x = &p->r->recs[p->rec];

	(void)iscsi;
	x->acked = ++p->r->clock;
	x->status = status;
	if (x->kind == 'W')
		memset(p->r->busy + x->lba, 0, x->n);
	p->r->s[x->session].inflight--;
	if (data)
		scsi_free_scsi_task(data);
	free(p->buf);
	free(p);
}

/* A free run of 1..max_blocks blocks, or -1 after a few tries. */
static int64_t pick_range(struct run *r, uint32_t *n)
{
	for (int tries = 0; tries < 8; tries++) {
		uint64_t lba = rnd(r) % r->blocks;
		uint32_t want = 1 + (uint32_t)(rnd(r) % r->cfg.max_blocks), k;

		if (lba + want > r->blocks)
			want = (uint32_t)(r->blocks - lba);
		for (k = 0; k < want && !r->busy[lba + k]; k++)
			;
		if (k == want) {
			*n = want;
			return (int64_t)lba;
		}
	}
	return -1;
}

static int submit_write(struct run *r, unsigned int si, struct pending *p)
{
	struct session *s = &r->s[si];
	uint32_t n;
	int64_t lba = pick_range(r, &n);
	struct rec *x;

	if (lba < 0)
		return 1;	/* all busy here: try a flush instead */
	x = new_rec(r, 'W', si);
	p->buf = x ? malloc((size_t)n * r->bs) : NULL;
	if (!p->buf)
		return -1;
	x->lba = (uint64_t)lba;
	x->n = n;
	x->fua = rnd(r) % 100 < r->cfg.fua_pct;
	for (uint32_t k = 0; k < n; k++)
		make_block(p->buf + (size_t)k * r->bs, r->bs, x->lba + k,
			   (uint64_t)r->run_id << ID_BITS | x->id);
	memset(r->busy + x->lba, 1, n);
	p->rec = r->nrecs - 1;
	return iscsi_write16_task(s->iscsi, s->lun, x->lba, p->buf, n * r->bs,
				  (int)r->bs, 0, 0, x->fua, 0, 0, done_cb, p) ?
	       0 : -1;
}

static int submit_one(struct run *r, unsigned int si)
{
	struct pending *p = calloc(1, sizeof(*p));
	struct session *s = &r->s[si];
	int ret = 1;

	if (!p)
		return -1;
	p->r = r;
	if (r->cfg.alternate ? !s->sync_next : rnd(r) % 100 >= r->cfg.sync_pct)
		ret = submit_write(r, si, p);
	s->sync_next = r->cfg.alternate && ret == 0;
	if (ret == 1) {
		struct rec *x = new_rec(r, 'S', si);

		p->rec = r->nrecs - 1;
		ret = x && iscsi_synchronizecache16_task(s->iscsi, s->lun, 0, 0,
			0, 0, done_cb, p) ? 0 : -1;
	}
	if (ret) {
		free(p->buf);
		free(p);
		return -1;
	}
	s->inflight++;
	return 0;
}

static int poll_sessions(struct run *r)
{
	struct pollfd pfd[MAX_SESSIONS];
	unsigned int alive = 0;

	for (unsigned int i = 0; i < r->cfg.sessions; i++) {
		struct session *s = &r->s[i];

		while (!s->dead && !stop && now_ns() < r->deadline_ns &&
		       s->inflight < r->cfg.qd)
			if (submit_one(r, i))
				s->dead = true;
		pfd[i].fd = s->dead ? -1 : iscsi_get_fd(s->iscsi);
		pfd[i].events = s->dead ? 0 : (short)iscsi_which_events(s->iscsi);
		alive += !s->dead && s->inflight;
	}
	if (!alive)
		return 0;
	/* commands a target dropped (e.g. while offline) never come back:
	 * give up on them 10 s after the run's end */
	if (now_ns() > r->deadline_ns + 10000000000ull)
		return 0;
	if (poll(pfd, r->cfg.sessions, 100) < 0 && errno != EINTR)
		return -1;
	for (unsigned int i = 0; i < r->cfg.sessions; i++)
		if (!r->s[i].dead &&
		    iscsi_service(r->s[i].iscsi, pfd[i].revents) < 0)
			r->s[i].dead = true;	/* the target is gone */
	return 1;
}

static int write_journal(const struct run *r)
{
	FILE *f = fopen(r->cfg.journal, "w");

	if (!f) {
		fprintf(stderr, PROG ": %s: %s\n", r->cfg.journal, strerror(errno));
		return -1;
	}
	fprintf(f, "# syncguard-crashtest 1 block_size %u blocks %" PRIu64
		" wce %d run %u\n", r->bs, r->blocks, r->wce, r->run_id);
	for (size_t i = 0; i < r->nrecs; i++) {
		const struct rec *x = &r->recs[i];

		fprintf(f, "%c %" PRIu64 " %u %" PRIu64 " %u %d %" PRIu64 " %"
			PRIu64 " %d\n", x->kind, x->id, x->session, x->lba, x->n,
			x->fua, x->issued, x->acked, x->status);
	}
	return fclose(f) ? -1 : 0;
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int cmd_run(struct run *r)
{
	unsigned int i;

	for (i = 0; i < r->cfg.sessions; i++) {
		r->s[i].iscsi = login(r->cfg.url, &r->s[i].lun);
		if (!r->s[i].iscsi)
			return 1;
	}
	if (lun_geometry_retry(r->s[0].iscsi, r->s[0].lun, &r->bs, &r->blocks,
			       &r->wce)) {
		fprintf(stderr, PROG ": cannot read capacity and WCE\n");
		return 1;
	}
	r->busy = calloc(r->blocks, 1);
	if (!r->busy)
		return 1;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	r->deadline_ns = now_ns() + (uint64_t)(r->cfg.seconds * 1e9);
	r->run_id = (uint32_t)(mix(now_ns() ^ r->cfg.seed) % 0xffffff) + 1;
	while (poll_sessions(r) > 0)
		;
	return write_journal(r) ? 1 : 0;
}

/* ---- check: the oracle ---- */

struct journal {
	uint32_t bs;
	uint64_t blocks;
	int wce;
	struct rec *w;		/* writes only, in issue order */
	size_t nw;
	uint64_t last_sync;	/* issue clock of the last GOOD SYNCHRONIZE CACHE */
	uint64_t max_id;
	uint64_t clock;		/* the latest clock, issued or acknowledged */
	bool all_acked;		/* every GOOD write must be there */
	uint32_t run_id;
};

static int read_journal(const char *path, struct journal *j)
{
	FILE *f = fopen(path, "r");
	struct rec x;
	size_t cap = 0;
	int fua;

	if (!f || fscanf(f, "# syncguard-crashtest 1 block_size %u blocks %"
			 SCNu64 " wce %d run %u\n", &j->bs, &j->blocks, &j->wce,
			 &j->run_id) != 4) {
		fprintf(stderr, PROG ": %s: not a crashtest journal\n", path);
		return -1;
	}
	while (fscanf(f, " %c %" SCNu64 " %u %" SCNu64 " %u %d %" SCNu64 " %"
		      SCNu64 " %d", &x.kind, &x.id, &x.session, &x.lba, &x.n,
		      &fua, &x.issued, &x.acked, &x.status) == 9) {
		x.fua = fua;
		if (x.id > j->max_id)
			j->max_id = x.id;
		if (x.issued > j->clock)
			j->clock = x.issued;
		if (x.acked > j->clock)
			j->clock = x.acked;
		if (x.kind == 'S' && x.status == 0 && x.issued > j->last_sync)
			j->last_sync = x.issued;
		if (x.kind != 'W')
			continue;
		if (j->nw == cap) {
			cap = cap ? cap * 2 : 4096;
			j->w = realloc(j->w, cap * sizeof(*j->w));
			if (!j->w)
				return -1;
		}
		j->w[j->nw++] = x;
	}
	fclose(f);
	return 0;
}

/* Was write @x durable by the contract when the power went? */
static bool durable(const struct journal *j, const struct rec *x)
{
	if (x->status != 0)
		return false;
	return j->all_acked || j->wce == 0 || x->fua || j->last_sync > x->acked;
}

struct verdict {
	uint64_t durable_writes, lost_writes, bad_blocks, failed_writes;
};

/* Per block: the ids of the writes to it, in order (writes to one block
 * never overlap in time, so issue order is completion order). */
struct block_hist {
	uint64_t *ids;
	uint32_t n, cap;
	int64_t last_durable;	/* index into ids, -1 none */
};

static int index_writes(const struct journal *j, struct block_hist *h)
{
	for (size_t i = 0; i < j->nw; i++) {
		const struct rec *x = &j->w[i];

		for (uint32_t k = 0; k < x->n && x->lba + k < j->blocks; k++) {
			struct block_hist *b = &h[x->lba + k];

			if (b->n == b->cap) {
				b->cap = b->cap ? b->cap * 2 : 4;
				b->ids = realloc(b->ids, b->cap * sizeof(*b->ids));
				if (!b->ids)
					return -1;
			}
			if (durable(j, x))
				b->last_durable = b->n;
			b->ids[b->n++] = x->id;
		}
	}
	return 0;
}

/* @id: this run's write id the block holds, 0 for zeroes or an earlier
 * run's data, UINT64_MAX for a block no write made. */
static void judge_block(const struct block_hist *b, uint64_t lba,
			uint64_t id, struct verdict *v, uint8_t *lost_seen,
			const struct journal *j)
{
	int64_t at = -1;

	if (id == UINT64_MAX) {
		if (v->bad_blocks++ < 5)
			fprintf(stderr, PROG ": block %" PRIu64 ": torn, garbage "
				"or misplaced\n", lba);
		return;
	}
	for (uint32_t i = 0; id && i < b->n; i++)
		if (b->ids[i] == id)
			at = i;
	if (id && at < 0) {
		if (v->bad_blocks++ < 5)
			fprintf(stderr, PROG ": block %" PRIu64 ": holds write %"
				PRIu64 ", which never wrote it\n", lba, id);
		return;
	}
	if (b->last_durable >= 0 && at < b->last_durable) {
		uint64_t lost = b->ids[b->last_durable];

		if (!lost_seen[lost]) {
			lost_seen[lost] = 1;
			if (v->lost_writes++ < 5)
				fprintf(stderr, PROG ": LOST durable write %" PRIu64
					" (block %" PRIu64 " holds %s %" PRIu64 ", wce %d)\n",
					lost, lba, id ? "write" : "zeroes", id, j->wce);
		}
	}
}

static int read_back(struct iscsi_context *iscsi, int lun,
		     const struct journal *j, struct block_hist *h,
		     struct verdict *v, uint8_t *lost_seen)
{
	const uint32_t chunk = 256;

	for (uint64_t lba = 0; lba < j->blocks; lba += chunk) {
		uint32_t n = j->blocks - lba < chunk ? (uint32_t)(j->blocks - lba) :
			     chunk;
		struct scsi_task *t = iscsi_read16_sync(iscsi, lun, lba, n * j->bs,
							(int)j->bs, 0, 0, 0, 0, 0);

		if (!t || t->status || t->datain.size != (int)(n * j->bs)) {
			fprintf(stderr, PROG ": READ(16) at %" PRIu64 " failed: %s\n",
				lba, iscsi_get_error(iscsi));
			return -1;
		}
		for (uint32_t k = 0; k < n; k++) {
			uint64_t id = block_id(t->datain.data + (size_t)k * j->bs,
					       j->bs, lba + k);

			/* another run's block counts as older than this run */
			if (id != UINT64_MAX)
				id = id >> ID_BITS == j->run_id ?
				     id & ((1ull << ID_BITS) - 1) : 0;
			judge_block(&h[lba + k], lba + k, id, v, lost_seen, j);
		}
		scsi_free_scsi_task(t);
	}
	return 0;
}

static int cmd_check(const struct cfg *c)
{
	struct journal j = { 0 };
	struct verdict v = { 0 };
	struct block_hist *h;
	uint8_t *lost_seen;
	struct iscsi_context *iscsi;
	int lun, ret = 1;

	if (read_journal(c->journal, &j))
		return 1;
	j.all_acked = c->all_acked;
	h = calloc(j.blocks, sizeof(*h));
	lost_seen = calloc(j.max_id + 1, 1);
	iscsi = login(c->url, &lun);
	if (!h || !lost_seen || !iscsi)
		return 1;
	for (uint64_t b = 0; b < j.blocks; b++)
		h[b].last_durable = -1;
	for (size_t i = 0; i < j.nw; i++) {
		v.durable_writes += durable(&j, &j.w[i]);
		v.failed_writes += j.w[i].status != 0;
	}
	if (index_writes(&j, h) == 0 &&
	    read_back(iscsi, lun, &j, h, &v, lost_seen) == 0) {
		printf("writes %zu durable %" PRIu64 " lost %" PRIu64
		       " bad_blocks %" PRIu64 " failed %" PRIu64 "\n", j.nw,
		       v.durable_writes, v.lost_writes, v.bad_blocks,
		       v.failed_writes);
		ret = v.lost_writes || v.bad_blocks;
	}
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return ret;
}

/* ---- sync: after a restart ---- */

static int cmd_sync(const struct cfg *c)
{
	struct journal j = { 0 };
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	uint64_t clock, blocks;
	uint32_t bs;
	int lun, wce, status = -1;
	FILE *f;

	if (read_journal(c->journal, &j))
		return 1;
	clock = j.clock;
	free(j.w);
	if (!(iscsi = login(c->url, &lun)))
		return 1;
	if (lun_geometry_retry(iscsi, lun, &bs, &blocks, &wce)) {
		fprintf(stderr, PROG ": cannot read capacity and WCE\n");
		return 1;
	}
	if (wce == 0) {
		status = 0;
	} else if ((t = iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0))) {
		status = t->status;
		scsi_free_scsi_task(t);
	}
	printf("sync: %s\n", wce == 0 ? "the LUN reports WCE=0" : status == 0 ?
	       "SYNCHRONIZE CACHE answered GOOD" : "SYNCHRONIZE CACHE failed");
	f = fopen(c->journal, "a");
	if (!f || fprintf(f, "S 0 0 0 0 0 %" PRIu64 " %" PRIu64 " %d\n",
			  clock + 1, clock + 2, status) < 0 || fclose(f)) {
		fprintf(stderr, PROG ": %s: %s\n", c->journal, strerror(errno));
		return 1;
	}
	iscsi_logout_sync(iscsi);
	iscsi_destroy_context(iscsi);
	return 0;
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fprintf(f,
"usage: " PROG " run --journal FILE [options] URL\n"
"       " PROG " sync --journal FILE URL\n"
"       " PROG " check --journal FILE [--all-acked] URL\n"
"run options:\n"
"  --sessions N     iSCSI sessions (1..%d, default 4)\n"
"  --qd N           commands in flight per session (default 8)\n"
"  --max-blocks N   blocks per write, 1..N at random (default 8)\n"
"  --fua-pct P      share of writes with FUA=1 (default 20)\n"
"  --sync-pct P     share of commands that are SYNCHRONIZE CACHE (default 15)\n"
"  --alternate      each session alternates a write and a SYNCHRONIZE CACHE\n"
"                   (a sync writer's loop; --sync-pct is then unused)\n"
"  --time SECONDS   stop by then if the target is still up (default 30)\n"
"  --seed N         (default 1)\n"
"check options:\n"
"  --all-acked      no power was lost (tgtd restarted, LUNs re-created):\n"
"                   every write answered GOOD must be there\n", MAX_SESSIONS);
}

static unsigned int num(const char *s, unsigned int lo, unsigned int hi)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end || end == s || v < lo || v > hi) {
		fprintf(stderr, PROG ": '%s' is not in %u..%u\n", s, lo, hi);
		usage(stderr);
		exit(2);
	}
	return (unsigned int)v;
}

static void parse(int argc, char **argv, struct cfg *c)
{
	static const struct option o[] = {
		{ "journal", 1, NULL, 'j' }, { "sessions", 1, NULL, 's' },
		{ "qd", 1, NULL, 'q' }, { "max-blocks", 1, NULL, 'm' },
		{ "fua-pct", 1, NULL, 'f' }, { "sync-pct", 1, NULL, 'y' },
		{ "time", 1, NULL, 't' }, { "seed", 1, NULL, 'r' },
		{ "all-acked", 0, NULL, 'a' }, { "alternate", 0, NULL, 'A' },
		{ "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	int opt;

	*c = (struct cfg){ .sessions = 4, .qd = 8, .max_blocks = 8,
			   .fua_pct = 20, .sync_pct = 15, .seconds = 30,
			   .seed = 1 };
	while ((opt = getopt_long(argc, argv, "h", o, NULL)) != -1) {
		switch (opt) {
		case 'j': c->journal = optarg; break;
		case 's': c->sessions = num(optarg, 1, MAX_SESSIONS); break;
		case 'q': c->qd = num(optarg, 1, 256); break;
		case 'm': c->max_blocks = num(optarg, 1, 256); break;
		case 'f': c->fua_pct = num(optarg, 0, 100); break;
		case 'y': c->sync_pct = num(optarg, 0, 100); break;
		case 't': c->seconds = num(optarg, 1, 86400); break;
		case 'r': c->seed = num(optarg, 0, ~0u); break;
		case 'a': c->all_acked = true; break;
		case 'A': c->alternate = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind != argc - 1 || !c->journal) {
		fprintf(stderr, PROG ": need --journal FILE and one URL\n");
		usage(stderr);
		exit(2);
	}
	c->url = argv[optind];
}

int main(int argc, char **argv)
{
	static struct run r;
	const char *verb = argc > 1 ? argv[1] : "";

	if (!strcmp(verb, "--help") || !strcmp(verb, "-h")) {
		usage(stdout);
		return 0;
	}
	if (strcmp(verb, "run") && strcmp(verb, "check") &&
	    strcmp(verb, "sync")) {
		usage(stderr);
		return 2;
	}
	parse(argc - 1, argv + 1, &r.cfg);
	r.rng = r.cfg.seed * 0x9e3779b97f4a7c15ull + 1;
	if (!strcmp(verb, "sync"))
		return cmd_sync(&r.cfg);
	return !strcmp(verb, "run") ? cmd_run(&r) : cmd_check(&r.cfg);
}
