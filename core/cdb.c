/*
 * CDB decoding for the commands the backing store executes (SBC-3
 * chapter 5).  One table row per opcode says where its fields are; no
 * per-command code.
 */
#include <errno.h>
#include <string.h>

#include "core.h"

enum field_width { W_NONE, W_6, W_8, W_16, W_32, W_64 };

struct cdb_layout {
	uint8_t opcode;
	enum syncguard_op op;
	uint8_t len;		/* CDB length in bytes */
	uint8_t lba_at;
	enum field_width lba_w;
	uint8_t nblk_at;
	enum field_width nblk_w;
	uint8_t flag_bits;	/* which of byte 1's bits mean what, below */
};

/* flag_bits: which byte-1 flags the command defines */
#define F_FUA		0x01	/* bit 3 FUA, bit 4 DPO */
#define F_IMMED		0x02	/* bit 1 IMMED */
#define F_BYTCHK	0x04	/* bits 2..1 BYTCHK, bit 4 DPO */
#define F_WSAME		0x08	/* bit 3 UNMAP, bit 2 PBDATA, bit 1 LBDATA */
#define F_SSU		0x10	/* START STOP UNIT's byte 4 */

static const struct cdb_layout layouts[] = {
	{ 0x08, SYNCGUARD_OP_READ, 6, 1, W_6, 4, W_8, 0 },		/* READ(6) */
	{ 0x28, SYNCGUARD_OP_READ, 10, 2, W_32, 7, W_16, F_FUA },	/* READ(10) */
	{ 0xa8, SYNCGUARD_OP_READ, 12, 2, W_32, 6, W_32, F_FUA },	/* READ(12) */
	{ 0x88, SYNCGUARD_OP_READ, 16, 2, W_64, 10, W_32, F_FUA },	/* READ(16) */
	{ 0x0a, SYNCGUARD_OP_WRITE, 6, 1, W_6, 4, W_8, 0 },		/* WRITE(6) */
	{ 0x2a, SYNCGUARD_OP_WRITE, 10, 2, W_32, 7, W_16, F_FUA },
	{ 0xaa, SYNCGUARD_OP_WRITE, 12, 2, W_32, 6, W_32, F_FUA },
	{ 0x8a, SYNCGUARD_OP_WRITE, 16, 2, W_64, 10, W_32, F_FUA },
	{ 0x2e, SYNCGUARD_OP_WRITE_VERIFY, 10, 2, W_32, 7, W_16, F_BYTCHK },
	{ 0xae, SYNCGUARD_OP_WRITE_VERIFY, 12, 2, W_32, 6, W_32, F_BYTCHK },
	{ 0x8e, SYNCGUARD_OP_WRITE_VERIFY, 16, 2, W_64, 10, W_32, F_BYTCHK },
	{ 0x2f, SYNCGUARD_OP_VERIFY, 10, 2, W_32, 7, W_16, F_BYTCHK },
	{ 0xaf, SYNCGUARD_OP_VERIFY, 12, 2, W_32, 6, W_32, F_BYTCHK },
	{ 0x8f, SYNCGUARD_OP_VERIFY, 16, 2, W_64, 10, W_32, F_BYTCHK },
	{ 0x35, SYNCGUARD_OP_SYNC_CACHE, 10, 2, W_32, 7, W_16, F_IMMED },
	{ 0x91, SYNCGUARD_OP_SYNC_CACHE, 16, 2, W_64, 10, W_32, F_IMMED },
	{ 0x41, SYNCGUARD_OP_WRITE_SAME, 10, 2, W_32, 7, W_16, F_WSAME },
	{ 0x93, SYNCGUARD_OP_WRITE_SAME, 16, 2, W_64, 10, W_32, F_WSAME },
	{ 0x42, SYNCGUARD_OP_UNMAP, 10, 0, W_NONE, 0, W_NONE, 0 },
	{ 0x89, SYNCGUARD_OP_COMPARE_AND_WRITE, 16, 2, W_64, 13, W_8, F_FUA },
	{ 0x8b, SYNCGUARD_OP_ORWRITE, 16, 2, W_64, 10, W_32, F_FUA },	/* ORWRITE(16) */
	{ 0x34, SYNCGUARD_OP_PRE_FETCH, 10, 2, W_32, 7, W_16, F_IMMED },
	{ 0x90, SYNCGUARD_OP_PRE_FETCH, 16, 2, W_64, 10, W_32, F_IMMED },
	{ 0x1b, SYNCGUARD_OP_START_STOP, 6, 0, W_NONE, 0, W_NONE, F_SSU },
};

static uint64_t get_field(const uint8_t *p, enum field_width w)
{
	uint64_t v = 0;
	int bytes;

	switch (w) {
	case W_NONE:
		return 0;
	case W_6:	/* READ(6)/WRITE(6): 21-bit LBA in bytes 1..3 */
		return ((uint64_t)(p[0] & 0x1f) << 16) | (uint64_t)p[1] << 8 |
		       p[2];
	case W_8:
		bytes = 1;
		break;
	case W_16:
		bytes = 2;
		break;
	case W_32:
		bytes = 4;
		break;
	default:
		bytes = 8;
		break;
	}
	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

static const struct cdb_layout *find_layout(uint8_t opcode)
{
	for (size_t i = 0; i < sizeof(layouts) / sizeof(layouts[0]); i++)
		if (layouts[i].opcode == opcode)
			return &layouts[i];
	return NULL;
}

static void decode_flags(const uint8_t *cdb, uint8_t bits,
			 struct syncguard_cdb *out)
{
	uint8_t b1 = cdb[1];

	if (bits & (F_FUA | F_BYTCHK))
		out->dpo = b1 & 0x10;
	if (bits & F_FUA)
		out->fua = b1 & 0x08;
	if (bits & F_IMMED)
		out->immed = b1 & 0x02;
	if (bits & F_BYTCHK)
		out->bytchk = (b1 >> 1) & 0x03;
	if (bits & F_WSAME) {
		out->unmap = b1 & 0x08;
		out->pbdata = b1 & 0x04;
		out->lbdata = b1 & 0x02;
		/* SBC-4's NDOB; in WRITE SAME(10) bit 0 is obsolete */
		out->ndob = cdb[0] == 0x93 && (b1 & 0x01);
	}
	if (bits & F_SSU) {	/* SBC-3 5.25; its IMMED (bit 0) unused */
		out->power_condition = cdb[4] >> 4;
		out->no_flush = cdb[4] & 0x04;
		out->start = cdb[4] & 0x01;
	}
}

int syncguard_cdb_decode(const uint8_t *cdb, size_t len,
			 struct syncguard_cdb *out)
{
	const struct cdb_layout *l;

	memset(out, 0, sizeof(*out));
	if (!len)
		return -EINVAL;
	out->opcode = cdb[0];
	l = find_layout(cdb[0]);
	if (!l)
		return -ENOTSUP;
	if (len < l->len)
		return -EINVAL;

	out->op = l->op;
	out->lba = get_field(cdb + l->lba_at, l->lba_w);
	out->nblocks = (uint32_t)get_field(cdb + l->nblk_at, l->nblk_w);
	/* READ(6)/WRITE(6): TRANSFER LENGTH 0 means 256 blocks (SBC-3 5.7) */
	if (l->nblk_w == W_8 && l->len == 6 && out->nblocks == 0)
		out->nblocks = 256;
	decode_flags(cdb, l->flag_bits, out);
	return 0;
}
