/*
 * --verify and --verify-only (verify.h): stamping the blocks a run
 * writes, remembering what each must hold, reading them back and
 * saving or checking that in a --state file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "verify.h"

#define MAGIC 0x3146525642535347ull	/* "GSSBVRF1": stamps, and a state
					 * file without the LUN's name */
#define MAGIC_NAMED 0x3246525642535347ull	/* "GSSBVRF2": a state file
						 * naming its target and LUN */
#define MAX_VERIFY_BLOCKS (64ull << 20)	/* 512 MiB of map */
#define CHUNK 256			/* blocks per READ(16) */

struct stamp {
	uint64_t magic, lba, seq;
	uint32_t run, session;
	uint64_t csum;
};

struct verify_map {
	uint64_t blocks, counter;
	uint32_t run;
	uint64_t *acked, *issued;	/* 0: nothing known */
};

static uint64_t fnv(const unsigned char *p, size_t n, size_t skip_at)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)	/* the csum field counts as 0 */
		h = (h ^ (i >= skip_at && i < skip_at + 8 ? 0 : p[i])) *
		    0x100000001b3ull;
	return h;
}

static uint32_t current_run;

void syncguard_verify_stamp(unsigned char *buf, uint64_t lba, uint32_t blocks,
			    uint32_t bs, uint64_t seq, unsigned int session)
{
	for (uint32_t k = 0; k < blocks; k++) {
		unsigned char *b = buf + (size_t)k * bs;
		struct stamp st = { MAGIC, lba + k, seq, current_run, session, 0 };

		for (uint32_t i = sizeof(st); i < bs; i++)
			b[i] = (unsigned char)((seq * 31 + lba + k + i) * 2654435761u >> 24);
		memcpy(b, &st, sizeof(st));
		st.csum = fnv(b, bs, offsetof(struct stamp, csum));
		memcpy(b, &st, sizeof(st));
	}
}

struct verify_map *syncguard_verify_map_new(uint64_t span_blocks, uint8_t **busy)
{
	struct verify_map *m;

	if (span_blocks > MAX_VERIFY_BLOCKS) {
		fprintf(stderr, PROG ": --verify keeps 16 bytes per block: use "
			"--span to verify at most %llu blocks\n",
			(unsigned long long)MAX_VERIFY_BLOCKS);
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->blocks = span_blocks;
	m->acked = calloc(span_blocks, sizeof(uint64_t));
	m->issued = calloc(span_blocks, sizeof(uint64_t));
	*busy = calloc(span_blocks, 1);
	if (!m->acked || !m->issued || !*busy) {
		syncguard_verify_map_free(m, *busy);
		*busy = NULL;
		return NULL;
	}
	/* 24 bits of run id above 40 bits of sequence: stamps of an earlier
	 * run never match this run's expectations */
	m->run = current_run = ((uint32_t)time(NULL) ^ (uint32_t)clock()) & 0xffffff;
	return m;
}

void syncguard_verify_map_free(struct verify_map *m, uint8_t *busy)
{
	if (m) {
		free(m->acked);
		free(m->issued);
		free(m);
	}
	free(busy);
}

uint64_t syncguard_verify_next_seq(struct verify_map *m)
{
	return (uint64_t)m->run << 40 | ++m->counter;
}

void syncguard_verify_note_issued(struct verify_map *m, uint64_t lba, uint32_t blocks,
				  uint64_t seq)
{
	for (uint32_t k = 0; k < blocks; k++)
		m->issued[lba + k] = seq;
}

void syncguard_verify_note_acked(struct verify_map *m, uint64_t lba, uint32_t blocks,
				 uint64_t seq)
{
	for (uint32_t k = 0; k < blocks; k++)
		m->acked[lba + k] = seq;
}

/* Is @st, at the start of block @lba of @bs bytes, the stamp of a run
 * on the same store with another logical block size: a whole smaller
 * block in its place (a 4096-byte block's first 512 bytes, stamped
 * with 512-byte LBA 8 x @lba), or the first bytes of a larger one
 * (whose checksum spans more than this block)?  Only for a stamp that
 * is not whole at this size.  Such stale stamps would otherwise be
 * reported as torn blocks, and fail the run. */
static bool other_block_size(const struct stamp *st, const unsigned char *b,
			     uint32_t bs, uint64_t lba)
{
	for (uint32_t s = 256; s <= (128u << 10); s *= 2) {	/* tgt's range */
		if (s < bs && st->lba == lba * (bs / s) &&
		    st->csum == fnv(b, s, offsetof(struct stamp, csum)))
			return true;
		if (s > bs && !(s % bs) && st->lba * (s / bs) == lba)
			return true;
	}
	return false;
}

/* What block @lba holds: its stamp's sequence number, 0 when it is not
 * a stamp of this block size, UINT64_MAX when it is a stamp that is
 * torn or misplaced. */
static uint64_t stamp_of(const unsigned char *b, uint32_t bs, uint64_t lba)
{
	struct stamp st;

	memcpy(&st, b, sizeof(st));
	if (st.magic != MAGIC)
		return 0;
	if (st.csum == fnv(b, bs, offsetof(struct stamp, csum)))	/* whole */
		return st.lba == lba ? st.seq : UINT64_MAX;
	return other_block_size(&st, b, bs, lba) ? 0 : UINT64_MAX;
}

static void mismatch(struct result *r, uint64_t lba, uint64_t want,
		     uint64_t got)
{
	char found[96];

	if (r->verify_bad++ >= 10) {
		if (r->verify_bad == 11)
			fprintf(stderr, PROG ": verify: further mismatches "
				"counted, not listed\n");
		return;
	}
	if (got == UINT64_MAX)
		snprintf(found, sizeof(found), "a torn or misplaced block");
	else if (got)
		snprintf(found, sizeof(found), "write %" PRIx64 ".%" PRIu64,
			 got >> 40, got & (((uint64_t)1 << 40) - 1));
	else
		snprintf(found, sizeof(found), "no stamp (never written here, "
			 "or overwritten by someone else)");
	fprintf(stderr, PROG ": verify: LBA %" PRIu64 ": expected write %"
		PRIx64 ".%" PRIu64 " (run.sequence), found %s\n", lba,
		want >> 40, want & (((uint64_t)1 << 40) - 1), found);
}

/* One chunk of read_back, at @lba: 0, -1, -3 as read_back.  @before:
 * the Ctrl-Cs seen when the read-back began. */
static int read_chunk(struct iscsi_context *iscsi, int lun,
		      const struct target_info *ti, uint64_t lba,
		      uint64_t blocks, const uint64_t *want, const uint64_t *alt,
		      sig_atomic_t before, struct result *r)
{
	uint32_t n = blocks - lba < CHUNK ? (uint32_t)(blocks - lba) : CHUNK;
	struct scsi_task *t = syncguard_interrupted != before ? NULL :
		SYNCGUARD_HELD(iscsi_read16_sync(iscsi, lun, lba,
			n * ti->block_size, (int)ti->block_size, 0, 0,
			ti->dpofua == 1, 0, 0));	/* FUA: from the medium */

	if (syncguard_interrupted != before) {
		fprintf(stderr, PROG ": verify: interrupted at LBA %" PRIu64
			" of %" PRIu64 "\n", lba, blocks);
		if (t)
			scsi_free_scsi_task(t);
		r->interrupted = true;
		return -3;
	}
	if (!t || t->status != SCSI_STATUS_GOOD) {
		fprintf(stderr, PROG ": verify: READ(16) at %" PRIu64 " failed: "
			"%s\n", lba, iscsi_get_error(iscsi));
		if (t)
			scsi_free_scsi_task(t);
		return -1;
	}
	for (uint32_t k = 0; k < n; k++) {
		uint64_t got = stamp_of(t->datain.data + (size_t)k * ti->block_size,
					ti->block_size, lba + k);
		uint64_t w = want ? want[lba + k] : 0;

		r->verify_checked++;
		if (got == UINT64_MAX ||
		    (w && got != w && !(alt && got == alt[lba + k])))
			mismatch(r, lba + k, w, got);
	}
	scsi_free_scsi_task(t);
	return 0;
}

/* Read [0, blocks) back; @want(lba) gives the expected stamp (0: any
 * whole stamp or none is fine), @alt(lba) a second acceptable one.
 * A Ctrl-C that stopped the writes before does not stop it (the run's
 * writes are checked): one during it does (a third quits at once).
 * 0, -1 (a READ failed), -3 (Ctrl-C: r->interrupted set). */
static int read_back(struct iscsi_context *iscsi, int lun,
		     const struct target_info *ti, uint64_t blocks,
		     const uint64_t *want, const uint64_t *alt,
		     struct result *r)
{
	const sig_atomic_t before = syncguard_interrupted;
	int ret = 0;

	/* set before the message: a Ctrl-C sent on seeing it must stop the
	 * read-back, not find the flag unset and quit without results */
	syncguard_reading_back = 1;
	if (before)
		fprintf(stderr, PROG ": verify: reading back the span, %" PRIu64
			" blocks (Ctrl-C again stops it)\n", blocks);
	for (uint64_t lba = 0; !ret && lba < blocks; lba += CHUNK)
		ret = read_chunk(iscsi, lun, ti, lba, blocks, want, alt, before, r);
	syncguard_reading_back = 0;
	return ret;
}


/*
 * A state file: MAGIC_NAMED, block size (bytes), span (blocks), LUN
 * number, the target's name (256 bytes, NUL-padded), then what each
 * block must hold (a uint64_t stamp per block, host byte order).
 */
struct state_hdr {
	uint64_t magic, block_size, blocks, lun;
	char target[256];
};

static int save_state(const struct verify_map *m,
		      const struct target_info *ti, const char *path)
{
	FILE *f = fopen(path, "w");
	struct state_hdr hdr = { MAGIC_NAMED, ti->block_size, m->blocks,
				 (uint64_t)ti->lun, "" };
	int ok;

	if (!f) {
		fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
		return -1;
	}
	snprintf(hdr.target, sizeof(hdr.target), "%s", ti->target);
	ok = fwrite(&hdr, sizeof(hdr), 1, f) == 1 &&
	     fwrite(m->acked, sizeof(uint64_t), m->blocks, f) == m->blocks;
	if (fclose(f) || !ok) {
		fprintf(stderr, PROG ": %s: cannot save the state: %s\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* The header of the state file @f, checked against the LUN @ti: NULL,
 * or why it does not fit (into @buf for another LUN's).  A state file
 * of the first format (no target name) is checked by size alone. */
static const char *load_hdr(FILE *f, const struct target_info *ti,
			    struct state_hdr *hdr, char *buf, size_t len)
{
	const size_t old = 3 * sizeof(uint64_t);

	memset(hdr, 0, sizeof(*hdr));
	if (fread(hdr, old, 1, f) != 1)
		return "too short for a state file";
	if (hdr->magic == MAGIC_NAMED &&
	    fread((char *)hdr + old, sizeof(*hdr) - old, 1, f) != 1)
		return "too short for a state file";
	if (hdr->magic != MAGIC && hdr->magic != MAGIC_NAMED)
		return "not an " PROG " state file";
	hdr->target[sizeof(hdr->target) - 1] = '\0';
	if (hdr->magic == MAGIC_NAMED &&
	    (strcmp(hdr->target, ti->target) || hdr->lun != (uint64_t)ti->lun)) {
		snprintf(buf, len, "saved for LUN %" PRIu64 " of %s, not LUN "
			 "%d of %s: a check against another LUN would report "
			 "every block lost", hdr->lun, hdr->target, ti->lun,
			 ti->target);
		return buf;
	}
	if (hdr->block_size != ti->block_size || hdr->blocks > ti->blocks ||
	    !hdr->blocks)
		return "a state file of another LUN (block size or span "
		       "differ)";
	return NULL;
}

int syncguard_verify_readback(struct verify_map *m, struct iscsi_context *iscsi,
			      int lun, const struct target_info *ti, const char *state,
			      struct result *r)
{
	int ret = read_back(iscsi, lun, ti, m->blocks, m->acked, m->issued, r);

	if (ret)
		return ret;
	return state ? save_state(m, ti, state) : 0;
}

int syncguard_verify_state(struct iscsi_context *iscsi, int lun,
			   const struct target_info *ti, const char *state,
			   uint64_t span_blocks, struct result *r)
{
	struct state_hdr hdr;
	uint64_t *want = NULL;
	FILE *f = state ? fopen(state, "r") : NULL;
	const char *why = NULL;
	char buf[640];
	int ret = 0;

	if (state && !f)
		why = strerror(errno);
	else if (f)
		why = load_hdr(f, ti, &hdr, buf, sizeof(buf));
	if (!why && f) {
		span_blocks = hdr.blocks;
		want = calloc(span_blocks, sizeof(uint64_t));
		if (!want)
			why = "too large to load";
		else if (fread(want, sizeof(uint64_t), span_blocks, f) !=
			 span_blocks)
			why = "truncated";
	}
	if (why) {
		fprintf(stderr, PROG ": %s: %s\n", state, why);
		ret = -2;
	}
	if (f)
		fclose(f);
	if (!ret)
		ret = read_back(iscsi, lun, ti, span_blocks, want, NULL, r);
	free(want);
	return ret;
}
