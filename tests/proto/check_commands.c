/*
 * Every command that writes, flushes or reports caching behaviour, per
 * mode: status, sense key and ASC/ASCQ, and for data-moving commands the
 * data read back.  Raw CDBs, so each field is exactly what the test says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

#define LUN_BYTES (16u << 20)
#define BS 512u
#define CAP (LUN_BYTES / BS)

static const struct {
	int lun;
	const char *bsopts;
	bool thin;
	int v_sup, nv_sup;
} luns[] = {
	{ 1, "mode=write-through", true, 0, 0 },
	{ 2, "mode=write-back", true, 1, 0 },
	{ 3, "mode=plp", false, 0, 1 },
	{ 4, "mode=write-through;allow_wce=yes", true, 1, 0 },
	{ 5, "mode=write-back;direct=yes", true, 1, 0 },
};
#define NLUNS (int)(sizeof(luns) / sizeof(luns[0]))

static void setup(void)
{
	proto_tgtd_start();
	for (int i = 0; i < NLUNS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "cmd%d.img", i);
		if (proto_add_lun(luns[i].lun, proto_file(name, LUN_BYTES, false),
				  luns[i].bsopts, 0) ||
		    (luns[i].thin && proto_update_lun(luns[i].lun,
						      "thin_provisioning=1"))) {
			proto_tgtd_stop();
			exit(EXIT_FAILURE);
		}
	}
}

static void teardown(void)
{
	proto_tgtd_stop();
}

/* Send a raw CDB; @out/@outlen Data-Out, or @inlen bytes of Data-In. */
static struct scsi_task *raw(struct iscsi_context *iscsi, int lun,
			     const uint8_t *cdb, int len, unsigned char *out,
			     uint32_t outlen, uint32_t inlen)
{
	struct scsi_task *t = scsi_create_task(len, (unsigned char *)cdb,
		outlen ? SCSI_XFER_WRITE : inlen ? SCSI_XFER_READ :
		SCSI_XFER_NONE, (int)(outlen ? outlen : inlen));
	struct iscsi_data d = { outlen, out };

	ck_assert_ptr_nonnull(t);
	return iscsi_scsi_command_sync(iscsi, lun, t, outlen ? &d : NULL);
}

static void put(uint8_t *p, int bytes, uint64_t v)
{
	while (bytes--) {
		p[bytes] = (uint8_t)v;
		v >>= 8;
	}
}

/* a CDB of @op with LBA and length where its size puts them */
static int rw_cdb(uint8_t *cdb, uint8_t op, uint8_t b1, uint64_t lba,
		  uint32_t n)
{
	int len = op >= 0x80 && op < 0xa0 ? 16 : op >= 0xa0 ? 12 : 10;

	memset(cdb, 0, 16);
	cdb[0] = op;
	cdb[1] = b1;
	if (len == 16) {
		put(cdb + 2, 8, lba);
		put(cdb + 10, 4, n);
	} else {
		put(cdb + 2, 4, lba);
		put(cdb + (len == 12 ? 6 : 7), len == 12 ? 4 : 2, n);
	}
	return len;
}

static void pattern(unsigned char *buf, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 7 + seed * 13 + 1);
}

static void assert_reads_back(struct iscsi_context *iscsi, int lun,
			      uint64_t lba, const unsigned char *want,
			      uint32_t len)
{
	struct scsi_task *t = iscsi_read16_sync(iscsi, lun, lba, len, BS, 0, 0,
						0, 0, 0);

	proto_assert_good(t, "READ(16)", true);
	ck_assert_mem_eq(t->datain.data, want, len);
	scsi_free_scsi_task(t);
}

/* WRITE(10/12/16) and WRITE AND VERIFY(10/12/16) with FUA and DPO set */
START_TEST(test_cmd_writes_fua_dpo)
{
	static const uint8_t ops[] = { 0x2a, 0xaa, 0x8a, 0x2e, 0xae, 0x8e };
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char buf[4 * BS];
	uint8_t cdb[16];

	for (size_t k = 0; k < sizeof(ops); k++) {
		/* WRITE: FUA|DPO; WRITE AND VERIFY: DPO|BYTCHK=1 */
		uint8_t b1 = ops[k] == 0x2e || ops[k] == 0xae || ops[k] == 0x8e ?
			     0x12 : 0x18;
		int len = rw_cdb(cdb, ops[k], b1, 64 * k, 4);

		pattern(buf, sizeof(buf), (unsigned int)(k + 10 * _i));
		proto_assert_good(raw(iscsi, lun, cdb, len, buf, sizeof(buf), 0),
				  "write with FUA/DPO", false);
		assert_reads_back(iscsi, lun, 64 * k, buf, sizeof(buf));
	}
	iscsi_destroy_context(iscsi);
}
END_TEST

START_TEST(test_cmd_read_fua)
{
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char buf[2 * BS];
	uint8_t cdb[16];
	struct scsi_task *t;

	pattern(buf, sizeof(buf), 99);
	proto_assert_good(iscsi_write10_sync(iscsi, lun, 500, buf, sizeof(buf),
			  BS, 0, 0, 0, 0, 0), "WRITE(10)", false);
	t = raw(iscsi, lun, cdb, rw_cdb(cdb, 0x28, 0x08, 500, 2), NULL, 0,
		sizeof(buf));
	proto_assert_good(t, "READ(10) FUA", true);
	ck_assert_mem_eq(t->datain.data, buf, sizeof(buf));
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
}
END_TEST

START_TEST(test_cmd_compare_and_write)
{
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char buf[4 * BS], big[2 * 129 * BS];

	pattern(buf, 2 * BS, 5);
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 900, buf, 2 * BS, BS,
			  0, 0, 0, 0, 0), "WRITE(16)", false);
	pattern(buf + 2 * BS, 2 * BS, 6);
	proto_assert_good(iscsi_compareandwrite_sync(iscsi, lun, 900, buf,
			  sizeof(buf), BS, 0, 0, 1, 0, 0),
			  "COMPARE AND WRITE FUA", false);
	assert_reads_back(iscsi, lun, 900, buf + 2 * BS, 2 * BS);
	/* the medium now holds the second half: comparing the first fails */
	proto_assert_sense(iscsi_compareandwrite_sync(iscsi, lun, 900, buf,
			   sizeof(buf), BS, 0, 0, 0, 0, 0), SCSI_SENSE_MISCOMPARE,
			   0x1d00, "COMPARE AND WRITE miscompare");
	/* more than MAXIMUM COMPARE AND WRITE LENGTH (128) */
	memset(big, 0, sizeof(big));
	proto_assert_sense(iscsi_compareandwrite_sync(iscsi, lun, 0, big,
		sizeof(big), BS, 0, 0, 0, 0, 0), SCSI_SENSE_ILLEGAL_REQUEST,
		0x2400, "COMPARE AND WRITE of 129 blocks");
	iscsi_destroy_context(iscsi);
}
END_TEST

/* WRITE(10/16) whose Data-Out (iSCSI EDTL) ends inside a logical block:
 * refused with INVALID FIELD IN COMMAND INFORMATION UNIT and nothing
 * written; one that stops at a block boundary writes the whole blocks
 * that came, and not the rest. */
START_TEST(test_cmd_torn_data_out)
{
	static const uint8_t ops[] = { 0x2a, 0x8a };
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char old[2 * BS], buf[2 * BS], want[2 * BS];
	uint8_t cdb[16];

	for (size_t k = 0; k < sizeof(ops); k++) {
		uint64_t lba = 512 + 8 * k;
		int len = rw_cdb(cdb, ops[k], 0, lba, 2);

		pattern(old, sizeof(old), (unsigned int)(40 + k));
		proto_assert_good(iscsi_write16_sync(iscsi, lun, lba, old,
						     sizeof(old), BS, 0, 0, 0,
						     0, 0), "WRITE(16)", false);
		pattern(buf, sizeof(buf), (unsigned int)(50 + k));
		proto_assert_sense(raw(iscsi, lun, cdb, len, buf, BS + 188, 0),
				   SCSI_SENSE_ILLEGAL_REQUEST, 0x0e03,
				   "Data-Out of 1.4 blocks for 2");
		assert_reads_back(iscsi, lun, lba, old, sizeof(old));
		proto_assert_good(raw(iscsi, lun, cdb, len, buf, BS, 0),
				  "Data-Out of 1 block for 2", false);
		memcpy(want, buf, BS);
		memcpy(want + BS, old + BS, BS);
		assert_reads_back(iscsi, lun, lba, want, sizeof(want));
	}
	iscsi_destroy_context(iscsi);
}
END_TEST

/* VERIFY and WRITE AND VERIFY with BYTCHK 10b, and WRITE AND VERIFY with
 * 11b (reserved in SBC-4): INVALID FIELD IN CDB, and nothing written.
 * tgt's VERIFY handler reads only BYTCHK's low bit and answers GOOD. */
START_TEST(test_cmd_bytchk_reserved)
{
	static const uint8_t ops[] = { 0x2f, 0x8f, 0x2e, 0x8e, 0xae };
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char old[BS], buf[BS];
	uint8_t cdb[16];

	for (size_t k = 0; k < sizeof(ops); k++) {
		uint64_t lba = 600 + k;
		uint8_t b1 = ops[k] == 0xae ? 0x06 : 0x04;
		int len = rw_cdb(cdb, ops[k], b1, lba, 1);
		char what[48];

		pattern(old, sizeof(old), (unsigned int)(60 + k));
		proto_assert_good(iscsi_write16_sync(iscsi, lun, lba, old,
						     sizeof(old), BS, 0, 0, 0,
						     0, 0), "WRITE(16)", false);
		pattern(buf, sizeof(buf), (unsigned int)(70 + k));
		snprintf(what, sizeof(what), "opcode 0x%02x BYTCHK=%u", ops[k],
			 (unsigned int)(b1 >> 1));
		proto_assert_sense(raw(iscsi, lun, cdb, len, buf, BS, 0),
				   SCSI_SENSE_ILLEGAL_REQUEST, 0x2400, what);
		assert_reads_back(iscsi, lun, lba, old, sizeof(old));
	}
	iscsi_destroy_context(iscsi);
}
END_TEST

/* SBC-3 4.5: every block command beyond the capacity */
START_TEST(test_cmd_beyond_capacity)
{
	static const uint8_t ops[] = { 0x28, 0xa8, 0x88, 0x2a, 0xaa, 0x8a,
				       0x2e, 0xae, 0x8e, 0x2f, 0xaf, 0x8f,
				       0x35, 0x91, 0x34, 0x90, 0x41, 0x93 };
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char buf[2 * BS] = { 0 };
	uint8_t cdb[16];

	for (size_t k = 0; k < sizeof(ops); k++) {
		uint8_t op = ops[k];
		bool out = (op & 0x0f) == 0x0a || (op & 0x0f) == 0x0e ||
			   op == 0x41 || op == 0x93;
		bool in = (op & 0x0f) == 0x08;
		int len = rw_cdb(cdb, op, 0, CAP - 1, 2);
		char what[48];

		snprintf(what, sizeof(what), "opcode 0x%02x at capacity - 1 + 2",
			 op);
		proto_assert_sense(raw(iscsi, lun, cdb, len, out ? buf : NULL,
			out ? (op == 0x41 || op == 0x93 ? BS : 2 * BS) : 0,
			in ? 2 * BS : 0), SCSI_SENSE_ILLEGAL_REQUEST, 0x2100,
			what);
	}
	iscsi_destroy_context(iscsi);
}
END_TEST

START_TEST(test_cmd_sync_cache_immed)
{
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char buf[BS];

	pattern(buf, sizeof(buf), 3);
	proto_assert_good(iscsi_write10_sync(iscsi, lun, 7, buf, BS, BS, 0, 0,
			  0, 0, 0), "WRITE(10)", false);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 1),
			  "SYNCHRONIZE CACHE(10) IMMED", false);
	proto_assert_good(iscsi_synchronizecache16_sync(iscsi, lun, 0, 0, 0, 1),
			  "SYNCHRONIZE CACHE(16) IMMED", false);
	proto_assert_sense(iscsi_synchronizecache16_sync(iscsi, lun, CAP, 1, 0,
		1), SCSI_SENSE_ILLEGAL_REQUEST, 0x2100,
		"SYNCHRONIZE CACHE(16) IMMED beyond capacity");
	proto_assert_good(iscsi_testunitready_sync(iscsi, lun),
			  "TEST UNIT READY after IMMED", false);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* The WRITE+SYNCHRONIZE CACHE loop at QD1 on write-back (core/lun.c,
 * syncguard_write_persist), as tgtd hands it over: once it runs, each
 * plain write is made durable itself (RWF_DSYNC) and its SYNCHRONIZE
 * CACHE costs no device flush; the data reads back; plain writes without
 * a SYNCHRONIZE CACHE between them are cached again, one flush for all.
 * _i: write-back, write-back direct=yes. */
START_TEST(test_cmd_write_sync_loop)
{
	int lun = _i ? 5 : 2;
	struct iscsi_context *iscsi = proto_connect(lun);
	long long dsync = proto_counter(lun, "dsync_writes");
	long long flushes = proto_counter(lun, "device_flushes");
	unsigned char buf[BS], got[BS];
	struct scsi_task *t;

	for (uint32_t i = 0; i < 40; i++) {
		pattern(buf, sizeof(buf), i);
		proto_assert_good(iscsi_write10_sync(iscsi, lun, 100 + i, buf, BS,
				  BS, 0, 0, 0, 0, 0), "WRITE(10)", false);
		proto_assert_good(iscsi_synchronizecache10_sync(iscsi, lun, 0,
				  0, 0, 0), "SYNCHRONIZE CACHE(10)", false);
	}
	ck_assert_int_ge(proto_counter(lun, "dsync_writes") - dsync, 30);
	ck_assert_int_le(proto_counter(lun, "device_flushes") - flushes, 10);
	for (uint32_t i = 0; i < 40; i++) {
		pattern(buf, sizeof(buf), i);
		t = iscsi_read10_sync(iscsi, lun, 100 + i, BS, BS, 0, 0, 0, 0, 0);
		proto_assert_good(t, "READ(10)", true);
		memcpy(got, t->datain.data, BS);
		scsi_free_scsi_task(t);
		ck_assert_mem_eq(got, buf, BS);
	}
	dsync = proto_counter(lun, "dsync_writes");
	flushes = proto_counter(lun, "device_flushes");
	for (uint32_t i = 0; i < 16; i++)
		proto_assert_good(iscsi_write10_sync(iscsi, lun, 200 + i, buf, BS,
				  BS, 0, 0, 0, 0, 0), "WRITE(10)", false);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10)", false);
	ck_assert_int_le(proto_counter(lun, "dsync_writes") - dsync, 1);
	ck_assert_int_eq(proto_counter(lun, "device_flushes") - flushes, 1);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* START STOP UNIT on write-back (LUN 2), through tgtd: a stop with
 * NO_FLUSH=0 writes the cache first (one device flush after plain
 * writes, SBC-3 5.25), where tgt answered GOOD at once; a stop with
 * NO_FLUSH=1 and a start flush nothing, and the LUN goes on answering
 * (core/exec.c, exec_start_stop; glue/cmdtable.c). */
START_TEST(test_cmd_start_stop_flushes)
{
	struct iscsi_context *iscsi = proto_connect(2);
	unsigned char buf[BS];
	long long flushes;

	pattern(buf, sizeof(buf), 7);
	for (uint32_t i = 0; i < 4; i++)
		proto_assert_good(iscsi_write10_sync(iscsi, 2, 300 + i, buf, BS,
				  BS, 0, 0, 0, 0, 0), "WRITE(10)", false);
	flushes = proto_counter(2, "device_flushes");
	proto_assert_good(iscsi_startstopunit_sync(iscsi, 2, 0, 0, 0, 1, 0, 0),
			  "START STOP UNIT, stop, NO_FLUSH=1", false);
	proto_assert_good(iscsi_startstopunit_sync(iscsi, 2, 0, 0, 0, 0, 0, 1),
			  "START STOP UNIT, start", false);
	ck_assert_int_eq(proto_counter(2, "device_flushes") - flushes, 0);
	proto_assert_good(iscsi_startstopunit_sync(iscsi, 2, 0, 0, 0, 0, 0, 0),
			  "START STOP UNIT, stop", false);
	flushes = proto_counter(2, "device_flushes") - flushes;
	proto_assert_good(iscsi_write10_sync(iscsi, 2, 300, buf, BS, BS, 0, 0,
			  0, 0, 0), "WRITE(10) after the stop", false);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(flushes, 1);
}
END_TEST

static struct scsi_task *vpd(struct iscsi_context *iscsi, int lun, int page)
{
	struct scsi_task *t = iscsi_inquiry_sync(iscsi, lun, 1, page, 255);

	proto_assert_good(t, "INQUIRY EVPD", true);
	return t;
}

START_TEST(test_cmd_vpd_pages)
{
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	struct scsi_task *t = vpd(iscsi, lun, 0x00);
	unsigned char *d;
	bool listed = false;

	for (int k = 4; k < t->datain.size; k++)
		listed |= t->datain.data[k] == 0x86;
	ck_assert_msg(listed, "VPD page 0x86 not in the supported list");
	scsi_free_scsi_task(t);
	t = vpd(iscsi, lun, 0x86);		/* Extended INQUIRY Data */
	d = t->datain.data;
	ck_assert_int_eq(d[1], 0x86);
	ck_assert_int_eq(d[6] & 0x01, luns[_i].v_sup);		/* V_SUP */
	ck_assert_int_eq((d[6] >> 1) & 0x01, luns[_i].nv_sup);	/* NV_SUP */
	scsi_free_scsi_task(t);
	t = vpd(iscsi, lun, 0xb0);		/* Block Limits */
	d = t->datain.data;
	ck_assert_int_eq(d[6] << 8 | d[7], 8);	/* 4096-byte physical blocks */
	ck_assert_int_eq(d[5], 128);		/* MAX COMPARE AND WRITE LENGTH */
	if (luns[_i].thin)
		ck_assert_int_eq(d[24] << 24 | d[25] << 16 | d[26] << 8 | d[27],
				 4095);		/* MAX UNMAP DESCRIPTOR COUNT */
	scsi_free_scsi_task(t);
	t = iscsi_readcapacity16_sync(iscsi, lun);
	proto_assert_good(t, "READ CAPACITY(16)", true);
	ck_assert_int_eq(t->datain.data[13] & 0x0f, 3);	/* LBPPBE */
	ck_assert_int_eq(!!(t->datain.data[14] & 0x80), luns[_i].thin); /* LBPME */
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* UNMAP and WRITE SAME with UNMAP: the freed range reads back zeroes */
START_TEST(test_cmd_unmap_reads_zeroes)
{
	int lun = luns[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char buf[16 * BS], zero[16 * BS] = { 0 };
	struct unmap_list list = { 2000, 16 };

	if (!luns[_i].thin) {	/* plp file LUNs refuse thin provisioning */
		proto_assert_sense(iscsi_unmap_sync(iscsi, lun, 0, 0, &list, 1),
				   SCSI_SENSE_ILLEGAL_REQUEST, 0x2000,
				   "UNMAP without thin provisioning");
		iscsi_destroy_context(iscsi);
		return;
	}
	pattern(buf, sizeof(buf), 8);
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 2000, buf, sizeof(buf),
			  BS, 0, 0, 0, 0, 0), "WRITE(16)", false);
	proto_assert_good(iscsi_unmap_sync(iscsi, lun, 0, 0, &list, 1), "UNMAP",
			  false);
	assert_reads_back(iscsi, lun, 2000, zero, sizeof(zero));
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 3000, buf, sizeof(buf),
			  BS, 0, 0, 0, 0, 0), "WRITE(16)", false);
	proto_assert_good(iscsi_writesame16_sync(iscsi, lun, 3000, NULL, 0, 16,
			  0, 1, 0, 0), "WRITE SAME(16) UNMAP", false);
	assert_reads_back(iscsi, lun, 3000, zero, sizeof(zero));
	iscsi_destroy_context(iscsi);
}
END_TEST

/* PERSISTENT RESERVE OUT (SPC-4 6.16) with the key @key and, for a
 * reservation, Write Exclusive. */
static struct scsi_task *pr_out(struct iscsi_context *iscsi, int lun,
				int sa, uint64_t key)
{
	struct scsi_persistent_reserve_out_basic p = { 0 };

	if (sa == SCSI_PERSISTENT_RESERVE_REGISTER)
		p.service_action_reservation_key = key;
	else
		p.reservation_key = key;
	return iscsi_persistent_reserve_out_sync(iscsi, lun, sa, 0,
		SCSI_PERSISTENT_RESERVE_TYPE_WRITE_EXCLUSIVE, &p);
}

/*
 * A persistent reservation of type Write Exclusive fences every other
 * I_T nexus off the medium: each command that would change it gets
 * RESERVATION CONFLICT and changes nothing (SBC-3's table of commands
 * allowed in the presence of reservations; glue/cmdtable.c,
 * medium_writers), WRITE AND VERIFY, WRITE SAME, UNMAP, COMPARE AND
 * WRITE and ORWRITE as WRITE does.  Once the holder clears it the same
 * WRITE SAME is answered GOOD.
 */
START_TEST(test_cmd_reservation_fences_writes)
{
	static const uint8_t ops[] = { 0x2a, 0x2e, 0xae, 0x8e, 0x41, 0x93,
				       0x89, 0x8b, 0x42 };
	int lun = luns[_i].lun;
	struct iscsi_context *holder = proto_connect(lun);
	struct iscsi_context *other = proto_connect(lun);
	unsigned char old[2 * BS], buf[2 * BS], unmap[24] = { 0, 22, 0, 16 };
	const uint64_t lba = 3500, key = 0x5ca1ab1e;
	uint8_t cdb[16];
	struct scsi_task *t;

	pattern(old, sizeof(old), (unsigned int)(70 + _i));
	proto_assert_good(iscsi_write16_sync(holder, lun, lba, old, sizeof(old),
			  BS, 0, 0, 0, 0, 0), "WRITE(16) by the holder", false);
	proto_assert_good(pr_out(holder, lun, SCSI_PERSISTENT_RESERVE_REGISTER,
				 key), "PERSISTENT RESERVE OUT REGISTER", false);
	proto_assert_good(pr_out(holder, lun, SCSI_PERSISTENT_RESERVE_RESERVE,
				 key), "PERSISTENT RESERVE OUT RESERVE", false);
	pattern(buf, sizeof(buf), (unsigned int)(80 + _i));
	put(unmap + 8, 8, lba);		/* one block descriptor: 2 blocks */
	put(unmap + 16, 4, 2);
	for (size_t k = 0; k < sizeof(ops); k++) {
		/* WRITE SAME: one block; COMPARE AND WRITE: one block,
		 * compared and written */
		uint32_t out = ops[k] == 0x41 || ops[k] == 0x93 ? BS :
			       ops[k] == 0x89 ? 2 * BS : sizeof(buf);
		int len = rw_cdb(cdb, ops[k], 0, lba, ops[k] == 0x89 ? 1 : 2);

		if (ops[k] == 0x42) {	/* UNMAP: a parameter list */
			if (!luns[_i].thin)
				continue;
			memset(cdb, 0, 10);
			cdb[0] = 0x42;
			cdb[8] = sizeof(unmap);
			len = 10;
		}
		t = raw(other, lun, cdb, len, ops[k] == 0x42 ? unmap : buf,
			ops[k] == 0x42 ? sizeof(unmap) : out, 0);
		ck_assert_ptr_nonnull(t);
		ck_assert_msg(t->status == SCSI_STATUS_RESERVATION_CONFLICT,
			      "opcode 0x%02x from a fenced nexus: status 0x%x, "
			      "expected RESERVATION CONFLICT", ops[k],
			      t->status);
		scsi_free_scsi_task(t);
		assert_reads_back(holder, lun, lba, old, sizeof(old));
	}
	proto_assert_good(pr_out(holder, lun, SCSI_PERSISTENT_RESERVE_CLEAR,
				 key), "PERSISTENT RESERVE OUT CLEAR", false);
	proto_assert_good(raw(other, lun, cdb, rw_cdb(cdb, 0x93, 0, lba, 2),
			      buf, BS, 0), "WRITE SAME(16) once cleared", false);
	iscsi_destroy_context(other);
	iscsi_destroy_context(holder);
}
END_TEST

Suite *commands_suite(void)
{
	Suite *s = suite_create("commands");
	TCase *tc = tcase_create("per-mode");

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_cmd_writes_fua_dpo, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_read_fua, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_compare_and_write, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_beyond_capacity, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_torn_data_out, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_bytchk_reserved, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_sync_cache_immed, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_vpd_pages, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_unmap_reads_zeroes, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_reservation_fences_writes, 0, NLUNS);
	tcase_add_loop_test(tc, test_cmd_write_sync_loop, 0, 2);
	tcase_add_test(tc, test_cmd_start_stop_flushes);
	suite_add_tcase(s, tc);
	return s;
}
