/*
 * iscsi-cdbfuzz: random and mutated CDBs against a LUN through libiscsi
 * raw tasks, to find crashes, hangs and wrong GOODs in the target.
 *
 * Most CDBs start from a template of a block command (READ, WRITE,
 * VERIFY, WRITE AND VERIFY, SYNCHRONIZE CACHE, WRITE SAME, UNMAP,
 * COMPARE AND WRITE, PRE-FETCH in every size) with a chosen LBA and
 * length near the interesting edges (0, capacity - 1, capacity, huge),
 * random flag bits and a Data-Out length that matches or does not; some
 * are data-in commands (INQUIRY, MODE SENSE, REPORT LUNS, ...) with an
 * ALLOCATION LENGTH near its edges (0-4) and a data-in buffer that
 * matches it or not; the rest are random bytes under a random opcode.  Reservation commands
 * are never sent (they would fence the fuzzer off its own LUN).
 *
 * It fails (exit 1) when the connection drops (the target died), a
 * command is not answered within --timeout seconds, or a templated
 * command whose LBA range lies beyond the capacity is answered GOOD
 * (SBC-3 4.5: LOGICAL BLOCK ADDRESS OUT OF RANGE).  --save DIR writes
 * each failing CDB there as hex, for the regression corpus; --replay
 * FILE... sends saved CDBs instead of random ones.
 *
 * usage: iscsi-cdbfuzz [--count N] [--qd N] [--seed N] [--timeout S]
 *                      [--save DIR] [--replay FILE...] URL
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

#define PROG "iscsi-cdbfuzz"
#define MAX_XFER (256 * 1024)

enum dir { D_NONE, D_OUT, D_IN };
enum fw { F6, F16, F32, F64, F8 };

struct tmpl {
	uint8_t op, len;
	enum dir dir;
	uint8_t lba_at;
	enum fw lba_w;
	uint8_t n_at;
	enum fw n_w;
	bool zero_is_end;	/* NUMBER OF BLOCKS 0 means "to the end" */
};

static const struct tmpl tmpls[] = {
	{ 0x08, 6, D_IN, 1, F6, 4, F8, false },		/* READ(6) */
	{ 0x28, 10, D_IN, 2, F32, 7, F16, false },
	{ 0xa8, 12, D_IN, 2, F32, 6, F32, false },
	{ 0x88, 16, D_IN, 2, F64, 10, F32, false },
	{ 0x0a, 6, D_OUT, 1, F6, 4, F8, false },	/* WRITE(6) */
	{ 0x2a, 10, D_OUT, 2, F32, 7, F16, false },
	{ 0xaa, 12, D_OUT, 2, F32, 6, F32, false },
	{ 0x8a, 16, D_OUT, 2, F64, 10, F32, false },
	{ 0x2e, 10, D_OUT, 2, F32, 7, F16, false },	/* WRITE AND VERIFY */
	{ 0xae, 12, D_OUT, 2, F32, 6, F32, false },
	{ 0x8e, 16, D_OUT, 2, F64, 10, F32, false },
	{ 0x2f, 10, D_OUT, 2, F32, 7, F16, false },	/* VERIFY */
	{ 0xaf, 12, D_OUT, 2, F32, 6, F32, false },
	{ 0x8f, 16, D_OUT, 2, F64, 10, F32, false },
	{ 0x35, 10, D_NONE, 2, F32, 7, F16, true },	/* SYNCHRONIZE CACHE */
	{ 0x91, 16, D_NONE, 2, F64, 10, F32, true },
	{ 0x41, 10, D_OUT, 2, F32, 7, F16, true },	/* WRITE SAME */
	{ 0x93, 16, D_OUT, 2, F64, 10, F32, true },
	{ 0x89, 16, D_OUT, 2, F64, 13, F8, false },	/* COMPARE AND WRITE */
	{ 0x34, 10, D_NONE, 2, F32, 7, F16, false },	/* PRE-FETCH */
	{ 0x90, 16, D_NONE, 2, F64, 10, F32, false },
	{ 0x42, 10, D_OUT, 0, F8, 7, F16, false },	/* UNMAP (no LBA) */
};
#define NTMPL (sizeof(tmpls) / sizeof(tmpls[0]))

/* Data-in commands by where their ALLOCATION LENGTH sits; @sa a service
 * action kept in byte 1 (else byte 1 is random flags), @page_at a byte
 * of page code and control bits made random (0: none). */
struct alloc_tmpl {
	uint8_t op, len, sa, page_at, alloc_at;
	enum fw alloc_w;
};

static const struct alloc_tmpl allocs[] = {
	{ 0x12, 6, 0, 2, 3, F16 },	/* INQUIRY (EVPD random) */
	{ 0x1a, 6, 0, 2, 4, F8 },	/* MODE SENSE(6) */
	{ 0x5a, 10, 0, 2, 7, F16 },	/* MODE SENSE(10) */
	{ 0x03, 6, 0, 0, 4, F8 },	/* REQUEST SENSE */
	{ 0x4d, 10, 0, 2, 7, F16 },	/* LOG SENSE */
	{ 0x1c, 6, 0, 2, 3, F16 },	/* RECEIVE DIAGNOSTIC RESULTS */
	{ 0xa0, 12, 0, 0, 6, F32 },	/* REPORT LUNS */
	{ 0x5e, 10, 0, 0, 7, F16 },	/* PERSISTENT RESERVE IN */
	{ 0x9e, 16, 0x10, 0, 10, F32 },	/* READ CAPACITY(16) */
	{ 0x9e, 16, 0x12, 2, 10, F32 },	/* GET LBA STATUS */
	{ 0xa3, 12, 0x0c, 0, 6, F32 },	/* REPORT SUPPORTED OPERATION CODES */
};
#define NALLOC (sizeof(allocs) / sizeof(allocs[0]))

struct cfg {
	const char *url, *save;
	uint64_t count, seed;
	unsigned int qd, timeout;
	char **replay;
	int nreplay;
};

struct slot {
	struct fuzz *f;
	bool busy;
	uint8_t cdb[16];
	int len;
	bool must_fail;		/* LBA range beyond capacity */
	uint64_t sent_ns;
	unsigned char *out;
};

struct fuzz {
	struct cfg cfg;
	struct iscsi_context *iscsi;
	int lun;
	uint32_t bs;
	uint64_t cap;
	uint64_t rng, sent, done, good, check, other, failures;
	struct slot *slots;
	bool dead;
};

static uint64_t rnd(struct fuzz *f)
{
	return xorshift64(&f->rng);
}

static void put(uint8_t *p, enum fw w, uint64_t v)
{
	int bytes = w == F8 ? 1 : w == F16 ? 2 : w == F32 ? 4 : 8;

	if (w == F6) {
		p[0] = (uint8_t)((p[0] & 0xe0) | ((v >> 16) & 0x1f));
		p[1] = (uint8_t)(v >> 8);
		p[2] = (uint8_t)v;
		return;
	}
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t fw_max(enum fw w)
{
	return w == F6 ? 0x1fffff : w == F8 ? 0xff : w == F16 ? 0xffff :
	       w == F32 ? 0xffffffffull : UINT64_MAX;
}

/* An LBA near an edge of the medium, or anywhere. */
static uint64_t pick_lba(struct fuzz *f, enum fw w)
{
	uint64_t v;

	switch (rnd(f) % 6) {
	case 0: v = 0; break;
	case 1: v = f->cap - 1 - rnd(f) % 4; break;
	case 2: v = f->cap + rnd(f) % 4; break;
	case 3: v = rnd(f); break;
	default: v = rnd(f) % f->cap; break;
	}
	return v > fw_max(w) ? fw_max(w) : v;
}

static uint64_t pick_n(struct fuzz *f, enum fw w)
{
	uint64_t v = rnd(f) % 5 ? rnd(f) % 17 : rnd(f);

	return v > fw_max(w) ? fw_max(w) : v;
}

/* Build a CDB from a template; returns the Data-Out length to send. */
static uint32_t from_template(struct fuzz *f, struct slot *s)
{
	const struct tmpl *t = &tmpls[rnd(f) % NTMPL];
	uint64_t lba = t->lba_at ? pick_lba(f, t->lba_w) : 0;
	uint64_t n = pick_n(f, t->n_w), blocks;
	uint32_t out;

	memset(s->cdb, 0, sizeof(s->cdb));
	s->cdb[0] = t->op;
	s->len = t->len;
	if (rnd(f) % 2)
		s->cdb[1] = (uint8_t)rnd(f);	/* flags, reserved bits */
	if (t->lba_at)
		put(s->cdb + t->lba_at, t->lba_w, lba);
	put(s->cdb + t->n_at, t->n_w, n);
	blocks = t->len == 6 && t->n_w == F8 && n == 0 ? 256 : n;
	if (t->zero_is_end && n == 0)
		blocks = lba < f->cap ? f->cap - lba : 1;
	s->must_fail = t->lba_at && (lba >= f->cap || blocks > f->cap - lba);
	if (t->op == 0x42) {		/* UNMAP: parameter list length */
		n = rnd(f) % 4 ? 8 + 16 * (rnd(f) % 4) : rnd(f) % 600;
		put(s->cdb + 7, F16, n);
		return (uint32_t)n;
	}
	if (t->dir != D_OUT)
		return 0;
	out = (uint32_t)(blocks * f->bs * (t->op == 0x89 ? 2 : 1));
	if (t->op == 0x41 || t->op == 0x93)
		out = f->bs;
	if (rnd(f) % 4 == 0 || blocks > MAX_XFER / f->bs)
		out = (uint32_t)(rnd(f) % MAX_XFER);
	return out > MAX_XFER ? MAX_XFER : out;
}

/*
 * A data-in command with an ALLOCATION LENGTH of 0-4 (or any), and the
 * data-in length the initiator expects: that length, none, or any.
 * tgt's MODE SENSE writes through a NULL buffer at 0 and kills tgtd,
 * a case random bytes reach once in millions of CDBs.
 * Returns the data-in length.
 */
static uint32_t alloc_cdb(struct fuzz *f, struct slot *s)
{
	const struct alloc_tmpl *t = &allocs[rnd(f) % NALLOC];
	uint64_t alloc = rnd(f) % 3 ? rnd(f) % 5 : rnd(f) % 65536;
	uint64_t in;

	memset(s->cdb, 0, sizeof(s->cdb));
	s->cdb[0] = t->op;
	s->len = t->len;
	s->must_fail = false;
	s->cdb[1] = t->sa ? t->sa : rnd(f) % 2 ? (uint8_t)rnd(f) : 0;
	if (t->page_at && rnd(f) % 2)
		s->cdb[t->page_at] = (uint8_t)rnd(f);
	if (alloc > fw_max(t->alloc_w))
		alloc = fw_max(t->alloc_w);
	put(s->cdb + t->alloc_at, t->alloc_w, alloc);
	switch (rnd(f) % 4) {
	case 0: in = 0; break;
	case 1: in = rnd(f) % 4096; break;
	default: in = alloc; break;
	}
	return (uint32_t)(in > MAX_XFER ? MAX_XFER : in);
}

static bool forbidden(uint8_t op)
{
	/* RESERVE(6/10), RELEASE(6/10), PERSISTENT RESERVE OUT */
	return op == 0x16 || op == 0x17 || op == 0x56 || op == 0x57 ||
	       op == 0x5f;
}

/* Random bytes under a random opcode, sized by its group code. */
static uint32_t random_cdb(struct fuzz *f, struct slot *s)
{
	static const uint8_t glen[8] = { 6, 10, 10, 16, 16, 12, 16, 16 };

	do
		s->cdb[0] = (uint8_t)rnd(f);
	while (forbidden(s->cdb[0]));
	s->len = glen[s->cdb[0] >> 5];
	for (int i = 1; i < s->len; i++)
		s->cdb[i] = (uint8_t)rnd(f);
	s->must_fail = false;
	return rnd(f) % 3 ? 0 : (uint32_t)(rnd(f) % 4096);
}

static void save_case(struct fuzz *f, const struct slot *s, const char *why)
{
	char path[512];
	FILE *fp;

	fprintf(stderr, PROG ": %s: CDB", why);
	for (int i = 0; i < s->len; i++)
		fprintf(stderr, " %02x", s->cdb[i]);
	fputc('\n', stderr);
	if (!f->cfg.save)
		return;
	snprintf(path, sizeof(path), "%s/cdb-%02x-%" PRIu64 ".hex", f->cfg.save,
		 s->cdb[0], f->sent);
	fp = fopen(path, "w");
	if (!fp)
		return;
	for (int i = 0; i < s->len; i++)
		fprintf(fp, "%02x%s", s->cdb[i], i + 1 < s->len ? " " : "\n");
	fclose(fp);
}

static void done_cb(struct iscsi_context *iscsi, int status, void *data,
		    void *priv)
{
	struct slot *s = priv;
	struct fuzz *f = s->f;

	(void)iscsi;
	f->done++;
	if (status == SCSI_STATUS_GOOD)
		f->good++;
	else if (status == SCSI_STATUS_CHECK_CONDITION)
		f->check++;
	else
		f->other++;
	if (status == SCSI_STATUS_GOOD && s->must_fail) {
		f->failures++;
		save_case(f, s, "GOOD for an LBA range beyond capacity");
	}
	if (data)
		scsi_free_scsi_task(data);
	free(s->out);
	s->out = NULL;
	s->busy = false;
}

static int send_slot(struct fuzz *f, struct slot *s, uint32_t out,
		     int dir, uint32_t in)
{
	struct scsi_task *t;
	struct iscsi_data d = { 0, NULL };

	if (out) {
		s->out = malloc(out);
		if (!s->out)
			return -1;
		for (uint32_t i = 0; i < out; i++)
			s->out[i] = (uint8_t)(i * 31 + f->sent);
		d.size = out;
		d.data = s->out;
	}
	t = scsi_create_task(s->len, s->cdb, out ? SCSI_XFER_WRITE : dir,
			     (int)(out ? out : in));
	if (!t)
		return -1;
	s->busy = true;
	s->sent_ns = now_ns();
	f->sent++;
	if (iscsi_scsi_command_async(f->iscsi, f->lun, t, done_cb,
				     out ? &d : NULL, s)) {
		scsi_free_scsi_task(t);
		s->busy = false;
		return -1;
	}
	return 0;
}

static int send_random(struct fuzz *f, struct slot *s)
{
	uint64_t kind = rnd(f) % 10;
	uint32_t out, in = 0;
	int dir = SCSI_XFER_NONE;

	if (kind == 1) {
		in = alloc_cdb(f, s);
		return send_slot(f, s, 0, in ? SCSI_XFER_READ : SCSI_XFER_NONE,
				 in);
	}
	if (kind) {
		out = from_template(f, s);
		if (!out && (s->cdb[0] & 0x0f) == 0x08) {	/* READs */
			dir = SCSI_XFER_READ;
			in = (uint32_t)(rnd(f) % (64 * 1024));
		}
	} else {
		out = random_cdb(f, s);
		if (!out && rnd(f) % 2) {
			dir = SCSI_XFER_READ;
			in = (uint32_t)(rnd(f) % 4096);
		}
	}
	return send_slot(f, s, out, dir, in);
}

/* Pump the connection once; returns -1 when it is gone or hung. */
static int pump(struct fuzz *f)
{
	struct pollfd pfd = { iscsi_get_fd(f->iscsi),
			      (short)iscsi_which_events(f->iscsi), 0 };
	uint64_t now = now_ns();

	if (poll(&pfd, 1, 100) < 0 && errno != EINTR)
		return -1;
	if (iscsi_service(f->iscsi, pfd.revents) < 0) {
		fprintf(stderr, PROG ": connection lost after %" PRIu64
			" CDBs: %s\n", f->sent, iscsi_get_error(f->iscsi));
		return -1;
	}
	for (unsigned int i = 0; i < f->cfg.qd; i++) {
		struct slot *s = &f->slots[i];

		if (s->busy && now - s->sent_ns > f->cfg.timeout * 1000000000ull) {
			save_case(f, s, "no answer (hang)");
			return -1;
		}
	}
	return 0;
}

static unsigned int busy_slots(const struct fuzz *f)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < f->cfg.qd; i++)
		n += f->slots[i].busy;
	return n;
}

static int load_case(const char *path, struct slot *s)
{
	FILE *fp = fopen(path, "r");
	unsigned int b;

	s->len = 0;
	s->must_fail = false;
	if (!fp)
		return -1;
	while (s->len < 16 && fscanf(fp, "%x", &b) == 1)
		s->cdb[s->len++] = (uint8_t)b;
	fclose(fp);
	return s->len >= 6 ? 0 : -1;
}

static int run(struct fuzz *f)
{
	uint64_t total = f->cfg.nreplay ? (uint64_t)f->cfg.nreplay : f->cfg.count;
	int next_case = 0;

	while (!f->dead && (f->sent < total || busy_slots(f))) {
		for (unsigned int i = 0; i < f->cfg.qd && f->sent < total; i++) {
			struct slot *s = &f->slots[i];

			if (s->busy)
				continue;
			if (f->cfg.nreplay) {
				if (load_case(f->cfg.replay[next_case++], s))
					return -1;
				if (send_slot(f, s, 0, SCSI_XFER_NONE, 0))
					return -1;
			} else if (send_random(f, s)) {
				return -1;
			}
		}
		if (pump(f))
			return -1;
	}
	return 0;
}

static int setup(struct fuzz *f)
{
	struct iscsi_url *u;
	struct scsi_task *t;
	struct scsi_readcapacity16 *rc;

	f->iscsi = iscsi_create_context("iqn.2026-11.org.syncguard:cdbfuzz");
	u = f->iscsi ? iscsi_parse_full_url(f->iscsi, f->cfg.url) : NULL;
	if (!u)
		return -1;
	iscsi_set_targetname(f->iscsi, u->target);
	iscsi_set_session_type(f->iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_noautoreconnect(f->iscsi, 1);	/* a drop is a finding */
	f->lun = u->lun;
	if (iscsi_full_connect_sync(f->iscsi, u->portal, u->lun)) {
		fprintf(stderr, PROG ": login: %s\n", iscsi_get_error(f->iscsi));
		return -1;
	}
	iscsi_destroy_url(u);
	t = iscsi_readcapacity16_sync(f->iscsi, f->lun);
	if (!t || t->status || !(rc = scsi_datain_unmarshall(t)))
		return -1;
	f->bs = rc->block_length;
	f->cap = rc->returned_lba + 1;
	scsi_free_scsi_task(t);
	f->slots = calloc(f->cfg.qd, sizeof(*f->slots));
	for (unsigned int i = 0; f->slots && i < f->cfg.qd; i++)
		f->slots[i].f = f;
	return f->slots ? 0 : -1;
}

static void usage(FILE *fp)
{
	fprintf(fp, "usage: " PROG " [--count N] [--qd N] [--seed N] "
		"[--timeout SECONDS] [--save DIR] [--replay FILE...] URL\n"
		"  --count N     random CDBs to send (default 10000)\n"
		"  --qd N        commands in flight (default 16)\n"
		"  --seed N      (default 1)\n"
		"  --timeout S   a command unanswered this long is a hang "
		"(default 30)\n"
		"  --save DIR    write failing CDBs to DIR as hex\n"
		"  --replay      the remaining arguments but the last are CDB "
		"files to send instead\n");
}

static void parse(int argc, char **argv, struct cfg *c)
{
	static const struct option o[] = {
		{ "count", 1, NULL, 'c' }, { "qd", 1, NULL, 'q' },
		{ "seed", 1, NULL, 's' }, { "timeout", 1, NULL, 't' },
		{ "save", 1, NULL, 'S' }, { "replay", 0, NULL, 'r' },
		{ "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	bool replay = false;
	char *end;
	int opt;

	*c = (struct cfg){ .count = 10000, .qd = 16, .seed = 1, .timeout = 30 };
	while ((opt = getopt_long(argc, argv, "h", o, NULL)) != -1) {
		bool numeric = optarg && opt != 'S';
		unsigned long long v = numeric ? strtoull(optarg, &end, 10) : 0;

		if (numeric && (*end || end == optarg)) {
			fprintf(stderr, PROG ": '%s' is not a number\n", optarg);
			usage(stderr);
			exit(2);
		}
		switch (opt) {
		case 'c': c->count = v; break;
		case 'q': c->qd = v && v <= 128 ? (unsigned int)v : 16; break;
		case 's': c->seed = v; break;
		case 't': c->timeout = v ? (unsigned int)v : 30; break;
		case 'S': c->save = optarg; break;
		case 'r': replay = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind >= argc || (replay && optind >= argc - 1)) {
		usage(stderr);
		exit(2);
	}
	c->url = argv[argc - 1];
	if (replay) {
		c->replay = argv + optind;
		c->nreplay = argc - 1 - optind;
		c->qd = 1;
	}
}

int main(int argc, char **argv)
{
	static struct fuzz f;
	int ret;

	parse(argc, argv, &f.cfg);
	f.rng = f.cfg.seed * 0x9e3779b97f4a7c15ull + 1;
	signal(SIGPIPE, SIG_IGN);
	if (setup(&f)) {
		fprintf(stderr, PROG ": cannot set up %s\n", f.cfg.url);
		return 1;
	}
	ret = run(&f);
	printf("sent %" PRIu64 " answered %" PRIu64 " good %" PRIu64 " check %"
	       PRIu64 " other %" PRIu64 " failures %" PRIu64 "%s\n", f.sent,
	       f.done, f.good, f.check, f.other, f.failures,
	       ret ? " ABORTED" : "");
	if (!ret)
		iscsi_logout_sync(f.iscsi);
	return ret || f.failures ? 1 : 0;
}
