/*
 * Device faults seen from the initiator, injected in syncguard-devmodel
 * (a FUSE disk with a volatile cache): a failed flush is never answered
 * GOOD, and its error is latched so that no later SYNCHRONIZE CACHE or
 * FUA write claims the lost data is safe, also on the store's next LUN
 * and the next tgtd, until the administrator clears it (syncguard-stat
 * --clear-latch, the documented procedure); a full device gets DATA
 * PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

#define BS 512u

static char mnt[700], img[700], ctl[720], pidfile[720], disk[720];

static int model_start(const char *image, const char *mountpoint)
{
	const char *top = getenv("SYNCGUARD_TOP");

	proto_sh("mkdir -p '%s'", mountpoint);
	return proto_sh("setsid '%s/tools/syncguard-devmodel' --image '%s' '%s' "
			"-f >'%s.log' 2>&1 </dev/null & echo $! >'%s'; for i in "
			"$(seq 100); do [ -e '%s/disk.img' ] && exit 0; sleep 0.02; "
			"done; exit 1", top ? top : ".", image, mountpoint,
			mountpoint, pidfile, mountpoint);
}

static void model_stop(void)
{
	proto_sh("fusermount3 -u -z '%s' 2>/dev/null; kill $(cat '%s' "
		 "2>/dev/null) 2>/dev/null; true", mnt, pidfile);
}

static void model_ctl(const char *cmd)
{
	ck_assert_int_eq(proto_sh("echo '%s' >'%s'", cmd, ctl), 0);
}

static void setup(void)
{
	proto_prepare();
	snprintf(mnt, sizeof(mnt), "%s/mnt", proto_dir());
	snprintf(img, sizeof(img), "%s", proto_file("model.img", 8 << 20, false));
	snprintf(ctl, sizeof(ctl), "%s/.ctl", mnt);
	snprintf(disk, sizeof(disk), "%s/disk.img", mnt);
	snprintf(pidfile, sizeof(pidfile), "%s/model.pid", proto_dir());
	if (model_start(img, mnt)) {
		fprintf(stderr, "faults: the device model did not start\n");
		model_stop();
		exit(EXIT_FAILURE);
	}
	proto_tgtd_start();	/* after the mount: see proto_prepare() */
}

/* before each test (a checked fixture: in the test's process): what a
 * failed test left behind, LUNs on the model's disk and armed faults,
 * does not fail the tests after it (each failed on the LUN still there) */
static void fresh_state(void)
{
	ck_assert_int_eq(proto_del_left_luns(0), 0);
	model_ctl("clear");
	model_ctl("flush-ms 0");
	ck_assert_int_eq(proto_clear_latches(), 0);
}

/* syncguard-stat --clear-latch @path, against the private tgtd's state
 * directory (the documented way out); its exit status */
static int clear_latch(const char *path)
{
	const char *top = getenv("SYNCGUARD_TOP");

	return proto_sh("'%s/tools/syncguard-stat' --clear-latch '%s' "
			"--state-dir '%s' >/dev/null 2>&1", top ? top : ".", path,
			proto_state_dir());
}

static void teardown(void)
{
	model_stop();		/* lazy: tgtd's open LUNs just fail */
	proto_tgtd_stop();
}

static struct scsi_task *write_lba(struct iscsi_context *iscsi, int lun,
				   uint32_t lba, int fua)
{
	static unsigned char out[BS * 8];

	memset(out, (int)lba, sizeof(out));
	return iscsi_write10_sync(iscsi, lun, lba, out, sizeof(out), BS, 0, 0,
				  fua, 0, 0);
}

/* both engines: the LUN's worker threads, io_uring */
static const char *const wb_engines[] = { "mode=write-back;engine=threads",
					  "mode=write-back;engine=uring" };

START_TEST(test_faults_failed_flush_latches)
{
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(1, disk, wb_engines[_i], 0), 0);
	iscsi = proto_connect(1);
	proto_assert_good(write_lba(iscsi, 1, 0, 0), "WRITE(10)", false);
	model_ctl("fail-fsync EIO 1");		/* the next flush fails once */
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) on a failing flush");
	/* the device would flush fine now, but what it dropped is gone */
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) after a failed flush");
	proto_assert_sense(write_lba(iscsi, 1, 8, 1), SCSI_SENSE_MEDIUM_ERROR,
			   0x0c00, "FUA WRITE(10) after a failed flush");
	proto_assert_good(write_lba(iscsi, 1, 16, 0), "plain WRITE(10)", false);
	proto_assert_good(iscsi_read10_sync(iscsi, 1, 16, BS, BS, 0, 0, 0, 0, 0),
			  "READ(10)", false);
	iscsi_destroy_context(iscsi);
	ck_assert(proto_log_has("opcode 0x35: sense 3/0c00: Input/output error"));
	/* re-created, the LUN starts latched: the kernel takes the error as
	 * seen, and a fresh LUN's flush would succeed over lost writes */
	ck_assert_int_eq(proto_del_lun(1), 0);
	ck_assert_int_eq(proto_add_lun(1, disk, wb_engines[_i], 0), 0);
	ck_assert(proto_log_has("lun 1: starts latched"));
	iscsi = proto_connect(1);
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) on the re-created LUN");
	iscsi_destroy_context(iscsi);
	/* the documented way out: check the data, clear, re-create */
	ck_assert_int_eq(proto_del_lun(1), 0);
	ck_assert_int_eq(clear_latch(disk), 0);
	ck_assert_int_ne(clear_latch(disk), 0);		/* nothing left */
	ck_assert_int_eq(proto_add_lun(1, disk, wb_engines[_i], 0), 0);
	iscsi = proto_connect(1);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10) once the latch is cleared", false);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(1), 0);
}
END_TEST

/*
 * A final flush that fails (LUN delete; the same on a path= move and a
 * clean tgtd shutdown) is remembered: the kernel now takes the error as
 * seen, so the store's next LUN, on this tgtd or the next, would answer
 * its first SYNCHRONIZE CACHE GOOD over the writes that are gone.  It
 * starts latched instead (the record is in the state directory, here
 * one that bsopts state_dir names and a second tgtd shares; a LUN of the
 * same tgtd with another state directory finds it there too).
 */
/* LUN 2 created on the model's disk with @bsopts starts latched: its
 * SYNCHRONIZE CACHE(10) fails with MEDIUM ERROR 0x0c00 (@what in the
 * failure's message); then deleted */
static void assert_starts_latched(const char *bsopts, const char *what)
{
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(2, disk, bsopts, 0), 0);
	iscsi = proto_connect(2);
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 2, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00, what);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(2), 0);
}

START_TEST(test_faults_latch_outlives_lun)
{
	const char *top = getenv("SYNCGUARD_TOP") ? getenv("SYNCGUARD_TOP") : ".";
	char opts[900], tgtd2[760], url[300];
	struct iscsi_context *iscsi;
	FILE *p;

	snprintf(opts, sizeof(opts), "mode=write-back;state_dir=%s/kept",
		 proto_dir());
	ck_assert_int_eq(proto_sh("mkdir -p '%s/kept'", proto_dir()), 0);
	ck_assert_int_eq(proto_add_lun(2, disk, opts, 0), 0);
	iscsi = proto_connect(2);
	for (uint32_t lba = 0; lba < 64; lba += 8)
		proto_assert_good(write_lba(iscsi, 2, lba, 0), "WRITE(10)", false);
	iscsi_destroy_context(iscsi);
	model_ctl("fail-write EIO");		/* their writeback fails */
	ck_assert_int_eq(proto_del_lun(2), 0);
	for (int i = 0; i < 100 &&
	     !proto_log_has("lun 2: its next LUN starts latched"); i++)
		usleep(20000);		/* it runs on a thread of its own */
	model_ctl("clear");
	ck_assert(proto_log_has("lun 2: final flush failed"));
	ck_assert(proto_log_has("lun 2: its next LUN starts latched"));
	assert_starts_latched(opts, "SYNCHRONIZE CACHE(10) of the store's "
			      "next LUN");
	/* in this tgtd, a LUN with another state directory finds it too, and
	 * the log says where it is */
	assert_starts_latched("mode=write-back", "SYNCHRONIZE CACHE(10) with "
			      "another state_dir");
	snprintf(tgtd2, sizeof(tgtd2), "--state-dir %s/kept'", proto_dir());
	ck_assert_msg(proto_log_has(tgtd2), "the log names %s", tgtd2);
	/* the next tgtd: another private one, on the same store */
	snprintf(tgtd2, sizeof(tgtd2), "%s/tgtd2", proto_dir());
	ck_assert_int_eq(proto_sh("'%s/scripts/tgtd-private' start '%s' '%s/"
		"bs_syncguard.so' >/dev/null && '%s/scripts/tgtd-private' target "
		"'%s' 1 %s-2 && '%s/scripts/tgtd-private' lun '%s' 1 1 '%s' "
		"'%s' >/dev/null", top, tgtd2, top, top, tgtd2, PROTO_IQN, top,
		tgtd2, disk, opts), 0);
	snprintf(opts, sizeof(opts), "'%s/scripts/tgtd-private' url '%s' %s-2 1",
		 top, tgtd2, PROTO_IQN);
	p = popen(opts, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(url, sizeof(url), p));
	pclose(p);
	url[strcspn(url, "\n")] = '\0';
	iscsi = proto_connect_url(url);
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) of the next tgtd's LUN");
	iscsi_destroy_context(iscsi);
	proto_sh("'%s/scripts/tgtd-private' stop '%s'", top, tgtd2);
	/* a record left unfinished (a tgtd killed while it wrote one: its
	 * ".tmp" alone) latches too, and --latched lists it */
	snprintf(opts, sizeof(opts), "mode=write-back;state_dir=%s/kept",
		 proto_dir());
	ck_assert_int_eq(proto_sh("cd '%s/kept/latched' && for f in *; do mv "
				  "\"$f\" \".$f.tmp\"; done", proto_dir()), 0);
	ck_assert_int_eq(proto_sh("'%s/tools/syncguard-stat' --latched "
		"--state-dir '%s/kept' | grep -q unfinished", top,
		proto_dir()), 0);
	assert_starts_latched(opts, "SYNCHRONIZE CACHE(10) over an "
			      "unfinished record");
	ck_assert_int_eq(proto_sh("'%s/tools/syncguard-stat' --clear-latch '%s' "
		"--state-dir '%s/kept' >/dev/null", top, disk, proto_dir()), 0);
	ck_assert_int_ne(proto_sh("ls -A '%s/kept/latched' | grep -q .",
				  proto_dir()), 0);
}
END_TEST

START_TEST(test_faults_write_through_eio)
{
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(2, disk, "mode=write-through", 0), 0);
	iscsi = proto_connect(2);
	proto_assert_good(write_lba(iscsi, 2, 0, 0), "WRITE(10)", false);
	model_ctl("fail-write EIO 1");
	proto_assert_sense(write_lba(iscsi, 2, 8, 0), SCSI_SENSE_MEDIUM_ERROR,
			   0x0c00, "WRITE(10) on a failing device");
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 2, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) after a failed write");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(2), 0);
	model_ctl("clear");
}
END_TEST

/*
 * On a FUSE file (no RWF_NOWAIT), engine=auto leaves even O_DIRECT
 * writes (plp with 4096-byte blocks) to the LUN's worker threads
 * (glue/uring.c, nowait_capable says why); engine=uring runs them on
 * io_uring's own threads (io-wq), where the data reads back and a
 * device's write error, failing there, is no GOOD.
 */
START_TEST(test_faults_fuse_engine)
{
	static unsigned char out[4096], in[4096];
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	long long ring;

	ck_assert_int_eq(proto_add_lun(1, disk, "mode=plp;alloc_check=no",
				       4096), 0);
	iscsi = proto_connect(1);
	for (uint32_t lba = 0; lba < 8; lba++)
		proto_assert_good(write_lba(iscsi, 1, lba, 0), "WRITE(10)", false);
	iscsi_destroy_context(iscsi);
	ck_assert_msg(proto_counter(1, "ring_ios") == 0, "engine=auto on "
		      "FUSE: %lld reads and writes through io_uring, not the "
		      "workers", proto_counter(1, "ring_ios"));
	ck_assert_int_eq(proto_del_lun(1), 0);

	ck_assert_int_eq(proto_add_lun(1, disk,
				       "mode=plp;alloc_check=no;engine=uring",
				       4096), 0);
	iscsi = proto_connect(1);
	for (uint32_t lba = 0; lba < 8; lba++) {
		memset(out, (int)(0xa0 + lba), sizeof(out));
		proto_assert_good(iscsi_write10_sync(iscsi, 1, lba, out,
				  sizeof(out), sizeof(out), 0, 0, 0, 0, 0),
				  "WRITE(10)", false);
	}
	for (uint32_t lba = 0; lba < 8; lba++) {
		memset(out, (int)(0xa0 + lba), sizeof(out));
		t = iscsi_read10_sync(iscsi, 1, lba, sizeof(in), sizeof(in),
				      0, 0, 0, 0, 0);
		ck_assert_msg(t && t->status == SCSI_STATUS_GOOD &&
			      t->datain.size == (int)sizeof(in),
			      "READ(10) of block %u", lba);
		memcpy(in, t->datain.data, sizeof(in));
		scsi_free_scsi_task(t);
		ck_assert_msg(!memcmp(in, out, sizeof(in)),
			      "block %u reads back other data", lba);
	}
	ring = proto_counter(1, "ring_ios");
	ck_assert_msg(ring >= 16, "engine=uring on FUSE: %lld of 16 reads and "
		      "writes through io_uring", ring);
	model_ctl("fail-write EIO 1");
	memset(out, 0x55, sizeof(out));
	proto_assert_sense(iscsi_write10_sync(iscsi, 1, 9, out, sizeof(out),
			   sizeof(out), 0, 0, 0, 0, 0), SCSI_SENSE_MEDIUM_ERROR,
			   0x0c00, "WRITE(10) through io-wq on a failing device");
	ck_assert_msg(proto_counter(1, "ring_ios") > ring, "the failing write "
		      "did not go through io_uring");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(1), 0);
	model_ctl("clear");
}
END_TEST

/*
 * engine=uring on a FUSE file (no RWF_NOWAIT): io_uring's own threads
 * run the O_DIRECT writes of plp with 4096-byte blocks, and FUSE's
 * asynchronous direct write does not drop the pages a read cached while
 * it was in flight; a write answered GOOD must still be what the next
 * read returns while two other sessions keep reading the block
 * (core/lun.c, syncguard_lun_writes_async: such a LUN reads O_DIRECT).
 * _i 1: the worker threads' synchronous writes (engine=auto), which
 * drop them after the write; 2: write-back's FUA writes (RWF_DSYNC, on
 * the workers on FUSE: core/lun.c, async_dsync_ok) beside its
 * page-cache reads, with engine=uring.
 */
START_TEST(test_faults_fuse_uring_read_after_write)
{
	static const char *const bsopts[] = {
		"mode=plp;alloc_check=no;engine=uring",
		"mode=plp;alloc_check=no", "mode=write-back;engine=uring" };
	uint32_t stale, first;

	ck_assert_int_eq(proto_add_lun(1, disk, bsopts[_i], 4096), 0);
	stale = proto_stale_reads(1, 4096, 7, 3000, _i == 2, &first);
	if (_i == 0)	/* the writes this is about went where it says */
		ck_assert_msg(proto_counter(1, "ring_ios") >= 3000 &&
			      proto_counter(1, "direct_writes") >= 3000,
			      "%lld reads and writes through io_uring, %lld "
			      "O_DIRECT writes", proto_counter(1, "ring_ios"),
			      proto_counter(1, "direct_writes"));
	ck_assert_int_eq(proto_del_lun(1), 0);
	ck_assert_msg(stale == 0, "%s: %u reads returned the data before the "
		      "write just answered (first after write %u)", bsopts[_i],
		      stale, first);
}
END_TEST

/*
 * A full device: SPACE ALLOCATION FAILED.  The model caches writes (a
 * FUSE writeback cache), so its ENOSPC comes from the flush: what was
 * written may be gone, and the LUN latches for good, as for any failed
 * flush.  (A write that a file system refuses up front loses nothing,
 * and the LUN recovers once space is freed: test_blockdev_full_fs_recovers.)
 */
START_TEST(test_faults_device_full)
{
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(3, disk, "mode=write-through", 0), 0);
	iscsi = proto_connect(3);
	model_ctl("fail-write ENOSPC 1");
	proto_assert_sense(write_lba(iscsi, 3, 0, 0), SCSI_SENSE_DATA_PROTECTION,
			   0x2707, "WRITE(10) on a full device");
	proto_assert_sense(write_lba(iscsi, 3, 0, 0), SCSI_SENSE_DATA_PROTECTION,
			   0x2707, "WRITE(10) after a failed flush");
	ck_assert_int_eq(proto_counter(3, "latched.errno"), ENOSPC);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(3), 0);
	model_ctl("clear");
}
END_TEST

/* A counter of the device model (reading its .ctl: writes, fsyncs,
 * flushes, cached ...) */
static long long model_counter(const char *name)
{
	return proto_sh_number("awk '$1 == \"%s\" { print $2 }' '%s'", name,
			       ctl);
}

/*
 * engine=uring on a FUSE file: an RWF_DSYNC write must not go through
 * io_uring, whose asynchronous direct write reaches the daemon with no
 * fsync (core/policy.c, syncguard_policy_async_dsync_honoured), but run
 * synchronously on a worker thread, where FUSE follows it with one:
 * every durable write of write-through with write_sync=dsync shows as
 * an fsync at the device model.  _i 0: 4096-byte blocks (O_DIRECT
 * writes), 1: 512-byte blocks (page-cache writes).
 */
START_TEST(test_faults_fuse_uring_dsync_flushes)
{
	static const unsigned int bs[] = { 4096, 512 };
	static unsigned char out[4096];
	struct iscsi_context *iscsi;
	long long f0, w0;

	ck_assert_int_eq(proto_add_lun(1, disk, "mode=write-through;"
				       "write_sync=dsync;engine=uring",
				       bs[_i]), 0);
	iscsi = proto_connect(1);
	f0 = model_counter("fsyncs");
	w0 = proto_counter(1, "dsync_writes");
	for (uint32_t lba = 0; lba < 8; lba++) {
		memset(out, (int)lba + 1, sizeof(out));
		proto_assert_good(iscsi_write10_sync(iscsi, 1, lba, out, bs[_i],
				  (int)bs[_i], 0, 0, 0, 0, 0), "WRITE(10)",
				  false);
	}
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_counter(1, "dsync_writes") - w0, 8);
	ck_assert_msg(model_counter("fsyncs") - f0 >= 8, "%u-byte blocks: 8 "
		      "RWF_DSYNC writes answered GOOD, %lld fsyncs at the "
		      "device", bs[_i], model_counter("fsyncs") - f0);
	ck_assert_int_eq(proto_del_lun(1), 0);
}
END_TEST

/*
 * A LUN that opens on data nobody flushed (an earlier tgtd killed before
 * its final flush; here the test writes the model's disk through the
 * page cache itself): write-through flushes as it opens, before it
 * reports WCE=0; write-back's first SYNCHRONIZE CACHE flushes.  A LUN
 * that started clean and flushed nothing would lose 40-55% of the
 * acknowledged blocks at a power cut after a restart.
 * _i 0: write-back, 1: write-through.
 */
START_TEST(test_faults_fresh_lun_flushes_what_it_finds)
{
	static const char *const bsopts[] = { "mode=write-back",
					      "mode=write-through" };
	static unsigned char buf[64 * 1024];
	struct iscsi_context *iscsi;
	long long f0;
	int fd = open(disk, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	memset(buf, 0x5a, sizeof(buf));
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);		/* no fsync: volatile, as a killed tgtd's */
	f0 = model_counter("flushes");
	ck_assert_int_ge(f0, 0);
	ck_assert_int_eq(proto_add_lun(6, disk, bsopts[_i], 0), 0);
	if (_i == 1)
		ck_assert_msg(model_counter("flushes") > f0, "write-through "
			      "opened (and reports WCE=0) without a flush");
	iscsi = proto_connect(6);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, 6, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10) on a fresh LUN", false);
	ck_assert_msg(model_counter("flushes") > f0, "SYNCHRONIZE CACHE on a "
		      "fresh LUN answered GOOD without a flush");
	ck_assert_int_eq(model_counter("cached"), 0);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(6), 0);
}
END_TEST

/*
 * The open flush of a write-through LUN runs in the background, as
 * tgtadm's switch to WCE=0 does: on a device whose flush takes 3 s the
 * LUN is created at once (its creation waits 1 s at most) and shows
 * WCE=1 until the flush is done, then 0.  On tgtd's event thread, every
 * LUN of the tgtd would wait for it.
 */
START_TEST(test_faults_open_flush_in_background)
{
	static unsigned char buf[4096];
	struct iscsi_context *iscsi;
	int wce = -1, dpofua, fd = open(disk, O_WRONLY);
	long long f0;

	ck_assert_int_ge(fd, 0);
	memset(buf, 0x3c, sizeof(buf));
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	close(fd);
	f0 = model_counter("flushes");
	model_ctl("flush-ms 3000");
	ck_assert_int_eq(proto_add_lun(7, disk, "mode=write-through", 0), 0);
	iscsi = proto_connect(7);
	proto_caching(iscsi, 7, &wce, &dpofua);
	ck_assert_msg(wce == 1, "a write-through LUN whose open flush still "
		      "runs shows WCE=%d (the flush ran in its creation)", wce);
	/* WCE=0 asked for meanwhile is the mode's own: answered once the
	 * switch is done, not refused */
	proto_assert_good(proto_select_wce(iscsi, 7, 0), "MODE SELECT WCE=0 "
			  "during the switch at open", false);
	proto_caching(iscsi, 7, &wce, &dpofua);
	ck_assert_int_eq(wce, 0);
	ck_assert(model_counter("flushes") > f0);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(7), 0);
	/* and tgtadm's WCE=0 (mode_page=) */
	ck_assert_int_eq(proto_add_lun(7, disk, "mode=write-through", 0), 0);
	ck_assert_int_eq(proto_update_lun(7, "mode_page=8:0:18:0x10:0:0xff:"
		"0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0"), 0);
	model_ctl("flush-ms 0");
	iscsi = proto_connect(7);
	wce = -1;
	for (int i = 0; i < 100 && wce != 0; i++) {
		proto_caching(iscsi, 7, &wce, &dpofua);
		usleep(100000);
	}
	ck_assert_int_eq(wce, 0);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(7), 0);
}
END_TEST

/*
 * tgtd out of descriptors: a durable command that cannot open its sync
 * descriptor (core/lun.c) failed before any I/O, so it is answered BUSY
 * and latches nothing; once descriptors are free the LUN works.  A latch
 * for good would answer MEDIUM ERROR to every durable command until the
 * LUN is re-created.  _i: both engines, on a regular file.
 */
START_TEST(test_faults_out_of_descriptors_busy)
{
	static const char *const bsopts[] = { "mode=write-through;engine=threads",
					      "mode=write-through;engine=uring" };
	const char *file = proto_file("nofile.img", 4 << 20, false);
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	int limited, restored;

	ck_assert_int_eq(proto_add_lun(4, file, bsopts[_i], 0), 0);
	iscsi = proto_connect(4);
	limited = proto_nofile_limit();
	t = write_lba(iscsi, 4, 0, 1);
	restored = proto_nofile_restore();
	ck_assert_int_eq(limited, 0);
	ck_assert_int_eq(restored, 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(t->status == SCSI_STATUS_BUSY, "FUA WRITE(10) without a "
		      "free descriptor: status 0x%02x, sense %x/%04x, not BUSY",
		      t->status, t->sense.key, t->sense.ascq);
	scsi_free_scsi_task(t);
	ck_assert_int_eq(proto_counter(4, "latched.errno // 0"), 0);
	proto_assert_good(write_lba(iscsi, 4, 0, 1), "FUA WRITE(10) once "
			  "descriptors are free", false);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, 4, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10) after", false);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(4), 0);
}
END_TEST

/*
 * A file made immutable (chattr +i) refuses writes with EPERM: WRITE
 * PROTECTED, and a soft latch, like a full file system's; once the flag
 * is gone the LUN works again, which a latch for good would not let it
 * do.  Skipped where the scratch file system has no immutable flag.
 */
START_TEST(test_faults_immutable_file_recovers)
{
	const char *file = proto_file("immutable.img", 4 << 20, false);
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(5, file, "mode=write-through", 0), 0);
	iscsi = proto_connect(5);
	if (proto_sh("chattr +i '%s' 2>/dev/null", file)) {
		test_left_out("test_faults_immutable_file_recovers", false,
			      "no chattr +i here");
		iscsi_destroy_context(iscsi);
		ck_assert_int_eq(proto_del_lun(5), 0);
		return;
	}
	proto_assert_sense(write_lba(iscsi, 5, 0, 1), SCSI_SENSE_DATA_PROTECTION,
			   0x2700, "FUA WRITE(10) to an immutable file");
	/* refused when a descriptor is opened for it (nothing written,
	 * nothing latched), or by the write itself: a soft latch, which
	 * syncguard-stat explains */
	ck_assert_msg(proto_counter(5, "latched.errno // 0") == 0 ||
		      proto_sh("'%s/tools/syncguard-stat' '%s' 5 | grep -q "
			       "'refused by an immutable file or a read-only "
			       "device'", getenv("SYNCGUARD_TOP") ?
			       getenv("SYNCGUARD_TOP") : ".", PROTO_IQN) == 0,
		      "syncguard-stat does not say why the LUN latched");
	ck_assert_int_eq(proto_sh("chattr -i '%s'", file), 0);
	proto_assert_good(write_lba(iscsi, 5, 0, 1), "FUA WRITE(10) once the "
			  "file is mutable again", false);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, 5, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10) after", false);
	ck_assert_int_eq(proto_counter(5, "latched.errno // 0"), 0);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(5), 0);
}
END_TEST

/*
 * A FUA write (RWF_DSYNC) whose flush fails with ENOSPC: the model drops
 * its volatile cache, and with it a plain write made before.  The LUN
 * latches for good: on FUSE an ENOSPC may be such a flush's
 * (core/policy.c), and no later SYNCHRONIZE CACHE may say GOOD for the
 * lost write.  A soft latch would let a recheck clear it, and two
 * SYNCHRONIZE CACHEs be GOOD: for page-cache writes, and for 4096-byte
 * blocks with O_DIRECT writes, whose data the failed flush drops too,
 * even where the block is read back.
 * _i 0: 512-byte blocks, page cache; 1: 4096-byte blocks, direct=yes.
 */
START_TEST(test_faults_fua_enospc_from_flush_latches)
{
	static const char *const opts[] = { "mode=write-back",
					    "mode=write-back;direct=yes" };
	const uint32_t bs = _i ? 4096 : BS;
	static unsigned char out[4096];
	const int lun = 6;
	struct iscsi_context *iscsi;
	int fd;

	ck_assert_int_eq(proto_add_lun(lun, disk, opts[_i], (int)bs), 0);
	iscsi = proto_connect(lun);
	memset(out, 0x11, sizeof(out));
	proto_assert_good(iscsi_write10_sync(iscsi, lun, 0, out, 4096, (int)bs, 0,
			  0, 0, 0, 0), "WRITE(10)", false);
	/* into the model's volatile cache, not yet flushed (O_DIRECT: there
	 * already) */
	fd = open(disk, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	usleep(300000);
	model_ctl("fail-fsync ENOSPC 1");
	memset(out, 0x22, sizeof(out));
	proto_assert_sense(iscsi_write10_sync(iscsi, lun, 64, out, 4096, (int)bs,
			   0, 0, 1, 0, 0), SCSI_SENSE_DATA_PROTECTION, 0x2707,
			   "FUA WRITE(10) whose flush fails");
	for (int i = 0; i < 2; i++)
		proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, lun, 0, 0,
				   0, 0), SCSI_SENSE_DATA_PROTECTION, 0x2707,
				   "SYNCHRONIZE CACHE(10) after it");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(lun), 0);
	model_ctl("clear");
}
END_TEST

/* A LUN that fails every command does not flood tgtd.log: at most 10
 * lines per LUN in 10 s (without a limit, a latched LUN writes 9,515
 * lines in a 1 s FUA run).  44 failed commands of a latched LUN, in well under
 * 10 s, span at most two windows; the SYNCHRONIZE CACHE answered from
 * the latch is logged like the rest, with the latched errno, and
 * ILLEGAL REQUEST answers before them do not use up their lines. */
START_TEST(test_faults_error_lines_limited)
{
	struct iscsi_context *iscsi;
	int lines;

	ck_assert_int_eq(proto_add_lun(4, disk, "mode=write-back", 0), 0);
	iscsi = proto_connect(4);
	/* the initiator's mistakes have a budget of their own: 12 of them
	 * first do not silence the failed flush below */
	for (int i = 0; i < 12; i++)
		proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 4,
				   0xfffffff0u, 1, 0, 0), SCSI_SENSE_ILLEGAL_REQUEST,
				   0x2100, "SYNCHRONIZE CACHE(10) beyond the capacity");
	proto_assert_good(write_lba(iscsi, 4, 0, 0), "WRITE(10)", false);
	model_ctl("fail-fsync EIO 1");
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 4, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) on a failing flush");
	/* answered in tgtd's event thread from the latch: logged too, not
	 * only the first, through a worker */
	for (int i = 0; i < 3; i++)
		proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 4, 0, 0,
								 0, 0),
			SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			"SYNCHRONIZE CACHE(10) of a latched LUN");
	for (int i = 0; i < 40; i++)
		proto_assert_sense(write_lba(iscsi, 4, 8, 1),
			SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			"FUA WRITE(10) of a latched LUN");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(4), 0);
	model_ctl("clear");
	lines = proto_log_count("lun 4: opcode 0x35: sense 3/0c00: "
				"Input/output error");
	ck_assert_msg(lines >= 2, "%d log lines (with the errno) for 4 "
		      "failed SYNCHRONIZE CACHE", lines);
	lines += proto_log_count("lun 4: opcode 0x2a: sense 3/0c00");
	ck_assert_msg(lines >= 3 && lines <= 20, "%d log lines for 44 "
		      "failed commands", lines);
}
END_TEST

/* SYNCHRONIZE CACHE IMMED=1: GOOD at once; the flush fails in the
 * background and comes back as a deferred error, once, to the I_T nexus
 * that sent it (SPC-4 4.5.5) -- not to another initiator. */
START_TEST(test_faults_immed_deferred_error)
{
	struct iscsi_context *a, *b;
	struct scsi_task *t;
	int tries = 0;

	ck_assert_int_eq(proto_add_lun(4, disk, "mode=write-back", 0), 0);
	a = proto_connect(4);
	proto_assert_good(write_lba(a, 4, 0, 0), "WRITE(10)", false);
	model_ctl("fail-fsync EIO 1");
	proto_assert_good(iscsi_synchronizecache10_sync(a, 4, 0, 0, 0, 1),
			  "SYNCHRONIZE CACHE(10) IMMED", false);
	b = proto_connect(4);	/* another initiator: logs in, TURs fine */
	proto_assert_good(iscsi_testunitready_sync(b, 4), "TUR, other nexus",
			  false);
	for (;;) {	/* A hears of it once the background flush failed */
		usleep(20000);
		t = iscsi_testunitready_sync(a, 4);
		ck_assert_ptr_nonnull(t);
		if (t->status != SCSI_STATUS_GOOD || ++tries >= 250)
			break;
		scsi_free_scsi_task(t);
	}
	ck_assert_int_eq(t->status, SCSI_STATUS_CHECK_CONDITION);
	ck_assert_int_eq(t->sense.error_type, 0x71);	/* deferred */
	proto_assert_sense(t, SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "TEST UNIT READY: the deferred error");
	proto_assert_good(iscsi_testunitready_sync(a, 4),
			  "TEST UNIT READY after the deferred error", false);
	proto_assert_good(iscsi_testunitready_sync(b, 4),
			  "TUR, other nexus, after the failure", false);
	t = iscsi_synchronizecache10_sync(b, 4, 0, 0, 0, 0);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(t->sense.error_type, 0x70);	/* latched: current */
	proto_assert_sense(t, SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) after the deferred error");
	iscsi_destroy_context(a);
	iscsi_destroy_context(b);
	ck_assert_int_eq(proto_del_lun(4), 0);
	model_ctl("clear");
}
END_TEST

static void *fua_write(void *arg)
{
	struct iscsi_context *iscsi = arg;

	return write_lba(iscsi, 5, 0, 1);
}

/* tgtadm path= while a command is in flight is refused (tgt would close
 * the backing store under a worker still running it, and tgtd would
 * die), and done once it is answered.  The model's 2 s flushes keep a FUA
 * write in flight: sent at once, it is still waiting for its flush
 * 600 ms later even when a loaded host took most of that time to get it
 * to tgtd. */
START_TEST(test_faults_path_change_waits)
{
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	char params[800];
	pthread_t th;

	ck_assert_int_eq(proto_add_lun(5, disk, "mode=write-through;"
				       "engine=threads;write_sync=dsync", 0), 0);
	iscsi = proto_connect(5);
	model_ctl("flush-ms 2000");
	ck_assert_int_eq(pthread_create(&th, NULL, fua_write, iscsi), 0);
	usleep(600000);			/* the write waits for its flush */
	ck_assert_int_eq(proto_update_lun(5, "online=0"), 0);
	snprintf(params, sizeof(params), "path=%s", disk);
	ck_assert_int_ne(proto_update_lun(5, params), 0);
	ck_assert(proto_log_has("path change refused"));
	ck_assert_int_eq(pthread_join(th, (void **)&t), 0);
	model_ctl("flush-ms 0");
	proto_assert_good(t, "FUA WRITE(10) during the path change", false);
	ck_assert_int_eq(proto_update_lun(5, params), 0);	/* now idle */
	ck_assert_int_eq(proto_update_lun(5, "online=1"), 0);
	proto_assert_good(write_lba(iscsi, 5, 8, 1), "FUA WRITE(10) after it",
			  false);
	ck_assert(proto_tgtd_alive());
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(5), 0);
}
END_TEST

static void *wce_off(void *arg)
{
	return proto_select_wce(arg, 5, 0);
}

/* LUN 5 on the model with a plain write cached, and @iscsi's MODE
 * SELECT WCE=0 started in *@th, held up by the model's 600 ms flush;
 * @other has read the unit attention that select gave it. */
static void start_slow_switch(struct iscsi_context **iscsi,
			      struct iscsi_context **other, pthread_t *th)
{
	ck_assert_int_eq(proto_add_lun(5, disk, "mode=write-back", 0), 0);
	*iscsi = proto_connect(5);
	*other = proto_connect(5);
	proto_assert_good(write_lba(*iscsi, 5, 0, 0), "WRITE(10)", false);
	model_ctl("flush-ms 600");
	ck_assert_int_eq(pthread_create(th, NULL, wce_off, *iscsi), 0);
	usleep(200000);			/* the switch waits for its flush */
	/* MODE PARAMETERS CHANGED: a unit attention for the other nexus */
	scsi_free_scsi_task(iscsi_testunitready_sync(*other, 5));
}

/* An update of another parameter (readonly=0) while a MODE SELECT's
 * switch to WCE=0 flushes: the page shows WCE=1 until the flush is
 * done, and the update must not read that 1 as a request and cancel
 * the switch (GOOD to the initiator, WCE=1 after).  The model's
 * 600 ms flush keeps the switch in progress. */
START_TEST(test_faults_wce_switch_survives_update)
{
	struct iscsi_context *iscsi, *other;
	struct scsi_task *t;
	int wce, dpofua;
	pthread_t th;

	start_slow_switch(&iscsi, &other, &th);
	proto_caching(other, 5, &wce, &dpofua);
	ck_assert_int_eq(wce, 1);	/* not yet: the flush runs */
	ck_assert_int_eq(proto_update_lun(5, "readonly=0"), 0);
	ck_assert_int_eq(pthread_join(th, (void **)&t), 0);
	model_ctl("flush-ms 0");
	proto_assert_good(t, "MODE SELECT WCE=0", false);
	scsi_free_scsi_task(iscsi_testunitready_sync(other, 5));
	proto_caching(other, 5, &wce, &dpofua);
	ck_assert_msg(wce == 0, "WCE=%d after the switch and an update of "
		      "readonly", wce);
	iscsi_destroy_context(other);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(5), 0);
}
END_TEST

/* WCE=1 while another initiator's switch to WCE=0 still flushes (the
 * page shows 1 until then): WCE ends at 1, and the initiator that asked
 * for 0 hears of it, MODE PARAMETERS CHANGED.  tgt compares the 1 with
 * the 1 shown and tells no one, and that initiator, believing WCE=0,
 * sends no flushes for writes that sit in a volatile cache (lost on a
 * power cut).  _i 0: another session's MODE SELECT, 1: tgtadm. */
START_TEST(test_faults_wce_on_over_switch_told)
{
	struct iscsi_context *iscsi, *other;
	struct scsi_task *t;
	pthread_t th;

	start_slow_switch(&iscsi, &other, &th);
	if (_i == 0)
		proto_assert_good(proto_select_wce(other, 5, 1),
				  "MODE SELECT WCE=1 during the switch", false);
	else
		ck_assert_int_eq(proto_update_lun(5, "mode_page=8:0:18:0x14:0:"
			"0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0"), 0);
	ck_assert_int_eq(pthread_join(th, (void **)&t), 0);
	model_ctl("flush-ms 0");
	proto_assert_good(t, "MODE SELECT WCE=0", false);
	proto_assert_sense(iscsi_testunitready_sync(iscsi, 5),
			   SCSI_SENSE_UNIT_ATTENTION, 0x2a01,
			   "TEST UNIT READY of the initiator that asked for 0");
	ck_assert_int_eq(proto_counter(5, "wce"), 1);
	if (_i == 1)
		ck_assert(proto_log_has("WCE 0 -> 1 by tgtadm"));
	iscsi_destroy_context(other);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(5), 0);
}
END_TEST

static void *sync_cache(void *arg)
{
	return iscsi_synchronizecache10_sync(arg, 5, 0, 0, 0, 0);
}

/* A second initiator's WCE=0 while the first one's switch to 0 still
 * waits for its flush, which then fails: the second is answered with
 * that outcome, not GOOD at once with WCE back at 1 after the failure
 * (its plain writes would then be lost on a power cut).  A
 * SYNCHRONIZE CACHE holds the model's first 1.2 s flush; the switch's
 * flush comes after it, and the fault is armed meanwhile. */
START_TEST(test_faults_second_wce_off_shares_failure)
{
	struct iscsi_context *a, *c, *d;
	struct scsi_task *ta, *tc, *td;
	pthread_t tha, thc, thd;

	ck_assert_int_eq(proto_add_lun(5, disk, "mode=write-back", 0), 0);
	a = proto_connect(5);
	c = proto_connect(5);
	d = proto_connect(5);
	proto_assert_good(write_lba(a, 5, 0, 0), "WRITE(10)", false);
	model_ctl("flush-ms 1200");
	ck_assert_int_eq(pthread_create(&thd, NULL, sync_cache, d), 0);
	usleep(150000);
	ck_assert_int_eq(pthread_create(&tha, NULL, wce_off, a), 0);
	usleep(150000);
	scsi_free_scsi_task(iscsi_testunitready_sync(c, 5)); /* A's UA */
	ck_assert_int_eq(pthread_create(&thc, NULL, wce_off, c), 0);
	usleep(300000);
	model_ctl("fail-fsync EIO 1");	/* the switch's flush, after D's */
	ck_assert_int_eq(pthread_join(thd, (void **)&td), 0);
	ck_assert_int_eq(pthread_join(tha, (void **)&ta), 0);
	ck_assert_int_eq(pthread_join(thc, (void **)&tc), 0);
	model_ctl("flush-ms 0");
	model_ctl("clear");
	/* D's own result is not the point: its flush succeeds, but the
	 * ring may answer it after the failure latched, with that error */
	scsi_free_scsi_task(td);
	proto_assert_sense(ta, SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "the first MODE SELECT WCE=0, whose flush failed");
	proto_assert_sense(tc, SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "the second MODE SELECT WCE=0, during the first");
	ck_assert_int_eq(proto_counter(5, "wce"), 1);
	iscsi_destroy_context(d);
	iscsi_destroy_context(c);
	iscsi_destroy_context(a);
	ck_assert_int_eq(proto_del_lun(5), 0);
}
END_TEST

/* MODE SELECT WCE=0 whose flush fails: MEDIUM ERROR, WCE stays 1 (what
 * was cached is not durable), and the counters count the failed
 * command. */
START_TEST(test_faults_wce_off_flush_fails)
{
	struct iscsi_context *iscsi;
	int wce, dpofua;

	ck_assert_int_eq(proto_add_lun(5, disk, "mode=write-back", 0), 0);
	iscsi = proto_connect(5);
	proto_assert_good(write_lba(iscsi, 5, 0, 0), "WRITE(10)", false);
	/* the flush's errno through the sense table, as a write's: EIO a
	 * WRITE ERROR, ENOSPC SPACE ALLOCATION FAILED (SBC-3 4.7.3.6) */
	model_ctl(_i ? "fail-fsync ENOSPC 1" : "fail-fsync EIO 1");
	proto_assert_sense(proto_select_wce(iscsi, 5, 0),
			   _i ? SCSI_SENSE_DATA_PROTECTION : SCSI_SENSE_MEDIUM_ERROR,
			   _i ? 0x2707 : 0x0c00,
			   "MODE SELECT WCE=0 whose flush fails");
	model_ctl("clear");
	proto_caching(iscsi, 5, &wce, &dpofua);
	ck_assert_int_eq(wce, 1);
	ck_assert_int_ge(proto_counter(5, "errors"), 1);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(5), 0);
}
END_TEST

/*
 * A flush fails with an errno open(2) could also return (EMFILE,
 * ENFILE, ENOMEM: FUSE passes its daemon's errno on, CIFS maps a
 * server's too-many-open-files to EMFILE): WRITE ERROR, latched, and
 * WCE stays 1 (not GOOD with nothing latched), on both
 * engines.  The errno comes from below the module, from the device
 * model, where nothing in the module can bypass it.
 */
static const char *const any_errno[] = { "ENFILE", "EMFILE", "ENOMEM" };

START_TEST(test_faults_flush_any_errno)
{
	const char *err = any_errno[_i / 2];
	struct iscsi_context *iscsi;
	char cmd[64];
	int wce, dpofua;

	ck_assert_int_eq(proto_add_lun(3, disk, wb_engines[_i % 2], 0), 0);
	iscsi = proto_connect(3);
	proto_assert_good(write_lba(iscsi, 3, 0, 0), "WRITE(10)", false);
	snprintf(cmd, sizeof(cmd), "fail-fsync %s 1", err);
	model_ctl(cmd);
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 3, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) whose flush fails");
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 3, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) after it");
	proto_assert_sense(write_lba(iscsi, 3, 8, 1), SCSI_SENSE_MEDIUM_ERROR,
			   0x0c00, "FUA WRITE(10) after it");
	proto_assert_sense(proto_select_wce(iscsi, 3, 0), SCSI_SENSE_MEDIUM_ERROR,
			   0x0c00, "MODE SELECT WCE=0 after it");
	proto_caching(iscsi, 3, &wce, &dpofua);
	ck_assert_int_eq(wce, 1);
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(3), 0);
}
END_TEST

/* The writeback of cached writes fails (the daemon's FUSE_WRITE answers
 * ENFILE): the SYNCHRONIZE CACHE whose flush reports it fails, and so
 * does every one after it, though the device would flush fine again. */
START_TEST(test_faults_writeback_any_errno)
{
	struct iscsi_context *iscsi;

	ck_assert_int_eq(proto_add_lun(3, disk, wb_engines[_i], 0), 0);
	iscsi = proto_connect(3);
	proto_assert_good(write_lba(iscsi, 3, 0, 0), "WRITE(10)", false);
	model_ctl("fail-write ENFILE");
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 3, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) whose writeback fails");
	model_ctl("clear");
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 3, 0, 0, 0, 0),
			   SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "SYNCHRONIZE CACHE(10) after it");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(3), 0);
}
END_TEST

/* A flush that says "not now" fails all the same: its retry's success
 * proves nothing.  The model's writeback failing once with EAGAIN makes
 * the first fdatasync report it and the next succeed, with the data gone
 * (a retried SYNCHRONIZE CACHE would be answered GOOD over it); and a flush
 * answered EINTR by the device may have dropped its cache. */
START_TEST(test_faults_flush_eintr_fails)
{
	static const char *const fault[] = { "fail-write EAGAIN 1",
					     "fail-fsync EINTR 1" };
	struct iscsi_context *iscsi;

	for (int f = 0; f < 2; f++) {
		ck_assert_int_eq(proto_add_lun(3, disk, wb_engines[_i], 0), 0);
		iscsi = proto_connect(3);
		proto_assert_good(write_lba(iscsi, 3, 0, 0), "WRITE(10)", false);
		model_ctl(fault[f]);
		proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 3, 0, 0,
				   0, 0), SCSI_SENSE_MEDIUM_ERROR, 0x0c00, fault[f]);
		model_ctl("clear");
		proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 3, 0, 0,
				   0, 0), SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
				   "SYNCHRONIZE CACHE(10) after it");
		ck_assert_int_eq(proto_counter(3, "latched.errno // 0"),
				 f ? EINTR : EAGAIN);
		iscsi_destroy_context(iscsi);
		ck_assert_int_eq(proto_del_lun(3), 0);
		ck_assert_int_eq(proto_clear_latches(), 0);
	}
}
END_TEST

/* FUSE needs /dev/fuse and fusermount3; the model must be built. */
static bool fuse_available(void)
{
	const char *top = getenv("SYNCGUARD_TOP");

	return access("/dev/fuse", R_OK | W_OK) == 0 &&
	       proto_sh("command -v fusermount3 >/dev/null") == 0 &&
	       proto_sh("test -x '%s/tools/syncguard-devmodel'",
			top ? top : ".") == 0;
}

Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("device-model");

	if (!fuse_available()) {
		test_left_out("tests/proto/check_faults.c:device-model", true,
			      "needs /dev/fuse, fusermount3 (fuse3) and "
			      "tools/syncguard-devmodel");
		return s;
	}
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, fresh_state, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_faults_failed_flush_latches, 0, 2);
	tcase_add_test(tc, test_faults_latch_outlives_lun);
	tcase_add_test(tc, test_faults_write_through_eio);
	tcase_add_test(tc, test_faults_device_full);
	tcase_add_test(tc, test_faults_fuse_engine);
	tcase_add_loop_test(tc, test_faults_fuse_uring_read_after_write, 0, 3);
	tcase_add_loop_test(tc, test_faults_fuse_uring_dsync_flushes, 0, 2);
	tcase_add_loop_test(tc, test_faults_out_of_descriptors_busy, 0, 2);
	tcase_add_loop_test(tc, test_faults_fresh_lun_flushes_what_it_finds, 0, 2);
	tcase_add_test(tc, test_faults_open_flush_in_background);
	tcase_add_test(tc, test_faults_immutable_file_recovers);
	tcase_add_loop_test(tc, test_faults_fua_enospc_from_flush_latches, 0, 2);
	tcase_add_test(tc, test_faults_error_lines_limited);
	tcase_add_test(tc, test_faults_immed_deferred_error);
	tcase_add_test(tc, test_faults_path_change_waits);
	tcase_add_test(tc, test_faults_wce_switch_survives_update);
	tcase_add_loop_test(tc, test_faults_wce_on_over_switch_told, 0, 2);
	tcase_add_test(tc, test_faults_second_wce_off_shares_failure);
	tcase_add_loop_test(tc, test_faults_wce_off_flush_fails, 0, 2);
	tcase_add_loop_test(tc, test_faults_flush_any_errno, 0, 6);
	tcase_add_loop_test(tc, test_faults_writeback_any_errno, 0, 2);
	tcase_add_loop_test(tc, test_faults_flush_eintr_fails, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}
