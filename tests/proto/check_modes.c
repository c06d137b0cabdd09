/*
 * One LUN per write-cache mode in one tgtd: what each reports (WCE,
 * DPOFUA), that data written reads back (over iSCSI and in the backing
 * file), that SYNCHRONIZE CACHE(10/16) and FUA writes succeed, and that
 * WCE changes by MODE SELECT follow the mode.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "proto.h"

#define LUN_BYTES (16u << 20)
#define BS 512u

static const struct {
	int lun;
	const char *bsopts;
	int wce;
} modes[] = {
	{ 1, "mode=write-through", 0 },
	{ 2, "mode=write-back", 1 },
	{ 3, "mode=plp", 0 },
	{ 4, NULL, 1 },		/* no bsopts: write-back */
};
#define NMODES (int)(sizeof(modes) / sizeof(modes[0]))

static char files[NMODES][700];

static void setup(void)
{
	proto_tgtd_start();
	for (int i = 0; i < NMODES; i++) {
		char name[32];
		const char *p;

		snprintf(name, sizeof(name), "mode%d.img", i);
		p = proto_file(name, LUN_BYTES, false);
		if (!p || proto_add_lun(modes[i].lun, p, modes[i].bsopts, 0)) {
			fprintf(stderr, "modes: cannot create LUN %d (%s)\n",
				modes[i].lun, modes[i].bsopts);
			proto_tgtd_stop();
			exit(EXIT_FAILURE);
		}
		snprintf(files[i], sizeof(files[i]), "%s", p);
	}
}

static void teardown(void)
{
	proto_tgtd_stop();
}

static void fill(unsigned char *buf, size_t len, unsigned int seed)
{
	srand(seed);
	for (size_t i = 0; i < len; i++)
		buf[i] = (unsigned char)rand();
}

/* The backing file holds @len bytes equal to @buf at block @lba. */
static void assert_in_file(int i, uint64_t lba, const unsigned char *buf,
			   size_t len)
{
	unsigned char got[8192];
	int fd = open(files[i], O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, got, len, (off_t)(lba * BS)), (ssize_t)len);
	close(fd);
	ck_assert_mem_eq(got, buf, len);
}

START_TEST(test_modes_wce_and_dpofua)
{
	struct iscsi_context *iscsi = proto_connect(modes[_i].lun);
	int wce, dpofua;

	proto_caching(iscsi, modes[_i].lun, &wce, &dpofua);
	ck_assert_int_eq(wce, modes[_i].wce);
	ck_assert_int_eq(dpofua, 1);
	iscsi_destroy_context(iscsi);
}
END_TEST

START_TEST(test_modes_write_read_back)
{
	int lun = modes[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char out[8192];
	struct scsi_task *t;

	for (int fua = 0; fua <= 1; fua++) {
		uint64_t lba = 1000 + 100 * (unsigned int)fua;

		fill(out, sizeof(out), (unsigned int)(_i * 2 + fua + 1));
		t = fua ? iscsi_write16_sync(iscsi, lun, lba, out, sizeof(out),
					     BS, 0, 0, 1, 0, 0) :
			  iscsi_write10_sync(iscsi, lun, (uint32_t)lba, out,
					     sizeof(out), BS, 0, 0, 0, 0, 0);
		proto_assert_good(t, fua ? "WRITE(16) FUA" : "WRITE(10)", false);
		t = iscsi_read16_sync(iscsi, lun, lba, sizeof(out), BS, 0, 0,
				      fua, 0, 0);
		proto_assert_good(t, "READ(16)", true);
		ck_assert_uint_eq(t->datain.size, sizeof(out));
		ck_assert_mem_eq(t->datain.data, out, sizeof(out));
		scsi_free_scsi_task(t);
		proto_assert_good(iscsi_synchronizecache10_sync(iscsi, lun, 0, 0,
			0, 0), "SYNCHRONIZE CACHE(10)", false);
		assert_in_file(_i, lba, out, sizeof(out));
	}
	iscsi_destroy_context(iscsi);
}
END_TEST

START_TEST(test_modes_sync_cache_ranges)
{
	int lun = modes[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	uint64_t cap = LUN_BYTES / BS;

	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, lun, 8, 16, 0, 0),
			  "SYNCHRONIZE CACHE(10) range", false);
	proto_assert_good(iscsi_synchronizecache16_sync(iscsi, lun, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(16)", false);
	proto_assert_good(iscsi_synchronizecache16_sync(iscsi, lun, cap - 1, 1,
		0, 0), "SYNCHRONIZE CACHE(16) last block", false);
	proto_assert_sense(iscsi_synchronizecache16_sync(iscsi, lun, cap - 1, 2,
		0, 0), SCSI_SENSE_ILLEGAL_REQUEST, 0x2100,
		"SYNCHRONIZE CACHE(16) past the end");
	proto_assert_sense(iscsi_synchronizecache16_sync(iscsi, lun, cap, 0,
		0, 0), SCSI_SENSE_ILLEGAL_REQUEST, 0x2100,
		"SYNCHRONIZE CACHE(16) at capacity");
	iscsi_destroy_context(iscsi);
}
END_TEST

/* Mode page @page as MODE SENSE(6) returns it (PS cleared) into @pg;
 * its length in bytes. */
static int sense_page(struct iscsi_context *iscsi, int lun, int page,
		      uint8_t *pg, int max)
{
	struct scsi_task *t = iscsi_modesense6_sync(iscsi, lun, 1,
		SCSI_MODESENSE_PC_CURRENT, page, 0, 255);
	int off, len;

	proto_assert_good(t, "MODE SENSE(6)", true);
	off = 4 + t->datain.data[3];		/* header, block descriptors */
	len = 2 + t->datain.data[off + 1];
	ck_assert_int_le(off + len, t->datain.size);
	ck_assert_int_le(len, max);
	memcpy(pg, t->datain.data + off, (size_t)len);
	pg[0] &= 0x7f;
	scsi_free_scsi_task(t);
	return len;
}

/* MODE SELECT(6), PF=1, of the @len bytes of mode pages at @pages */
static struct scsi_task *select_pages(struct iscsi_context *iscsi, int lun,
				      const uint8_t *pages, int len)
{
	uint8_t list[256] = { 0 };
	unsigned char cdb[6] = { 0x15, 0x10, 0, 0, (unsigned char)(4 + len), 0 };
	struct scsi_task *t = scsi_create_task(6, cdb, SCSI_XFER_WRITE, 4 + len);
	struct iscsi_data d = { (size_t)(4 + len), list };

	ck_assert_ptr_nonnull(t);
	memcpy(list + 4, pages, (size_t)len);
	return iscsi_scsi_command_sync(iscsi, lun, t, &d);
}

/* After WCE=0, MODE SELECTs that carry no Caching page (the Control
 * page alone; a list tgt refuses after its Caching page) leave WCE at 0:
 * tgt's handler turns it back to 1 after both, silently; a Caching page
 * with a wrong PAGE LENGTH is refused (tgt applies its WCE); of two
 * Caching pages the last counts, as tgt applies them in order (not the
 * first).  No MODE SENSE in between: one would reset what the selects
 * compare with. */
static void wce_off_stays_off(struct iscsi_context *iscsi, int lun)
{
	uint8_t control[64], pages[128];
	int n = sense_page(iscsi, lun, SCSI_MODEPAGE_CONTROL, control,
			   sizeof(control));
	int c = sense_page(iscsi, lun, SCSI_MODEPAGE_CACHING, pages,
			   sizeof(pages));

	proto_assert_good(proto_select_wce(iscsi, lun, 0), "MODE SELECT WCE=0",
			  false);
	proto_assert_good(select_pages(iscsi, lun, control, n),
			  "MODE SELECT of the Control page", false);
	ck_assert_int_eq(proto_counter(lun, "wce"), 0);
	pages[2] |= 0x04;			/* WCE=1, then a page tgt lacks */
	memcpy(pages + c, "\x3e\x02\x00\x00", 4);
	proto_assert_sense(select_pages(iscsi, lun, pages, c + 4),
			   SCSI_SENSE_ILLEGAL_REQUEST, 0x2600,
			   "MODE SELECT with an unknown page");
	ck_assert_int_eq(proto_counter(lun, "wce"), 0);
	proto_assert_good(select_pages(iscsi, lun, control, n),
			  "MODE SELECT of the Control page", false);
	ck_assert_int_eq(proto_counter(lun, "wce"), 0);
	pages[1] += 2;			/* a PAGE LENGTH not the page's */
	memset(pages + c, 0, 2);
	proto_assert_sense(select_pages(iscsi, lun, pages, c + 2),
			   SCSI_SENSE_ILLEGAL_REQUEST, 0x2600,
			   "MODE SELECT of a Caching page 2 bytes long");
	ck_assert_int_eq(proto_counter(lun, "wce"), 0);
	pages[1] -= 2;			/* WCE=1, then WCE=0: tgt applies both */
	memcpy(pages + c, pages, (size_t)c);
	pages[c + 2] &= ~0x04;
	proto_assert_good(select_pages(iscsi, lun, pages, 2 * c),
			  "MODE SELECT of two Caching pages", false);
	ck_assert_int_eq(proto_counter(lun, "wce"), 0);	/* the last one */
}

/* WCE of the Caching page's default values (MODE SENSE(6), PC 10b) */
static int default_wce(struct iscsi_context *iscsi, int lun)
{
	struct scsi_task *t = iscsi_modesense6_sync(iscsi, lun, 1,
		SCSI_MODESENSE_PC_DEFAULT, 8, 0, 255);
	int off, wce;

	proto_assert_good(t, "MODE SENSE(6), default values", true);
	off = 4 + t->datain.data[3];
	ck_assert_int_lt(off + 2, t->datain.size);
	wce = !!(t->datain.data[off + 2] & 0x04);
	scsi_free_scsi_task(t);
	return wce;
}

START_TEST(test_modes_mode_select_wce)
{
	int lun = modes[_i].lun, wce, dpofua;
	struct iscsi_context *iscsi = proto_connect(lun);

	if (modes[_i].wce) {	/* write-back: the initiator may turn it off */
		wce_off_stays_off(iscsi, lun);
		proto_caching(iscsi, lun, &wce, &dpofua);
		ck_assert_int_eq(wce, 0);
		/* the default stays the mode's (tgt's handler shows the
		 * current value), and showing it changes nothing */
		ck_assert_int_eq(default_wce(iscsi, lun), 1);
		proto_caching(iscsi, lun, &wce, &dpofua);
		ck_assert_int_eq(wce, 0);
		proto_assert_good(proto_select_wce(iscsi, lun, 1), "MODE SELECT WCE=1",
				  false);
		proto_caching(iscsi, lun, &wce, &dpofua);
		ck_assert_int_eq(wce, 1);
	} else {		/* write-through, plp: WCE stays 0 */
		proto_assert_sense(proto_select_wce(iscsi, lun, 1),
				   SCSI_SENSE_ILLEGAL_REQUEST, 0x2600,
				   "MODE SELECT WCE=1");
		proto_caching(iscsi, lun, &wce, &dpofua);
		ck_assert_int_eq(wce, 0);
		ck_assert_int_eq(default_wce(iscsi, lun), 0);
	}
	iscsi_destroy_context(iscsi);
}
END_TEST

/* A session writing 1-8 blocks at random in the first @blocks of @lun,
 * half of them FUA, until killed; exits 1 when the session is lost, 2
 * when a write fails other than by UNIT ATTENTION (a child process: it
 * dies with the test process). */
static pid_t start_writer(int lun, uint32_t blocks, unsigned int seed)
{
	unsigned char out[8 * BS];
	struct iscsi_context *iscsi;
	pid_t pid = proto_child();

	if (pid)
		return pid;
	srand(seed);
	memset(out, (int)seed, sizeof(out));
	iscsi = proto_connect(lun);
	for (;;) {
		uint32_t n = 1 + (uint32_t)rand() % 8;
		struct scsi_task *t = iscsi_write16_sync(iscsi, lun,
			(uint64_t)rand() % (blocks - n), out, n * BS, BS, 0, 0,
			rand() % 2, 0, 0);

		if (!t)
			_exit(1);
		/* a mode change is announced to the other sessions (SPC-4
		 * 6.10: MODE PARAMETERS CHANGED), the write not done */
		if (t->status != SCSI_STATUS_GOOD &&
		    t->sense.key != SCSI_SENSE_UNIT_ATTENTION)
			_exit(2);
		scsi_free_scsi_task(t);
	}
}

/*
 * WCE switched back and forth, by MODE SELECT and by tgtadm, while
 * four sessions write: every switch is answered and no write fails.
 * On write-back with direct=auto (a 2 MiB file: one granule, where
 * page-cache and O_DIRECT FUA writes meet) a MODE SELECT setting
 * WCE=1 that took the write lock on tgtd's event thread, while worker
 * threads holding it wait for that thread's O_DIRECT writes, would hang
 * tgtd within a second (core/mix.c).  Such a hang fails this test: a
 * MODE SELECT not answered in 10 s (the iSCSI timeout turns the hang
 * into a failure), or a tgtadm switch that hangs until the test's
 * timeout; tgtd-private's stop then kills it.
 */
START_TEST(test_modes_wce_toggle_under_load)
{
	static const char *const page[2] = {
		"mode_page=8:0:18:0x10:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:"
		"0x80:0x14:0:0:0:0:0:0",
		"mode_page=8:0:18:0x14:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:"
		"0x80:0x14:0:0:0:0:0:0" };
	const int lun = 9;
	struct iscsi_context *iscsi;
	pid_t writers[4];
	int status;

	ck_assert_int_eq(proto_add_lun(lun, proto_file("toggle.img", 2u << 20,
				       false), "mode=write-back", BS), 0);
	iscsi = proto_connect(lun);
	iscsi_set_timeout(iscsi, 10);	/* a hung tgtd: fail, not wait */
	for (int w = 0; w < 4; w++)
		writers[w] = start_writer(lun, (2u << 20) / BS, 1u + (unsigned)w);
	usleep(200000);
	for (int k = 0; k < 400; k++) {
		int wce = k % 2;

		if (k % 10 < 8)
			proto_assert_good(proto_select_wce(iscsi, lun, wce),
					  wce ? "MODE SELECT WCE=1" :
					  "MODE SELECT WCE=0", false);
		else {
			ck_assert_int_eq(proto_update_lun(lun, page[wce]), 0);
			/* told of the change, as every other nexus is */
			proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
					   SCSI_SENSE_UNIT_ATTENTION, 0x2a01,
					   "TEST UNIT READY after tgtadm's WCE");
		}
	}
	for (int w = 0; w < 4; w++) {
		status = proto_child_end(writers[w]);
		ck_assert_msg(status == -1, "writer %d: %s", w, status == 1 ?
			      "session lost" : "a write failed");
	}
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/* tgtadm moves LUN @lun to a new file @name of @bytes: offline, then
 * path= (tgt takes the LUN online again) */
static void move_lun(int lun, const char *name, unsigned int bytes)
{
	char params[512];

	ck_assert_int_eq(proto_update_lun(lun, "online=0"), 0);
	snprintf(params, sizeof(params), "path=%s",
		 proto_file(name, bytes, false));
	ck_assert_int_eq(proto_update_lun(lun, params), 0);
}

/*
 * An administrator's WCE change (tgtadm mode_page, or path= reopening a
 * write-back store with WCE=1) after an initiator set WCE=0: that
 * initiator sends no SYNCHRONIZE CACHE, so it must hear of the change,
 * a unit attention MODE PARAMETERS CHANGED.  Without it, its next
 * command gets GOOD and a power cut then loses plain writes
 * acknowledged after the change.
 */
START_TEST(test_modes_admin_wce_change_announced)
{
	const int lun = 10;
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(lun, proto_file("admin-wce.img", 1u << 20,
				       false), "mode=write-back", BS), 0);
	iscsi = proto_connect(lun);
	proto_assert_good(proto_select_wce(iscsi, lun, 0), "MODE SELECT WCE=0",
			  false);
	ck_assert_int_eq(proto_update_lun(lun, "mode_page=8:0:18:0x14:0:0xff:"
		"0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0"), 0);
	proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
			   SCSI_SENSE_UNIT_ATTENTION, 0x2a01,
			   "TEST UNIT READY after tgtadm set WCE=1");
	proto_assert_good(proto_select_wce(iscsi, lun, 0), "MODE SELECT WCE=0",
			  false);
	move_lun(lun, "admin-wce2.img", 1u << 20);
	proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
			   SCSI_SENSE_UNIT_ATTENTION, 0x2a01,
			   "TEST UNIT READY after path= reopened with WCE=1");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/*
 * A path= move to a store of another size: every initiator hears of it,
 * a unit attention CAPACITY DATA HAS CHANGED, and READ CAPACITY then
 * gives the new size (tgt's own stores answer GOOD, and the initiator
 * goes on with the old capacity).  A move to one of the same size raises
 * none.
 */
START_TEST(test_modes_path_capacity_change_announced)
{
	const int lun = 13;
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	struct scsi_readcapacity16 *rc;

	ck_assert_int_eq(proto_add_lun(lun, proto_file("cap1.img", 1u << 20,
				       false), "mode=write-back", BS), 0);
	iscsi = proto_connect(lun);
	move_lun(lun, "cap2.img", 1u << 20);
	proto_assert_good(iscsi_testunitready_sync(iscsi, lun),
			  "TEST UNIT READY after a move to the same size", false);
	move_lun(lun, "cap3.img", 2u << 20);
	proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
			   SCSI_SENSE_UNIT_ATTENTION, 0x2a09,
			   "TEST UNIT READY after a move to another size");
	t = iscsi_readcapacity16_sync(iscsi, lun);
	ck_assert_msg(t && t->status == SCSI_STATUS_GOOD, "READ CAPACITY(16)");
	rc = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(rc);
	ck_assert_uint_eq(rc->returned_lba + 1, (2u << 20) / BS);
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/*
 * path= while the LUN is online is refused with a reason in tgtd.log
 * (tgt refuses it without one), and a LUN left without a store by a
 * refused path= cannot be put online (tgt takes online=1, and the LUN
 * then answers as a 0-byte disk); a good path= brings it back.  A LUN
 * without a store answers SYNCHRONIZE CACHE NOT READY, MEDIUM NOT
 * PRESENT: tgt hands it to the store even offline, and a closed LUN has
 * nothing volatile of its own, so it would answer GOOD for the write the
 * old store's final flush may yet lose.
 */
START_TEST(test_modes_path_refusals)
{
	const int lun = 14, other = 15;
	struct iscsi_context *iscsi;
	unsigned char block[BS];
	char params[512];

	ck_assert_int_eq(proto_add_lun(lun, proto_file("refuse1.img", 1u << 20,
				       false), "mode=write-back", BS), 0);
	ck_assert_int_eq(proto_add_lun(other, proto_file("refuse2.img", 1u << 20,
				       false), "mode=write-back", BS), 0);
	iscsi = proto_connect(lun);
	snprintf(params, sizeof(params), "path=%s", proto_file("refuse3.img",
		 1u << 20, false));
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	ck_assert(proto_log_has("path change refused: the LUN is online"));
	memset(block, 0x5a, sizeof(block));
	proto_assert_good(iscsi_write10_sync(iscsi, lun, 0, block, BS, BS, 0,
					     0, 0, 0, 0),
			  "WRITE(10), cached, before the move", false);
	ck_assert_int_eq(proto_update_lun(lun, "online=0"), 0);
	/* another LUN's file: refused by the module, after tgt closed the
	 * LUN's own store */
	snprintf(params, sizeof(params), "path=%s/refuse2.img", proto_dir());
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0,
							 0),
			   SCSI_SENSE_NOT_READY, 0x3a00,
			   "SYNCHRONIZE CACHE(10) of the LUN without a store");
	proto_assert_sense(iscsi_synchronizecache16_sync(iscsi, lun, 0, 0, 0,
							 0),
			   SCSI_SENSE_NOT_READY, 0x3a00,
			   "SYNCHRONIZE CACHE(16) of the LUN without a store");
	ck_assert_int_ne(proto_update_lun(lun, "online=1"), 0);
	ck_assert(proto_log_has("online=1 refused: no backing store"));
	/* tgt applies every online= in turn: the last one would count */
	ck_assert_int_ne(proto_update_lun(lun, "online=0,online=1"), 0);
	ck_assert_int_eq(proto_log_count("online=1 refused: no backing "
					 "store"), 2);
	proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
			   SCSI_SENSE_NOT_READY, 0x0401,
			   "TEST UNIT READY after online=0,online=1");
	/* nor with a path= in the same update, which tgt applies after the
	 * online=1 (taken, the LUN is online with 0 bytes when that path=
	 * fails) */
	snprintf(params, sizeof(params), "online=1,path=%s/none.img",
		 proto_dir());
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	ck_assert(proto_log_has("path= and online= in one update"));
	proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
			   SCSI_SENSE_NOT_READY, 0x0401,
			   "TEST UNIT READY of the LUN without a store");
	/* back on a store of the size initiators were told of: nothing to
	 * announce (not a change of capacity from 0 to 1 MiB) */
	move_lun(lun, "refuse4.img", 1u << 20);
	proto_assert_good(iscsi_testunitready_sync(iscsi, lun),
			  "TEST UNIT READY back on a store of the same size",
			  false);
	/* and on one of another size after a failed path=: told */
	ck_assert_int_eq(proto_update_lun(lun, "online=0"), 0);
	snprintf(params, sizeof(params), "path=%s/none.img", proto_dir());
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	move_lun(lun, "refuse5.img", 2u << 20);
	proto_assert_sense(iscsi_testunitready_sync(iscsi, lun),
			   SCSI_SENSE_UNIT_ATTENTION, 0x2a09,
			   "TEST UNIT READY back on a store of another size");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(other), 0);
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/*
 * A syncguard LUN is a fixed disk (bs_syncguard.c, fixed_disk): tgt makes
 * a LUN created without a store removable media, and a media changer's
 * MOVE MEDIUM into a drive that is one closes the drive's store at once,
 * with commands still running on it (tgt's dtd_load_unload), and opens
 * the medium's file in its place.  Here the LUN gets its store by path=
 * and stops being removable; a changer whose drive is that LUN then has
 * its MOVE MEDIUM refused (tgt's HARDWARE ERROR, MECHANICAL POSITIONING
 * ERROR), and the LUN keeps its store and its data; removable=1 is
 * refused.
 */
START_TEST(test_modes_fixed_media)
{
	const int lun = 16, changer = 17;
	/* MOVE MEDIUM (SMC-3 6.6): transport 0, source 1000, destination 100 */
	unsigned char move[12] = { 0xa5, 0, 0, 0, 0x03, 0xe8, 0, 100 };
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	unsigned char block[BS];
	char params[512];

	ck_assert_int_eq(proto_adm("--op new --mode logicalunit --tid %d --lun "
				   "%d --bstype syncguard", PROTO_TID, lun), 0);
	ck_assert(proto_lun_shows(lun, "Removable media: Yes"));
	snprintf(params, sizeof(params), "path=%s", proto_file("fixed.img",
		 1u << 20, false));
	ck_assert_int_eq(proto_update_lun(lun, params), 0);
	ck_assert(proto_lun_shows(lun, "Removable media: No"));
	ck_assert(proto_log_has("a fixed disk from now on"));
	ck_assert_int_ne(proto_update_lun(lun, "removable=1"), 0);
	ck_assert(proto_log_has("removable=1 refused"));
	/* tgt applies every removable= in turn: the last one would count */
	ck_assert_int_ne(proto_update_lun(lun, "removable=0,removable=1"), 0);
	ck_assert_int_eq(proto_log_count("removable=1 refused"), 2);
	ck_assert(proto_lun_shows(lun, "Removable media: No"));

	/* a changer: storage slot 1000 holds a medium whose file exists,
	 * drive 100 is the syncguard LUN */
	ck_assert_int_eq(proto_adm("--op new --mode logicalunit --tid %d --lun "
				   "%d --device-type changer --bstype rdwr -b "
				   "%s", PROTO_TID, changer,
				   proto_file("changer.img", 1u << 20, false)), 0);
	proto_file("medium", 1u << 20, false);
	ck_assert_int_eq(proto_update_lun(changer, "element_type=2,"
					  "start_address=1000,quantity=1"), 0);
	ck_assert_int_eq(proto_update_lun(changer, "element_type=4,"
					  "start_address=100,quantity=1"), 0);
	snprintf(params, sizeof(params), "element_type=4,address=100,tid=%d,"
		 "lun=%d", PROTO_TID, lun);
	ck_assert_int_eq(proto_update_lun(changer, params), 0);
	snprintf(params, sizeof(params), "media_home=%s", proto_dir());
	ck_assert_int_eq(proto_update_lun(changer, params), 0);
	ck_assert_int_eq(proto_update_lun(changer, "element_type=2,"
					  "address=1000,barcode=medium"), 0);

	iscsi = proto_connect(lun);
	memset(block, 0xa5, sizeof(block));
	proto_assert_good(iscsi_write10_sync(iscsi, lun, 0, block, BS, BS, 0,
					     0, 0, 0, 0),
			  "WRITE(10) before the MOVE MEDIUM", false);
	/* the changer's first command on this nexus gets its unit
	 * attention (power on) */
	t = iscsi_testunitready_sync(iscsi, changer);
	if (t)
		scsi_free_scsi_task(t);
	t = scsi_create_task(sizeof(move), move, SCSI_XFER_NONE, 0);
	ck_assert(t != NULL);
	t = iscsi_scsi_command_sync(iscsi, changer, t, NULL);
	proto_assert_sense(t, SCSI_SENSE_HARDWARE_ERROR, 0x1501,
			   "MOVE MEDIUM into the syncguard LUN");
	ck_assert(proto_lun_shows(lun, "fixed.img"));
	t = iscsi_read10_sync(iscsi, lun, 0, BS, BS, 0, 0, 0, 0, 0);
	ck_assert(t && t->status == SCSI_STATUS_GOOD &&
		  t->datain.size == (int)BS);
	ck_assert_msg(!memcmp(t->datain.data, block, BS),
		      "the LUN's data after the MOVE MEDIUM");
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(changer), 0);
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/*
 * Submission batching on the ring (glue/uring.c, rules in core/flush.c):
 * a read or write waits for the end of tgtd's loop pass while others
 * keep arriving.  At QD1 each write goes in an enter of its own, at once,
 * without waiting for empty passes (ring_held_submits counts the enters
 * that waited: at QD1 one a write, and only the first 512 writes at most
 * after a deeper load, where a 1 s run makes thousands; the rule itself:
 * test_flush_submit_low_depth); at QD32 enters carry several writes,
 * O_DIRECT ones on a plp LUN (one device notification per enter) and
 * page-cache ones on a write-back LUN (one hand-off to io-wq per enter:
 * no O_DIRECT write counted there).  Without batching ring_ios and
 * ring_submits are equal.
 */
static void ring_load(int lun, int qd, long long *ios, long long *submits,
		      long long *direct, long long *waited)
{
	const char *top = getenv("SYNCGUARD_TOP");
	long long i0 = proto_counter(lun, "ring_ios");
	long long s0 = proto_counter(lun, "ring_submits");
	long long d0 = proto_counter(lun, "direct_writes");
	long long w0 = proto_counter(lun, "ring_held_submits");

	ck_assert_int_eq(proto_sh("'%s/tools/iscsi-syncbench' -q %d -t 1 "
				  "--no-progress '%s' >/dev/null",
				  top ? top : ".", qd, proto_url(lun)), 0);
	*ios = proto_counter(lun, "ring_ios") - i0;
	*submits = proto_counter(lun, "ring_submits") - s0;
	*direct = proto_counter(lun, "direct_writes") - d0;
	*waited = proto_counter(lun, "ring_held_submits") - w0;
}

START_TEST(test_modes_ring_submission_batching)
{
	static const char *const bsopts[] = {
		"mode=plp,engine=uring",			/* O_DIRECT */
		"mode=write-back,engine=uring,direct=auto",	/* page cache */
	};
	const int lun = 11;
	long long ios, submits, direct, waited;
	size_t i;

	for (i = 0; i < sizeof(bsopts) / sizeof(bsopts[0]); i++) {
		ck_assert_int_eq(proto_add_lun(lun, proto_file("ring.img",
					       64u << 20, false), bsopts[i],
					       BS), 0);
		ring_load(lun, 1, &ios, &submits, &direct, &waited);
		ck_assert_int_gt(ios, 0);
		ck_assert_msg(submits == ios, "%s QD1: %lld writes in %lld "
			      "enters", bsopts[i], ios, submits);
		ck_assert_msg(waited <= 512, "%s QD1: %lld of %lld enters "
			      "waited for empty passes", bsopts[i], waited,
			      submits);
		ring_load(lun, 32, &ios, &submits, &direct, &waited);
		ck_assert_int_gt(ios, 0);
		ck_assert_msg(submits < ios, "%s QD32: %lld writes in %lld "
			      "enters", bsopts[i], ios, submits);
		/* plp's writes O_DIRECT, write-back's to the page cache */
		ck_assert_msg((direct == ios) == (i == 0), "%s QD32: %lld of "
			      "%lld writes O_DIRECT", bsopts[i], direct, ios);
		ck_assert_int_eq(proto_del_lun(lun), 0);
	}
}
END_TEST

/*
 * write_sync=auto's trial on the ring (glue/uring.c, io_done and
 * flush_done; the rule: core/writesync.c).  A durable write with no other
 * in flight takes RWF_DSYNC whichever way the trial runs, so its answer
 * scores neither way: a QD1 load for 1 s (five 200 ms epochs) leaves
 * both rates unmeasured.  A QD8 load's writes overlap, and its epochs are
 * scored.  The unit tests cover the same rule on the worker threads
 * (test_exec_auto_write_sync).
 */
START_TEST(test_modes_ring_lone_writes_unscored)
{
	const char *top = getenv("SYNCGUARD_TOP");
	const int lun = 11;

	ck_assert_int_eq(proto_add_lun(lun, proto_file("lone.img", 64u << 20,
				       false), "mode=write-through,"
				       "engine=uring", BS), 0);
	ck_assert_int_eq(proto_sh("'%s/tools/iscsi-syncbench' -q 1 -t 1 "
				  "--no-progress '%s' >/dev/null",
				  top ? top : ".", proto_url(lun)), 0);
	ck_assert_int_gt(proto_counter(lun, "ring_ios"), 0);
	ck_assert_msg(proto_counter(lun, "write_sync_rate.dsync") == 0 &&
		      proto_counter(lun, "write_sync_rate.group") == 0,
		      "QD1 writes, each alone in flight, scored the trial: "
		      "dsync %lld/s, group %lld/s",
		      proto_counter(lun, "write_sync_rate.dsync"),
		      proto_counter(lun, "write_sync_rate.group"));
	ck_assert_int_eq(proto_sh("'%s/tools/iscsi-syncbench' -q 8 -t 1 "
				  "--no-progress '%s' >/dev/null",
				  top ? top : ".", proto_url(lun)), 0);
	ck_assert_msg(proto_counter(lun, "write_sync_rate.dsync") > 0 ||
		      proto_counter(lun, "write_sync_rate.group") > 0,
		      "QD8 writes did not score the trial");
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/* An asynchronous command's outcome (libiscsi's callback). */
struct outcome {
	bool done;
	int status;
};

static void on_outcome(struct iscsi_context *iscsi, int status, void *task,
		       void *data)
{
	struct outcome *o = data;

	(void)iscsi;
	o->done = true;
	o->status = status;
	scsi_free_scsi_task(task);
}

/* Run @iscsi's I/O until @o is answered (or, @o NULL, until what is
 * queued has gone out), for @ms milliseconds at most; 0 when it was. */
static int service(struct iscsi_context *iscsi, struct outcome *o, int ms)
{
	for (int waited = 0; waited < ms; waited += 10) {
		struct pollfd p = { iscsi_get_fd(iscsi),
				    (short)iscsi_which_events(iscsi), 0 };

		if (o ? o->done : !iscsi_out_queue_length(iscsi))
			return 0;
		if (poll(&p, 1, 10) < 0 ||
		    iscsi_service(iscsi, p.revents) < 0)
			return -1;
	}
	return o ? !o->done : iscsi_out_queue_length(iscsi) != 0;
}

/* An ORDERED SYNCHRONIZE CACHE waits in tgt's queue behind another
 * initiator's SYNCHRONIZE CACHE, whose connection then closes while its
 * flush runs (a write made after the flush began leaves the LUN dirty).
 * tgt starts the ORDERED one from within the first one's answer, which
 * then joins the next flush of the LUN while the ring still answers the
 * first: it must be answered too, and the LUN then deleted at once.
 * Each round's flush writes back 4 MiB of page cache so that the
 * closing comes while it runs; 10 rounds. */
START_TEST(test_modes_ordered_flush_closed)
{
	static unsigned char big[512 * 1024], out[8 * BS];
	const int lun = 20;

	memset(big, 0x3c, sizeof(big));
	memset(out, 0xa5, sizeof(out));
	ck_assert_int_eq(proto_add_lun(lun, proto_file("ordered.img", 8u << 20,
				       false), "mode=write-back", BS), 0);
	for (int round = 0; round < 10; round++) {
		struct iscsi_context *a = proto_connect(lun), *b = proto_connect(lun);
		struct outcome first = { 0 }, ordered = { 0 };

		for (uint32_t i = 0; i < 8; i++)
			proto_assert_good(iscsi_write10_sync(a, lun, i * 1024,
					  big, sizeof(big), BS, 0, 0, 0, 0, 0),
					  "WRITE(10) of 512 KiB", false);
		ck_assert_ptr_nonnull(iscsi_synchronizecache10_task(a, lun, 0,
				      0, 0, 0, on_outcome, &first));
		ck_assert_int_eq(service(a, NULL, 2000), 0);
		proto_assert_good(iscsi_write10_sync(b, lun, 9000, out,
				  sizeof(out), BS, 0, 0, 0, 0, 0),
				  "WRITE(10) during the flush", false);
		proto_task_attribute(0x35, 2);	/* ORDERED */
		ck_assert_ptr_nonnull(iscsi_synchronizecache10_task(b, lun, 0,
				      0, 0, 0, on_outcome, &ordered));
		ck_assert_int_eq(service(b, NULL, 2000), 0);
		proto_task_attribute(-1, 0);
		iscsi_destroy_context(a);	/* its flush still running */
		ck_assert_msg(!service(b, &ordered, 10000),
			      "round %d: the ORDERED SYNCHRONIZE CACHE was not "
			      "answered in 10 s", round);
		ck_assert_int_eq(ordered.status, SCSI_STATUS_GOOD);
		iscsi_destroy_context(b);
	}
	ck_assert_int_eq(proto_del_lun(lun), 0);
}
END_TEST

/*
 * One io_uring for every LUN of a tgtd (glue/uring.c), so that one enter
 * carries several LUNs' writes.  Three LUNs (plp, write-through and
 * write-back on the ring) take FUA writes at QD 8 each while a fourth is
 * added, written to and deleted again and again: tgtd holds one ring
 * throughout, the three LUNs' writes went through it, and none failed
 * or timed out (iscsi-syncbench --timeout).  A deleted LUN's close
 * finishes its commands on the ring from tgtadm's request, where the
 * other LUNs' answers are held back for the event loop; an answer lost
 * there, or the ring stopped under the others, fails the run.  With
 * every LUN deleted the ring goes, and the suite's LUNs, added back,
 * start one.  (Last in the suite: it re-creates the suite's LUNs.)
 */
START_TEST(test_modes_ring_shared)
{
	static const char *const bsopts[3] = {
		"mode=plp,engine=uring", "mode=write-through,engine=uring",
		"mode=write-back,engine=uring" };
	const char *top = getenv("SYNCGUARD_TOP");
	const int churn = 12, first = 13;
	unsigned char out[8 * BS];
	char urls[3][256], name[32];
	long long ios[3];
	int status, cycles = 0;
	pid_t run;

	ck_assert_int_eq(proto_tgtd_rings(), 1);
	memset(out, 0x5a, sizeof(out));
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof(name), "shared%d.img", i);
		ck_assert_int_eq(proto_add_lun(first + i, proto_file(name,
					       8u << 20, false), bsopts[i], BS), 0);
		/* proto_url's buffer is static */
		snprintf(urls[i], sizeof(urls[i]), "%s", proto_url(first + i));
		ios[i] = proto_counter(first + i, "ring_ios");
	}
	run = proto_child();
	if (!run)
		_exit(proto_sh("'%s/tools/iscsi-syncbench' -s fua -q 8 -t 4 "
			       "--timeout 10 --no-progress '%s' '%s' '%s' "
			       ">/dev/null", top ? top : ".", urls[0], urls[1],
			       urls[2]) ? 1 : 0);
	while (waitpid(run, &status, WNOHANG) == 0) {
		struct iscsi_context *iscsi;

		ck_assert_int_eq(proto_add_lun(churn, proto_file("churn.img",
					       1u << 20, false), cycles % 2 ?
					       "mode=plp,engine=uring" :
					       "mode=write-through", BS), 0);
		ck_assert_int_eq(proto_tgtd_rings(), 1);
		iscsi = proto_connect(churn);
		proto_assert_good(iscsi_write16_sync(iscsi, churn, 0, out,
				  sizeof(out), BS, 0, 0, 1, 0, 0), "WRITE FUA",
				  false);
		proto_assert_good(iscsi_synchronizecache10_sync(iscsi, churn,
				  0, 0, 0, 0), "SYNCHRONIZE CACHE", false);
		iscsi_destroy_context(iscsi);
		ck_assert_int_eq(proto_del_lun(churn), 0);
		cycles++;
	}
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status),
		      "writes to LUNs %d-%d failed while LUN %d came and went",
		      first, first + 2, churn);
	ck_assert_msg(cycles >= 5, "only %d cycles during the run", cycles);
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(proto_counter(first + i, "ring_ios") > ios[i],
			      "%s: no write went through the ring", bsopts[i]);
		ck_assert_int_eq(proto_del_lun(first + i), 0);
	}
	ck_assert_int_eq(proto_tgtd_rings(), 1);
	for (int i = 0; i < NMODES; i++)
		ck_assert_int_eq(proto_del_lun(modes[i].lun), 0);
	ck_assert_int_eq(proto_tgtd_rings(), 0);
	for (int i = 0; i < NMODES; i++)
		ck_assert_int_eq(proto_add_lun(modes[i].lun, files[i],
					       modes[i].bsopts, 0), 0);
	ck_assert_int_eq(proto_tgtd_rings(), 1);
}
END_TEST

START_TEST(test_modes_write_beyond_capacity)
{
	int lun = modes[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char out[BS * 2] = { 0 };

	proto_assert_sense(iscsi_write16_sync(iscsi, lun, LUN_BYTES / BS - 1,
		out, sizeof(out), BS, 0, 0, 1, 0, 0),
		SCSI_SENSE_ILLEGAL_REQUEST, 0x2100, "WRITE(16) past the end");
	iscsi_destroy_context(iscsi);
}
END_TEST

/* A CDB of the fuzzer's corpus (tests/corpus): tgt's core answers GOOD
 * here. */
START_TEST(test_modes_verify_beyond_capacity)
{
	int lun = modes[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);
	uint32_t cap = LUN_BYTES / BS;
	unsigned char v10[10] = { 0x2f, 0, cap >> 24, cap >> 16, cap >> 8, cap,
				  0, 0, 1, 0 };
	struct scsi_task *t = scsi_create_task(10, v10, SCSI_XFER_NONE, 0);
	long long errors = proto_counter(lun, "errors");

	proto_assert_sense(iscsi_scsi_command_sync(iscsi, lun, t, NULL),
			   SCSI_SENSE_ILLEGAL_REQUEST, 0x2100,
			   "VERIFY(10) BYTCHK=0 past the end");
	/* answered in tgtd's event thread, counted like every failure */
	if (errors >= 0)		/* a syncguard LUN with counters */
		ck_assert_int_eq(proto_counter(lun, "errors"), errors + 1);
	proto_assert_good(iscsi_verify10_sync(iscsi, lun, NULL, 0, cap - 1, 0,
					      0, 0, BS), "VERIFY(10) last block",
			  false);
	iscsi_destroy_context(iscsi);
}
END_TEST

START_TEST(test_modes_thin_provisioning)
{
	int lun = modes[_i].lun;
	bool plp = modes[_i].bsopts && !strcmp(modes[_i].bsopts, "mode=plp");
	int ret = proto_update_lun(lun, "thin_provisioning=1");

	struct scsi_inquiry_logical_block_provisioning *lbp;
	struct scsi_inquiry_block_limits *bl;
	struct iscsi_context *iscsi;
	struct scsi_task *t, *t2;

	/* a plp file LUN must stay fully allocated: refused */
	ck_assert_int_eq(ret != 0, plp);
	if (plp)
		ck_assert(proto_log_has("thin_provisioning refused: mode=plp"));
	/* and the VPD pages say what the LUN does: UNMAP only when thin
	 * (a refused update must not leave them advertising it) */
	iscsi = proto_connect(lun);
	t = iscsi_inquiry_sync(iscsi, lun, 1,
			       SCSI_INQUIRY_PAGECODE_LOGICAL_BLOCK_PROVISIONING,
			       255);
	proto_assert_good(t, "INQUIRY Logical Block Provisioning", true);
	t2 = iscsi_inquiry_sync(iscsi, lun, 1,
				SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, 255);
	proto_assert_good(t2, "INQUIRY Block Limits", true);
	lbp = scsi_datain_unmarshall(t);
	bl = scsi_datain_unmarshall(t2);
	ck_assert_ptr_nonnull(lbp);
	ck_assert_ptr_nonnull(bl);
	ck_assert_int_eq(lbp->lbpu, !plp);
	ck_assert_int_eq(lbp->lbpws, !plp);
	ck_assert_int_eq(bl->max_unmap != 0, !plp);
	ck_assert_int_eq(bl->max_unmap_bdc != 0, !plp);
	scsi_free_scsi_task(t);
	scsi_free_scsi_task(t2);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* A Caching page of the wrong size is refused and the old one stays.
 * So does one whose data is longer than its length (tgt installs it,
 * then refuses): its WCE, the other one, is neither taken nor
 * announced (else WCE changes, and a unit attention goes out, while
 * tgtadm says "invalid request"). */
START_TEST(test_modes_bad_caching_page)
{
	int lun = modes[_i].lun, wce, dpofua;
	uint8_t before[64], after[64];
	struct iscsi_context *iscsi;
	char params[1400];

	ck_assert_int_ne(proto_update_lun(lun, "mode_page=8:0:0"), 0);
	ck_assert(proto_log_has("the Caching mode page must keep its 18 bytes"));
	iscsi = proto_connect(lun);
	proto_caching(iscsi, lun, &wce, &dpofua);
	ck_assert_int_eq(wce, modes[_i].wce);
	snprintf(params, sizeof(params), "mode_page=8:0:18:%s:0:0xff:0xff:0:0:"
		 "0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0:0",
		 modes[_i].wce ? "0x10" : "0x14");
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	proto_assert_good(iscsi_testunitready_sync(iscsi, lun),
			  "TEST UNIT READY after a refused mode_page", false);
	proto_caching(iscsi, lun, &wce, &dpofua);
	ck_assert_int_eq(wce, modes[_i].wce);
	/* fewer bytes than the 18 it declares: tgt fills the rest with
	 * zeroes and takes it; refused, the page kept whole */
	sense_page(iscsi, lun, 8, before, sizeof(before));
	ck_assert_int_ne(proto_update_lun(lun, "mode_page=8:0:18:0x10"), 0);
	ck_assert_int_ne(proto_update_lun(lun, "mode_page=8:0:18:0x14:0:1:2:"
					  "3:4:5:6:7:8:9:10:11"), 0);
	ck_assert(proto_log_has("page must keep its 18 bytes (1 given)"));
	/* the count made up with empty fields (tgt reads them as 0), or a
	 * bad byte; and a whole page followed by a short one in one update
	 * (every page is checked, not only the first) */
	ck_assert_int_ne(proto_update_lun(lun, "mode_page=8:0:18:0x14:::::::"
					  "::::::::::"), 0);
	ck_assert(proto_log_has("a Caching mode page field is empty or not a "
				"byte value"));
	ck_assert_int_ne(proto_update_lun(lun, "mode_page=8:0:18:0x14:0:1:2:"
					  "3:4:5:6:7:8:9:10:11:12:13:14:15:256"),
			 0);
	snprintf(params, sizeof(params), "mode_page=8:0:18:%s:0:0xff:0xff:0:0:"
		 "0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0,mode_page=8:0:18:"
		 "0x14", modes[_i].wce ? "0x10" : "0x14");
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	/* the page code as tgt keeps it, in a byte (264 is 8), and a value
	 * longer than tgt's 1024-byte copy of it (tgt cuts it and zeroes
	 * the rest) */
	ck_assert_int_ne(proto_update_lun(lun, "mode_page=264:0:18:0x10"), 0);
	snprintf(params, sizeof(params), "mode_page=8:0:18:%s:%01100d:0xff:"
		 "0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0",
		 modes[_i].wce ? "0x14" : "0x10", 0);
	ck_assert_int_ne(proto_update_lun(lun, params), 0);
	ck_assert_int_eq(sense_page(iscsi, lun, 8, after, sizeof(after)), 20);
	ck_assert_mem_eq(after, before, 20);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* MODE SENSE(@ten ? 10 : 6) of the Caching page with ALLOCATION LENGTH
 * @alloc: the task, answered */
static struct scsi_task *mode_sense_alloc(struct iscsi_context *iscsi,
					  int lun, bool ten, int alloc)
{
	unsigned char cdb6[6] = { 0x1a, 0x08, 0x08, 0, (unsigned char)alloc, 0 };
	unsigned char cdb10[10] = { 0x5a, 0x08, 0x08, 0, 0, 0, 0, 0,
				    (unsigned char)alloc, 0 };
	struct scsi_task *t = scsi_create_task(ten ? 10 : 6, ten ? cdb10 : cdb6,
		alloc ? SCSI_XFER_READ : SCSI_XFER_NONE, alloc);

	ck_assert_ptr_nonnull(t);
	return iscsi_scsi_command_sync(iscsi, lun, t, NULL);
}

/* MODE SENSE with an ALLOCATION LENGTH shorter than its header: tgt's
 * handler writes the header's DEVICE-SPECIFIC PARAMETER through a NULL
 * buffer at 0, which kills tgtd, and past a shorter one.
 * GOOD, with the first bytes of the whole answer (SPC-4 4.2.5.6). */
START_TEST(test_modes_mode_sense_short_allocation)
{
	int lun = modes[_i].lun;
	struct iscsi_context *iscsi = proto_connect(lun);

	for (int ten = 0; ten < 2; ten++) {
		struct scsi_task *full = mode_sense_alloc(iscsi, lun, ten, 255);

		proto_assert_good(full, "MODE SENSE, whole", true);
		for (int alloc = 0; alloc < 4; alloc++) {
			struct scsi_task *t = mode_sense_alloc(iscsi, lun, ten,
							       alloc);

			proto_assert_good(t, "MODE SENSE, short", true);
			ck_assert_int_eq(t->datain.size, alloc);
			if (alloc)
				ck_assert_mem_eq(t->datain.data,
						 full->datain.data,
						 (size_t)alloc);
			scsi_free_scsi_task(t);
		}
		scsi_free_scsi_task(full);
	}
	proto_assert_good(iscsi_testunitready_sync(iscsi, lun),
			  "TEST UNIT READY after short MODE SENSEs", false);
	iscsi_destroy_context(iscsi);
}
END_TEST

Suite *modes_suite(void)
{
	Suite *s = suite_create("modes");
	TCase *tc = tcase_create("per-mode");

	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_modes_wce_and_dpofua, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_write_read_back, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_sync_cache_ranges, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_write_beyond_capacity, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_verify_beyond_capacity, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_thin_provisioning, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_bad_caching_page, 0, NMODES);
	tcase_add_loop_test(tc, test_modes_mode_sense_short_allocation, 0,
			    NMODES);
	/* last: it changes WCE */
	tcase_add_loop_test(tc, test_modes_mode_select_wce, 0, NMODES);
	tcase_add_test(tc, test_modes_wce_toggle_under_load);
	tcase_add_test(tc, test_modes_admin_wce_change_announced);
	tcase_add_test(tc, test_modes_path_capacity_change_announced);
	tcase_add_test(tc, test_modes_path_refusals);
	tcase_add_test(tc, test_modes_fixed_media);
	tcase_add_test(tc, test_modes_ring_submission_batching);
	tcase_add_test(tc, test_modes_ring_lone_writes_unscored);
	tcase_add_test(tc, test_modes_ordered_flush_closed);
	tcase_add_test(tc, test_modes_ring_shared);
	suite_add_tcase(s, tc);
	return s;
}
