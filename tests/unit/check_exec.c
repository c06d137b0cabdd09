/*
 * The executor against a real file, with the system calls counted and
 * faults injected through syncguard_sys: each test proves what one
 * command costs (e.g. "a FUA write in write-back makes exactly one data
 * sync and no device flush") and what the initiator hears when the
 * device fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"
#include "unit.h"

#define BS 512u
#define LUN_BYTES (1u << 20)
#define CAP_BLOCKS (LUN_BYTES / BS)

/* ---- fault injection and counting ---- */

static struct {
	int pwrite_errno, pwrite_eintr, fdatasync_errno, pread_errno;
	int dsync_errno;	/* only RWF_DSYNC writes fail */
	bool pwrite_short;
	int pwrites, dsyncs, fdatasyncs, writeouts;
	void (*fdatasync_hook)(void);	/* runs in the next fdatasync */
	void (*dsync_hook)(void);	/* runs in the next RWF_DSYNC write */
	int fdatasync_fd;		/* the last fdatasync's descriptor */
} fx;

static ssize_t fx_pwritev2(int fd, const struct iovec *iov, int cnt,
			   off_t off, int flags)
{
	struct iovec half;

	fx.pwrites++;
	if (flags & RWF_DSYNC) {
		void (*hook)(void) = fx.dsync_hook;

		fx.dsyncs++;
		fx.dsync_hook = NULL;
		if (hook)
			hook();
	}
	if (fx.pwrite_eintr) {
		fx.pwrite_eintr--;
		errno = EINTR;
		return -1;
	}
	if (fx.pwrite_errno || (fx.dsync_errno && (flags & RWF_DSYNC))) {
		errno = fx.pwrite_errno ? fx.pwrite_errno : fx.dsync_errno;
		return -1;
	}
	if (fx.pwrite_short && iov[0].iov_len > 1) {
		fx.pwrite_short = false;
		half = (struct iovec){ iov[0].iov_base, iov[0].iov_len / 2 };
		return pwritev2(fd, &half, 1, off, flags);
	}
	return pwritev2(fd, iov, cnt, off, flags);
}

static int fx_fdatasync(int fd)
{
	void (*hook)(void) = fx.fdatasync_hook;

	fx.fdatasyncs++;
	fx.fdatasync_fd = fd;
	fx.fdatasync_hook = NULL;
	if (hook)
		hook();
	if (fx.fdatasync_errno) {
		errno = fx.fdatasync_errno;
		return -1;
	}
	return fdatasync(fd);
}

static ssize_t fx_pread(int fd, void *buf, size_t len, off_t off)
{
	if (fx.pread_errno) {
		errno = fx.pread_errno;
		return -1;
	}
	return pread(fd, buf, len, off);
}

static int fx_sync_file_range(int fd, off_t off, off_t len, unsigned int f)
{
	fx.writeouts++;
	return sync_file_range(fd, off, len, f);
}

/* ---- a LUN on a file in build/ (not /tmp: it may be tmpfs) ---- */

static struct syncguard_lun lun;
static char dir[] = "build/unit.XXXXXX";
static char path[64];

static void make_file(const char *p, size_t size, bool written)
{
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	static uint8_t zero[65536];

	ck_assert_int_ge(fd, 0);
	for (size_t off = 0; written && off < size; off += sizeof(zero)) {
		size_t n = size - off < sizeof(zero) ? size - off : sizeof(zero);

		ck_assert_int_eq(pwrite(fd, zero, n, (off_t)off), (ssize_t)n);
	}
	if (!written)
		ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	close(fd);
}

static enum syncguard_sync_loop sync_loop;	/* the next open's */

static void open_lun_opts(enum syncguard_mode mode,
			  enum syncguard_write_sync ws,
			  enum syncguard_direct direct)
{
	struct syncguard_opts o = { .mode = mode, .alloc_check = true,
				    .write_sync = ws, .direct = direct,
				    .sync_loop = sync_loop };
	char err[256];

	make_file(path, LUN_BYTES, true);
	ck_assert_msg(syncguard_lun_open(&lun, path, 9, &o, err,
					 sizeof(err)) == 0, "%s", err);
	syncguard_lun_set_wce(&lun, syncguard_mode_wce(mode));
	memset(&fx, 0, sizeof(fx));
}

static void open_lun_ws(enum syncguard_mode mode, enum syncguard_write_sync ws)
{
	open_lun_opts(mode, ws, SYNCGUARD_DIRECT_AUTO);
}

static void open_lun(enum syncguard_mode mode)
{
	open_lun_ws(mode, SYNCGUARD_WRITE_SYNC_GROUP);
}

static void setup(void)
{
	lun.fd = -1;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lun.img", dir);
	syncguard_sys.pwritev2 = fx_pwritev2;
	syncguard_sys.fdatasync = fx_fdatasync;
	syncguard_sys.pread = fx_pread;
	syncguard_sys.sync_file_range = fx_sync_file_range;
}

static void teardown(void)
{
	sync_loop = SYNCGUARD_SYNCLOOP_AUTO;
	if (lun.fd >= 0)
		syncguard_lun_close(&lun);
	unlink(path);
	rmdir(dir);
}

/* ---- commands ---- */

static uint8_t data[64 * BS], back[64 * BS];

static struct syncguard_result run(const uint8_t *cdb, size_t len,
				   const uint8_t *out, uint32_t out_len,
				   uint8_t *in, uint32_t in_len)
{
	struct syncguard_req req = { cdb, len, out, out_len, in, in_len };
	struct syncguard_result res;

	syncguard_execute(&lun, &req, &res);
	return res;
}

static enum syncguard_reason write16(uint64_t lba, uint32_t n, bool fua)
{
	uint8_t cdb[16] = { 0x8a, fua ? 0x08 : 0 };

	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
	cdb[12] = (uint8_t)(n >> 8);
	cdb[13] = (uint8_t)n;
	/* no Data-Out at all for zero blocks, as tgt passes it */
	return run(cdb, 16, n ? data : NULL, n * BS, NULL, 0).reason;
}

static enum syncguard_reason read10(uint32_t lba, uint16_t n, bool fua)
{
	uint8_t cdb[10] = { 0x28, fua ? 0x08 : 0, lba >> 24, lba >> 16,
			    lba >> 8, lba, 0, n >> 8, n, 0 };

	return run(cdb, 10, NULL, 0, back, n * BS).reason;
}

static enum syncguard_reason sync_cache10(uint32_t lba, uint16_t n)
{
	uint8_t cdb[10] = { 0x35, 0, lba >> 24, lba >> 16, lba >> 8, lba, 0,
			    n >> 8, n, 0 };

	return run(cdb, 10, NULL, 0, NULL, 0).reason;
}

static void fill(uint8_t seed)
{
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(seed + i * 7);
}

static void assert_sense(enum syncguard_reason r, uint8_t key, uint16_t asc)
{
	struct syncguard_sense s = syncguard_sense_of(r);

	ck_assert_uint_eq(s.status, 0x02);
	ck_assert_uint_eq(s.key, key);
	ck_assert_uint_eq(s.asc, asc);
}

/* A resource missing before any I/O (SYNCGUARD_ERESOURCE) is status
 * BUSY with no sense, and latches nothing; EMFILE, ENFILE and ENOMEM
 * from an I/O call are that call's failure (core/policy.c) */
START_TEST(test_exec_no_descriptor_busy)
{
	struct syncguard_sense s;

	ck_assert_int_eq(syncguard_reason_of_errno(SYNCGUARD_ERESOURCE, true),
			 SYNCGUARD_ERR_BUSY);
	ck_assert_int_eq(syncguard_reason_of_errno(EMFILE, true),
			 SYNCGUARD_ERR_WRITE);
	ck_assert_int_eq(syncguard_reason_of_errno(ENFILE, false),
			 SYNCGUARD_ERR_READ);
	ck_assert_int_eq(syncguard_resource_errno(EMFILE), SYNCGUARD_ERESOURCE);
	ck_assert_int_eq(syncguard_resource_errno(EIO), EIO);
	s = syncguard_sense_of(SYNCGUARD_ERR_BUSY);
	ck_assert_uint_eq(s.status, 0x08);
	ck_assert_uint_eq(s.key, 0);
	ck_assert(!syncguard_policy_latches(SYNCGUARD_CALL_WRITE));
	ck_assert(syncguard_policy_latches(SYNCGUARD_CALL_FLUSH));
	assert_sense(syncguard_reason_of_errno(EPERM, true), 0x07, 0x2700);
}
END_TEST

/* ---- cost of each command per mode ---- */

START_TEST(test_exec_write_back_costs)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);	/* write_sync=group */
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.dsyncs + fx.fdatasyncs + fx.writeouts, 0);
	ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* FUA: one group flush */
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* clean: elided */
	ck_assert_uint_eq(lun.stats->flushes_elided, 1);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 2);	/* dirty: flushed */
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(read10(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 3);	/* FUA read: medium current */
	ck_assert_int_eq(read10(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(read10(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 3);	/* clean: nothing to do */
	ck_assert_uint_eq(lun.stats->device_flushes, 3);
	ck_assert_uint_eq(lun.stats->fua_writes, 1);
	ck_assert_uint_eq(lun.stats->sync_caches, 2);
}
END_TEST

/* START STOP UNIT with byte 4 @b4 (POWER CONDITION, NO_FLUSH, LOEJ,
 * START) */
static enum syncguard_reason start_stop(uint8_t b4)
{
	uint8_t cdb[6] = { 0x1b, 0, 0, 0, b4, 0 };

	return run(cdb, 6, NULL, 0, NULL, 0).reason;
}

/* SBC-3 5.25: a stop (START=0), STANDBY or FORCE_STANDBY_0 with
 * NO_FLUSH=0 writes the cache to the medium first, as SYNCHRONIZE CACHE
 * does; a start, IDLE, ACTIVE or NO_FLUSH=1 do not; glue/cmdtable.c
 * sends the first kind here.  Before, tgt answered them all GOOD at
 * once, and a write-back LUN stopped so lost its cache at a power cut. */
START_TEST(test_exec_start_stop_flushes)
{
	static const uint8_t flush[] = { 0x00, 0x30, 0xb0 };
	static const uint8_t none[] = { 0x01, 0x04, 0x34, 0x20, 0x10, 0x70 };
	struct syncguard_cdb c;
	uint8_t cdb[6] = { 0x1b };

	for (size_t i = 0; i < sizeof(flush); i++) {
		cdb[4] = flush[i];
		ck_assert_int_eq(syncguard_cdb_decode(cdb, 6, &c), 0);
		ck_assert_msg(syncguard_start_stop_flushes(&c), "0x%02x",
			      flush[i]);
	}
	for (size_t i = 0; i < sizeof(none); i++) {
		cdb[4] = none[i];
		ck_assert_int_eq(syncguard_cdb_decode(cdb, 6, &c), 0);
		ck_assert_msg(!syncguard_start_stop_flushes(&c), "0x%02x",
			      none[i]);
	}
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(start_stop(0x01), SYNCGUARD_OK);	/* start */
	ck_assert_int_eq(start_stop(0x04), SYNCGUARD_OK);	/* NO_FLUSH */
	ck_assert_int_eq(fx.fdatasyncs, 0);
	ck_assert_int_eq(start_stop(0x00), SYNCGUARD_OK);	/* stop */
	ck_assert_int_eq(fx.fdatasyncs, 1);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(start_stop(0x30), SYNCGUARD_OK);	/* standby */
	ck_assert_int_eq(fx.fdatasyncs, 2);
	ck_assert_int_eq(start_stop(0x00), SYNCGUARD_OK);	/* clean */
	ck_assert_int_eq(fx.fdatasyncs, 2);
	ck_assert_uint_eq(lun.stats->sync_caches, 0);
}
END_TEST

START_TEST(test_exec_write_back_dsync_costs)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC);
	ck_assert_uint_eq(lun.stats->write_sync, SYNCGUARD_WRITE_SYNC_DSYNC);
	/* a fresh write-back LUN starts dirty (what an earlier tgtd left):
	 * its first SYNCHRONIZE CACHE flushes */
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);
	ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.dsyncs, 1);		/* that write only */
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* no whole-device flush */
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* nothing volatile left */
}
END_TEST

static volatile int plain_written;

static void *write_plain_block_15(void *arg)
{
	(void)arg;
	ck_assert_int_eq(write16(15, 1, false), SYNCGUARD_OK);
	plain_written = 1;
	return NULL;
}

/* write-back with direct=auto: an RWF_DSYNC write goes O_DIRECT unless a
 * page-cache write holds one of its pages (then RWF_DSYNC through the
 * page cache), and a page-cache write waits while an O_DIRECT write holds
 * one of its pages (core/mix.c); the data is right either way */
START_TEST(test_exec_write_back_mix)
{
	const uint64_t page = 4096, fifteen = 15 * BS;
	pthread_t t;

	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC);
	ck_assert(lun.mix.on && !lun.direct_io);
	fill(1);
	ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
	ck_assert_uint_eq(lun.stats->direct_writes, 1);
	ck_assert_int_eq(fx.dsyncs, 1);
	ck_assert(syncguard_mix_try(&lun.mix, SYNCGUARD_MIX_CACHED, fifteen, BS));
	fill(2);
	ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
	ck_assert_uint_eq(lun.stats->direct_writes, 1);	/* the page cache */
	ck_assert_int_eq(fx.dsyncs, 2);
	syncguard_mix_end(&lun.mix, SYNCGUARD_MIX_CACHED, fifteen, BS);
	ck_assert_int_eq(read10(8, 8, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, data, 8 * BS);
	ck_assert(syncguard_mix_try(&lun.mix, SYNCGUARD_MIX_DIRECT, page, page));
	fill(3);
	pthread_create(&t, NULL, write_plain_block_15, NULL);
	usleep(50000);
	ck_assert_int_eq(plain_written, 0);	/* waits for the O_DIRECT one */
	syncguard_mix_end(&lun.mix, SYNCGUARD_MIX_DIRECT, page, page);
	pthread_join(t, NULL);
	ck_assert_int_eq(plain_written, 1);
	ck_assert_int_eq(read10(15, 1, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, data, BS);
	ck_assert_uint_eq(lun.stats->direct_writes, 1);
	/* direct=no: never O_DIRECT */
	syncguard_lun_close(&lun);
	open_lun_opts(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC,
		      SYNCGUARD_DIRECT_NO);
	ck_assert(!lun.mix.on && lun.dfd < 0);
	ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
	ck_assert_uint_eq(lun.stats->direct_writes, 0);
}
END_TEST

/* write_sync=auto: the running trial's arm decides, RWF_DSYNC (arm 0,
 * also before anything is measured) or group commit (arm 1) -- but a
 * durable write alone in flight, which no flush could share, always
 * takes RWF_DSYNC, and its answer neither starts nor keeps up the trial
 * (core/writesync.c: a QD1 load must not leave it rates for a deeper
 * one); a write that needs no durability costs nothing */
START_TEST(test_exec_auto_write_sync)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_AUTO);
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.dsyncs, 1);		/* nothing measured yet */
	ck_assert_int_eq(fx.fdatasyncs, 0);
	lun.sync_trial.arm = 1;			/* group commit measured faster */
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.dsyncs, 2);		/* but it was alone */
	ck_assert_int_eq(fx.fdatasyncs, 0);
	ck_assert_msg(lun.sync_trial.t0_us == 0, "a durable write alone in "
		      "flight scored the trial");
	syncguard_durable_begin(&lun);		/* another one in flight */
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	syncguard_durable_end(&lun);
	ck_assert_int_eq(fx.dsyncs, 2);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* a group flush */
	ck_assert_uint_eq(lun.durable_inflight, 0);
	lun.sync_trial.arm = 0;
	syncguard_durable_begin(&lun);
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	syncguard_durable_end(&lun);
	ck_assert_int_eq(fx.dsyncs, 3);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);	/* not FUA */
	ck_assert_int_eq(fx.dsyncs + fx.fdatasyncs, 4);		/* no cost */
	/* the answered durable writes with company reach the trial (its
	 * first epoch starts with the first of them) */
	ck_assert_uint_gt(lun.sync_trial.t0_us, 0);
	/* a lone one counts in the rate of an epoch under way, without
	 * lengthening it or keeping the trial up */
	lun.sync_trial.m0_us = lun.sync_trial.last_us = syncguard_now_us();
	lun.sync_trial.answered = lun.sync_trial.ticks = 0;
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	ck_assert_msg(lun.sync_trial.answered == 1, "a lone durable write's "
		      "answer did not count in the epoch's rate");
	ck_assert_uint_eq(lun.sync_trial.ticks, 0);
	ck_assert_uint_le(lun.sync_trial.last_us, lun.sync_trial.m0_us);
}
END_TEST

/* A plain write as tgtd hands it over: noted first, as
 * bs_syncguard_cmd_submit does; a SYNCHRONIZE CACHE as
 * syncguard_sync_cache does. */
static enum syncguard_reason noted_write(uint64_t lba)
{
	uint8_t cdb[16] = { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0, (uint8_t)lba, 0,
			    0, 0, 8 };

	syncguard_lun_note_cdb(&lun, cdb, sizeof(cdb));
	return write16(lba, 8, false);
}

static enum syncguard_reason noted_sync_cache(void)
{
	syncguard_lun_note_sync_cache(&lun);
	return sync_cache10(0, 0);
}

/* @n rounds of WRITE then SYNCHRONIZE CACHE */
static void write_sync_loop(int n)
{
	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(noted_write(0), SYNCGUARD_OK);
		ck_assert_int_eq(noted_sync_cache(), SYNCGUARD_OK);
	}
}

/* The WRITE+SYNCHRONIZE CACHE loop on write-back (syncguard_write_persist):
 * after 8 SYNCHRONIZE CACHEs that each followed one plain write, the
 * plain write is made durable itself (RWF_DSYNC) and the SYNCHRONIZE
 * CACHE after it costs no flush; two writes in a row keep the second
 * cached. */
START_TEST(test_exec_write_sync_loop)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_AUTO);
	write_sync_loop(8);
	ck_assert_int_eq(fx.dsyncs, 0);
	ck_assert_int_eq(fx.fdatasyncs, 8);	/* cached, then flushed */
	write_sync_loop(4);
	ck_assert_int_eq(fx.dsyncs, 4);		/* durable at once */
	ck_assert_int_eq(fx.fdatasyncs, 8);	/* clean: elided */
	ck_assert_uint_eq(lun.stats->flushes_elided, 4);
	/* the counters say so */
	ck_assert_uint_eq(lun.stats->sync_loop_way, SYNCGUARD_SYNC_LOOP_STREAK);
	ck_assert_int_eq(noted_write(0), SYNCGUARD_OK);
	ck_assert_int_eq(noted_write(8), SYNCGUARD_OK);	/* not a loop */
	ck_assert_uint_eq(lun.stats->sync_loop_way, 0);
	ck_assert_int_eq(fx.dsyncs, 5);		/* the first only */
	ck_assert_int_eq(noted_sync_cache(), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 9);	/* the second was cached */
}
END_TEST

/* ... but not with write_sync=group, the administrator's choice of
 * shared flushes */
START_TEST(test_exec_write_sync_loop_group)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_GROUP);
	write_sync_loop(12);
	ck_assert_int_eq(fx.dsyncs, 0);
	ck_assert_int_eq(fx.fdatasyncs, 12);
}
END_TEST

/* sync_loop=off keeps every plain write cached, as write_sync=group does */
START_TEST(test_exec_write_sync_loop_off)
{
	sync_loop = SYNCGUARD_SYNCLOOP_OFF;
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_AUTO);
	write_sync_loop(12);
	ck_assert_int_eq(fx.dsyncs, 0);
	ck_assert_int_eq(fx.fdatasyncs, 12);
	ck_assert_uint_eq(lun.stats->sync_loop_way, 0);
}
END_TEST

/* Commands as several initiators in flight send them, for @ms
 * milliseconds: two plain writes, then their two SYNCHRONIZE CACHEs;
 * the streak never forms, so every write stays cached. */
static void interleaved_loop(int ms)
{
	uint64_t end = syncguard_now_us() + (uint64_t)ms * 1000;

	while (syncguard_now_us() < end) {
		ck_assert_int_eq(noted_write(0), SYNCGUARD_OK);
		ck_assert_int_eq(noted_write(8), SYNCGUARD_OK);
		ck_assert_int_eq(noted_sync_cache(), SYNCGUARD_OK);
		ck_assert_int_eq(noted_sync_cache(), SYNCGUARD_OK);
		usleep(200);
	}
}

/* With writes and SYNCHRONIZE CACHEs interleaved (several writers in
 * flight) plain writes stay cached: a shared flush for several writes
 * is cheaper than one sync each.  Also after a single writer's streak
 * (two writes in a row end it), in write-through (every write durable
 * anyway) and on write-back at WCE=0. */
START_TEST(test_exec_write_sync_loop_interleaved)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_AUTO);
	interleaved_loop(300);
	ck_assert_int_eq(fx.dsyncs, 0);
	ck_assert_uint_gt(fx.fdatasyncs, 0);
	ck_assert_int_eq(noted_write(0), SYNCGUARD_OK);	/* two in a row: */
	ck_assert_int_eq(noted_write(8), SYNCGUARD_OK);	/* no streak */
	write_sync_loop(12);
	ck_assert_int_eq(fx.dsyncs, 4);
	interleaved_loop(100);
	ck_assert_int_eq(fx.dsyncs, 5);		/* the first write only */
	ck_assert_uint_eq(lun.stats->sync_loop_way, 0);
	syncguard_lun_close(&lun);
	unlink(path);
	open_lun_ws(SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_WRITE_SYNC_AUTO);
	write_sync_loop(12);
	ck_assert_uint_eq(lun.stats->sync_loop_way, 0);
	syncguard_lun_close(&lun);
	unlink(path);
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_AUTO);
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, false), 0);
	write_sync_loop(12);
	ck_assert_uint_eq(lun.stats->sync_loop_way, 0);
}
END_TEST

/* A WRITE of zero blocks does nothing and answers GOOD (SBC-3 5.32), in
 * every mode, FUA or not, with O_DIRECT writes or without; it must never
 * latch the LUN (no buffer must not look like no memory). */
START_TEST(test_exec_zero_blocks)
{
	static const enum syncguard_mode modes[] = {
		SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_MODE_WRITE_BACK,
		SYNCGUARD_MODE_PLP,
	};

	for (int i = 0; i < 3; i++) {
		open_lun_ws(modes[i], SYNCGUARD_WRITE_SYNC_AUTO);
		ck_assert_int_eq(write16(8, 0, false), SYNCGUARD_OK);
		ck_assert_int_eq(write16(8, 0, true), SYNCGUARD_OK);
		ck_assert_int_eq(syncguard_lun_latched(&lun), 0);
		ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
		syncguard_lun_close(&lun);
		unlink(path);
	}
}
END_TEST

START_TEST(test_exec_write_through_costs)
{
	open_lun(SYNCGUARD_MODE_WRITE_THROUGH);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 2);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 2);	/* nothing is volatile */
	syncguard_lun_close(&lun);
	open_lun_ws(SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_WRITE_SYNC_DSYNC);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.dsyncs, 1);
	ck_assert_int_eq(fx.fdatasyncs, 0);
}
END_TEST

/* plp's SYNCHRONIZE CACHE flushes nothing, except while a switch to
 * WCE=0 is pending (the one a LUN starts as it opens, over what it found
 * there): then it waits for a flush, as every mode's does */
START_TEST(test_exec_plp_sync_cache_during_switch)
{
	open_lun(SYNCGUARD_MODE_PLP);
	syncguard_lun_set_wce(&lun, true);	/* as a LUN opens */
	syncguard_lun_want_wce(&lun, false);	/* its switch still pending */
	ck_assert(syncguard_lun_switch_pending(&lun));
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);
	ck_assert_int_eq(syncguard_lun_apply_wce(&lun), 0);	/* done */
	ck_assert(!syncguard_lun_switch_pending(&lun));
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* plp again: no flush */
}
END_TEST

START_TEST(test_exec_plp_costs)
{
	uint8_t w10[10] = { 0x2a, 0, 0, 0, 0, 32, 0, 0, 2, 0 };

	open_lun(SYNCGUARD_MODE_PLP);
	ck_assert_int_ge(lun.dfd, 0);		/* O_DIRECT where it can */
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(write16(8, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_uint_eq(lun.stats->direct_writes, 2);	/* each reached the device */
	ck_assert_int_eq(fx.writeouts, 0);	/* straight, no page cache */
	ck_assert_int_eq(fx.dsyncs, 0);		/* and no device flush at all */
	ck_assert_int_eq(fx.fdatasyncs, 0);
	/* Data-Out ending inside a block never reaches the page cache of
	 * an O_DIRECT LUN: it is refused */
	fill(2);
	ck_assert_int_eq(run(w10, 10, data, 1000, NULL, 0).reason,
			 SYNCGUARD_ERR_INVALID_IU);
	ck_assert_int_eq(fx.pwrites, 2);
	/* with direct=no a plp write is buffered, then written out */
	syncguard_lun_close(&lun);
	open_lun_opts(SYNCGUARD_MODE_PLP, SYNCGUARD_WRITE_SYNC_AUTO,
		      SYNCGUARD_DIRECT_NO);
	ck_assert_int_lt(lun.dfd, 0);
	ck_assert_int_eq(run(w10, 10, data, 2 * BS, NULL, 0).reason,
			 SYNCGUARD_OK);
	ck_assert_int_eq(fx.writeouts, 1);
	ck_assert_int_eq(fx.fdatasyncs, 0);
	ck_assert_int_eq(read10(32, 2, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, data, 2 * BS);
	/* a FUA write of no blocks writes nothing out (sync_file_range's
	 * length 0 means to the end of the file) */
	ck_assert_int_eq(write16(40, 0, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.writeouts, 1);
}
END_TEST

START_TEST(test_exec_wce_off_flushes_then_writes_through)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, false), 0);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* dirty data made durable */
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 2);	/* now write-through */
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, true), 0);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 2);
}
END_TEST

/* ---- data ---- */

START_TEST(test_exec_data_round_trip)
{
	for (int m = 0; m < 3; m++) {
		open_lun((enum syncguard_mode)m);
		fill((uint8_t)(m + 1));
		ck_assert_int_eq(write16(100, 16, m == 1), SYNCGUARD_OK);
		memset(back, 0, sizeof(back));
		ck_assert_int_eq(read10(100, 16, false), SYNCGUARD_OK);
		ck_assert_mem_eq(back, data, 16 * BS);
		syncguard_lun_close(&lun);
	}
}
END_TEST

START_TEST(test_exec_write_same_lbdata)
{
	uint8_t cdb[10] = { 0x41, 0x02, 0, 0, 0, 10, 0, 0, 4, 0 };

	open_lun(SYNCGUARD_MODE_WRITE_THROUGH);
	fill(9);
	ck_assert_int_eq(run(cdb, 10, data, BS, NULL, 0).reason, SYNCGUARD_OK);
	ck_assert_int_eq(read10(10, 4, false), SYNCGUARD_OK);
	for (uint32_t i = 0; i < 4; i++) {
		uint8_t *b = back + i * BS;

		ck_assert_uint_eq(b[3], 10 + i);	/* LBDATA */
		ck_assert_mem_eq(b + 4, data + 4, BS - 4);
	}
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* write-through: durable */
	/* Data-Out shorter than a block */
	ck_assert_int_eq(run(cdb, 10, data, 100, NULL, 0).reason,
			 SYNCGUARD_ERR_PARAM_LEN);
}
END_TEST

/* WRITE SAME(16) with NDOB (SBC-4): no Data-Out, the blocks become
 * zeroes, durably on write-through; with LBDATA there is no block to
 * stamp: refused, INVALID FIELD IN CDB (not PARAMETER LIST LENGTH
 * ERROR). */
START_TEST(test_exec_write_same_ndob)
{
	uint8_t ws16[16] = { 0x93, 0x01, 0, 0, 0, 0, 0, 0, 0, 20,
			     0, 0, 0, 3, 0, 0 };
	uint8_t zero[3 * BS] = { 0 };

	open_lun(SYNCGUARD_MODE_WRITE_THROUGH);
	fill(5);
	ck_assert_int_eq(write16(20, 3, false), SYNCGUARD_OK);
	fx.fdatasyncs = 0;
	ck_assert_int_eq(run(ws16, 16, NULL, 0, NULL, 0).reason, SYNCGUARD_OK);
	ck_assert_int_eq(read10(20, 3, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, zero, 3 * BS);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* write-through: durable */
	ws16[1] = 0x03;				/* NDOB + LBDATA */
	ck_assert_int_eq(run(ws16, 16, NULL, 0, NULL, 0).reason,
			 SYNCGUARD_ERR_INVALID_CDB);
}
END_TEST

/* BYTCHK 10b, and 11b for WRITE AND VERIFY, are reserved: refused
 * before anything is written or read */
START_TEST(test_exec_bytchk_reserved)
{
	uint8_t wv10[10] = { 0x2e, 0x04, 0, 0, 0, 8, 0, 0, 1, 0 };
	uint8_t v10[10] = { 0x2f, 0x04, 0, 0, 0, 8, 0, 0, 1, 0 };

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fill(6);
	ck_assert_int_eq(run(wv10, 10, data, BS, NULL, 0).reason,
			 SYNCGUARD_ERR_INVALID_CDB);
	ck_assert_int_eq(run(v10, 10, data, BS, NULL, 0).reason,
			 SYNCGUARD_ERR_INVALID_CDB);
	wv10[1] = 0x06;		/* 11b: VERIFY's alone */
	ck_assert_int_eq(run(wv10, 10, data, BS, NULL, 0).reason,
			 SYNCGUARD_ERR_INVALID_CDB);
	ck_assert_int_eq(fx.pwrites, 0);
	wv10[1] = 0x02;		/* BYTCHK 01b: written and compared */
	ck_assert_int_eq(run(wv10, 10, data, BS, NULL, 0).reason, SYNCGUARD_OK);
	ck_assert_int_eq(fx.pwrites, 1);
}
END_TEST

static enum syncguard_reason orwrite16(uint64_t lba, uint32_t n, bool fua)
{
	uint8_t cdb[16] = { 0x8b, fua ? 0x08 : 0 };

	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
	cdb[13] = (uint8_t)n;
	return run(cdb, 16, n ? data : NULL, n * BS, NULL, 0).reason;
}

/* ORWRITE(16) (SBC-3 5.12): the OR of the medium and the Data-Out;
 * FUA as a WRITE's (write-back: one group flush, as test_exec_write_
 * back_costs), the range checked */
START_TEST(test_exec_orwrite)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);	/* write_sync=group */
	memset(data, 0, sizeof(data));
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	memset(data, 0xa5, sizeof(data));
	ck_assert_int_eq(orwrite16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 0);
	ck_assert_int_eq(read10(0, 8, false), SYNCGUARD_OK);
	for (size_t i = 0; i < 8 * BS; i++)
		ck_assert_uint_eq(back[i], 0xa5);
	memset(data, 0x5a, sizeof(data));
	ck_assert_int_eq(orwrite16(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* FUA: a group flush */
	ck_assert_int_eq(read10(0, 8, false), SYNCGUARD_OK);
	for (size_t i = 0; i < 8 * BS; i++)
		ck_assert_uint_eq(back[i], 0xff);
	ck_assert_int_eq(orwrite16(CAP_BLOCKS - 1, 2, false),
			 SYNCGUARD_ERR_LBA_RANGE);
	ck_assert_int_eq(orwrite16(CAP_BLOCKS, 0, false), SYNCGUARD_ERR_LBA_RANGE);
	ck_assert_int_eq(orwrite16(0, 0, false), SYNCGUARD_OK);
	fx.fdatasync_errno = EIO;	/* its flush fails: never GOOD */
	assert_sense(orwrite16(0, 8, true), 0x03, 0x0c00);
}
END_TEST

START_TEST(test_exec_compare_and_write)
{
	uint8_t cdb[16] = { 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0 };
	uint8_t buf[2 * BS];
	struct syncguard_result r;

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fill(3);
	ck_assert_int_eq(write16(5, 1, false), SYNCGUARD_OK);
	memcpy(buf, data, BS);
	memset(buf + BS, 0x5a, BS);
	buf[17] ^= 1;					/* wrong expectation */
	r = run(cdb, 16, buf, sizeof(buf), NULL, 0);
	ck_assert_int_eq(r.reason, SYNCGUARD_ERR_MISCOMPARE);
	ck_assert(r.info_valid);
	ck_assert_uint_eq(r.info, 17);
	buf[17] ^= 1;
	ck_assert_int_eq(run(cdb, 16, buf, sizeof(buf), NULL, 0).reason,
			 SYNCGUARD_OK);
	ck_assert_int_eq(read10(5, 1, false), SYNCGUARD_OK);
	ck_assert_uint_eq(back[0], 0x5a);
	ck_assert_uint_eq(lun.stats->writes, 3);	/* counted as writes */
}
END_TEST

/* Readers of write_lock that hand it on to each other, so that it is
 * never free while they run (a steady write load on the workers): each
 * holds it until the other has taken it after it (acquired counts the
 * takes), or 50 ms have passed. */
static struct {
	pthread_mutex_t m;
	pthread_cond_t c;
	unsigned int acquired;
	bool stop;
} relay = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false };

static void *relay_reader(void *arg)
{
	struct timespec until;
	unsigned int mine;

	(void)arg;
	while (!__atomic_load_n(&relay.stop, __ATOMIC_SEQ_CST)) {
		pthread_rwlock_rdlock(&lun.write_lock);
		pthread_mutex_lock(&relay.m);
		mine = ++relay.acquired;
		pthread_cond_broadcast(&relay.c);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 50000000;
		if (until.tv_nsec >= 1000000000) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000;
		}
		while (relay.acquired == mine && !relay.stop &&
		       !pthread_cond_timedwait(&relay.c, &relay.m, &until))
			;
		pthread_mutex_unlock(&relay.m);
		pthread_rwlock_unlock(&lun.write_lock);
	}
	return NULL;
}

/* A switch to WCE=0 and COMPARE AND WRITE take write_lock exclusive
 * while the workers' writes keep taking it shared: the exclusive one
 * gets it (with readers let in ahead of a waiting writer it would wait
 * for as long as the load lasts, 20 s and more; this test then runs
 * into its timeout). */
START_TEST(test_exec_write_lock_lets_writer_in)
{
	pthread_t t[2];

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, relay_reader,
						NULL), 0);
	usleep(20000);			/* the relay runs */
	pthread_rwlock_wrlock(&lun.write_lock);
	__atomic_store_n(&relay.stop, true, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&relay.m);
	pthread_cond_broadcast(&relay.c);
	pthread_mutex_unlock(&relay.m);
	pthread_rwlock_unlock(&lun.write_lock);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
}
END_TEST

START_TEST(test_exec_short_data_in_and_out)
{
	uint8_t r10[10] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 2, 0 };
	uint8_t w10[10] = { 0x2a, 0, 0, 0, 0, 0, 0, 0, 2, 0 };
	struct syncguard_result r;

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fill(4);
	ck_assert_int_eq(write16(0, 2, false), SYNCGUARD_OK);
	/* EDTL 1000 < 1024: every byte that goes out is the medium's */
	memset(back, 0xee, sizeof(back));
	r = run(r10, 10, NULL, 0, back, 1000);
	ck_assert_int_eq(r.reason, SYNCGUARD_OK);
	ck_assert_uint_eq(r.in_done, 1000);
	ck_assert_mem_eq(back, data, 1000);
	/* Data-Out 1000 < 1024 ends inside block 1: refused, nothing
	 * written (a torn block, and page-cache I/O on an O_DIRECT LUN) */
	memcpy(back + 2 * BS, data, 2 * BS);
	fill(5);
	r = run(w10, 10, data, 1000, NULL, 0);
	ck_assert_int_eq(r.reason, SYNCGUARD_ERR_INVALID_IU);
	assert_sense(r.reason, 0x05, 0x0e03);
	ck_assert_int_eq(read10(0, 2, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, back + 2 * BS, 2 * BS);
	/* Data-Out of one whole block of two: that block is written */
	ck_assert_int_eq(run(w10, 10, data, BS, NULL, 0).reason, SYNCGUARD_OK);
	ck_assert_int_eq(read10(0, 2, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, data, BS);
	ck_assert_mem_eq(back + BS, back + 3 * BS, BS);
}
END_TEST

/* WRITE SAME(16) UNMAP with NUMBER OF BLOCKS 0 on a LUN of more than
 * 2^32 blocks unmaps to the very end (no 32-bit truncation). */
START_TEST(test_exec_write_same_unmap_huge_lun)
{
	struct syncguard_opts o = { .mode = SYNCGUARD_MODE_WRITE_BACK };
	uint64_t blocks = (1ull << 32) + 4096, far = (1ull << 32) + 100;
	uint8_t ws16[16] = { 0x93, 0x08 };
	char err[256];

	make_file(path, 0, false);
	ck_assert_int_eq(truncate(path, (off_t)(blocks * BS)), 0);
	ck_assert_int_eq(syncguard_lun_open(&lun, path, 9, &o, err,
					    sizeof(err)), 0);
	lun.thin = true;
	fill(7);
	ck_assert_int_eq(write16(far, 1, false), SYNCGUARD_OK);
	ck_assert_int_eq(run(ws16, 16, NULL, 0, NULL, 0).reason, SYNCGUARD_OK);
	memset(back, 0xee, BS);
	{
		uint8_t r16[16] = { 0x88, 0, 0, 0, 0, 1, 0, 0, 0, 100, 0, 0, 0, 1 };
		uint8_t zero[BS] = { 0 };

		ck_assert_int_eq(run(r16, 16, NULL, 0, back, BS).reason,
				 SYNCGUARD_OK);
		ck_assert_mem_eq(back, zero, BS);
	}
}
END_TEST

/* WRITE SAME(10) with UNMAP and a block that is not zeroes writes it
 * (SBC-4: the blocks read as if written; an unmapped one reads zeroes):
 * unmapping it would answer GOOD and read back zeroes.  A block of
 * zeroes still unmaps. */
START_TEST(test_exec_write_same_unmap_data)
{
	uint8_t ws10[10] = { 0x41, 0x08, 0, 0, 0, 8, 0, 0, 4, 0 };
	uint8_t zero[4 * BS] = { 0 };

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	lun.thin = true;
	fill(3);
	ck_assert_int_eq(run(ws10, 10, data, BS, NULL, 0).reason, SYNCGUARD_OK);
	ck_assert_int_eq(read10(8, 4, false), SYNCGUARD_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_mem_eq(back + i * BS, data, BS);
	ck_assert_int_eq(run(ws10, 10, zero, BS, NULL, 0).reason, SYNCGUARD_OK);
	ck_assert_int_eq(read10(8, 4, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, zero, 4 * BS);
}
END_TEST

/* UNMAP reads its PARAMETER LIST LENGTH: a descriptor in Data-Out past
 * it is not unmapped */
START_TEST(test_exec_unmap_parameter_list_length)
{
	uint8_t unmap[10] = { 0x42, 0, 0, 0, 0, 0, 0, 0, 24, 0 };
	uint8_t list[40] = { 0, 38, 0, 32 }, zero[BS] = { 0 };

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	lun.thin = true;
	fill(9);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	list[8 + 7] = 1, list[8 + 11] = 1;		/* LBA 1, 1 block */
	list[24 + 7] = 5, list[24 + 11] = 1;		/* LBA 5: past 24 */
	ck_assert_int_eq(run(unmap, 10, list, sizeof(list), NULL, 0).reason,
			 SYNCGUARD_OK);
	ck_assert_int_eq(read10(0, 8, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back + BS, zero, BS);
	ck_assert_mem_eq(back + 5 * BS, data + 5 * BS, BS);
}
END_TEST

static void other_flush_fails(void)
{
	syncguard_latch(&lun, EIO);
}

/* A flush that fails while a FUA write's RWF_DSYNC runs (another
 * command's, latched for good): the write's own sync succeeds, but a
 * device that fails a flush may drop what its cache held, this write's
 * data too, so it is not answered GOOD (the model can lose such a
 * write). */
START_TEST(test_exec_fua_with_failed_flush_meanwhile)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC);
	fill(4);
	fx.dsync_hook = other_flush_fails;
	ck_assert_int_eq(write16(0, 1, true), SYNCGUARD_ERR_WRITE);
	ck_assert_int_eq(fx.dsyncs, 1);
	ck_assert_int_eq(syncguard_lun_lost_meanwhile(&lun), -EIO);
}
END_TEST

/* ---- bad CDBs ---- */

START_TEST(test_exec_lba_out_of_range)
{
	uint8_t inq[6] = { 0x12, 0, 0, 0, 36, 0 };

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(write16(CAP_BLOCKS - 1, 2, false),
			 SYNCGUARD_ERR_LBA_RANGE);
	ck_assert_int_eq(write16(UINT64_MAX, 1, false), SYNCGUARD_ERR_LBA_RANGE);
	ck_assert_int_eq(write16(CAP_BLOCKS - 1, 1, false), SYNCGUARD_OK);
	ck_assert_int_eq(read10(CAP_BLOCKS, 0, false), SYNCGUARD_ERR_LBA_RANGE);
	ck_assert_int_eq(sync_cache10(CAP_BLOCKS - 4, 8),
			 SYNCGUARD_ERR_LBA_RANGE);
	ck_assert_int_eq(sync_cache10(CAP_BLOCKS - 4, 4), SYNCGUARD_OK);
	assert_sense(SYNCGUARD_ERR_LBA_RANGE, 0x05, 0x2100);
	ck_assert_int_eq(run(inq, 6, NULL, 0, NULL, 0).reason,
			 SYNCGUARD_ERR_INVALID_OPCODE);
	ck_assert_uint_eq(lun.stats->errors, 5);
}
END_TEST

/* A group flush vouches for every write before it, so it runs on the
 * descriptor opened with the LUN, never on one the pool opens later: a
 * new description does not see a writeback error another has already
 * reported, in the moment before that one latches it */
START_TEST(test_exec_group_flush_descriptor)
{
	int a, b;

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	a = syncguard_sync_fd_get(&lun);	/* the pool opens these */
	b = syncguard_sync_fd_get(&lun);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasync_fd, lun.group_fd);
	syncguard_sync_fd_put(&lun, a);
	syncguard_sync_fd_put(&lun, b);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasync_fd, lun.group_fd);
}
END_TEST

/* ---- faults: never GOOD for a failed write or flush ---- */

START_TEST(test_exec_write_eio)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fx.pwrite_errno = EIO;
	assert_sense(write16(0, 8, false), 0x03, 0x0c00);
	assert_sense(write16(0, 8, true), 0x03, 0x0c00);
}
END_TEST

START_TEST(test_exec_read_eio)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fx.pread_errno = EIO;
	assert_sense(read10(0, 8, false), 0x03, 0x1100);
}
END_TEST

START_TEST(test_exec_enospc)
{
	int fsyncs, per_write;

	/* FUA writes by RWF_DSYNC, whose ENOSPC may be its sync's */
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC);
	lun.enospc_soft = true;		/* as on ext4 (the fixture's may not be) */
	fx.pwrite_errno = ENOSPC;
	assert_sense(write16(0, 8, false), 0x07, 0x2707);
	fx.pwrite_errno = 0;	/* a refused plain write lost nothing */
	fsyncs = fx.fdatasyncs;
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	per_write = fx.fdatasyncs - fsyncs;
	fx.pwrite_errno = ENOSPC;	/* a durable one may have: latched */
	assert_sense(write16(0, 8, true), 0x07, 0x2707);
	ck_assert_uint_eq(lun.stats->latched, ENOSPC);
	ck_assert_uint_eq(lun.stats->latched_soft, 1);
	/* space again, and the witness (lun->fd) reports no lost write:
	 * the write was only refused, and durable commands go on */
	fx.pwrite_errno = 0;
	fsyncs = fx.fdatasyncs;
	ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.fdatasyncs, fsyncs + per_write + 1); /* + recheck */
	ck_assert_uint_eq(lun.stats->latched, 0);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	/* a SYNCHRONIZE CACHE rechecks too */
	fx.pwrite_errno = ENOSPC;
	assert_sense(write16(0, 8, true), 0x07, 0x2707);
	fx.pwrite_errno = 0;
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	ck_assert_uint_eq(lun.stats->latched, 0);
}
END_TEST

/* Where an RWF_DSYNC write's ENOSPC may be a flush error the file system
 * had from a server or a device (FUSE, network file systems: core/policy.c),
 * it latches for good, and no recheck clears it (after one, SYNCHRONIZE
 * CACHE would say GOOD for writes a FUSE model's failed flush dropped) */
START_TEST(test_exec_enospc_elsewhere_latches)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_WRITE_SYNC_DSYNC);
	lun.enospc_soft = false;
	fx.pwrite_errno = ENOSPC;
	assert_sense(write16(0, 8, false), 0x07, 0x2707);
	ck_assert_uint_eq(lun.stats->latched_soft, 0);
	fx.pwrite_errno = 0;
	assert_sense(write16(0, 8, false), 0x07, 0x2707);
	assert_sense(sync_cache10(0, 0), 0x07, 0x2707);
}
END_TEST

/* A write-through LUN whose write the file system refused (ENOSPC):
 * latched soft, the space back */
static void refused_write_latches_soft(void)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_WRITE_SYNC_DSYNC);
	lun.enospc_soft = true;		/* as on ext4 */
	fx.pwrite_errno = ENOSPC;
	assert_sense(write16(0, 8, false), 0x07, 0x2707);
	ck_assert_uint_eq(lun.stats->latched_soft, 1);
	fx.pwrite_errno = 0;
}

/* A LUN closed with a soft latch still gets its final flush (on
 * write-back: what it cached may be volatile), on the group flushes'
 * descriptor, which also reports a writeback error the latch may stand
 * for; it is not skipped as for a latch for good */
START_TEST(test_exec_close_flushes_with_soft_latch)
{
	int fd;

	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC);
	lun.enospc_soft = true;
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	fx.pwrite_errno = ENOSPC;
	assert_sense(write16(8, 8, true), 0x07, 0x2707);
	fx.pwrite_errno = 0;
	ck_assert_uint_eq(lun.stats->latched_soft, 1);
	fd = syncguard_lun_close_deferred(&lun);
	ck_assert_int_ge(fd, 0);
	close(fd);
}
END_TEST

/* Another write's ENOSPC while a recheck's fdatasync runs: its sync may
 * have taken a writeback error the witness had already looked past, so
 * that recheck must not clear the new latch; it checks again */
static void soft_latch_now(void)
{
	syncguard_latch_write(&lun, ENOSPC);
}

START_TEST(test_exec_enospc_recheck_race)
{
	int fsyncs;

	refused_write_latches_soft();
	fx.fdatasync_hook = soft_latch_now;
	fsyncs = fx.fdatasyncs;
	ck_assert_int_eq(syncguard_lun_recheck(&lun), 0);
	ck_assert_int_eq(fx.fdatasyncs, fsyncs + 2);
	ck_assert_uint_eq(lun.stats->latched, 0);
}
END_TEST

/* But where the witness reports an error, the ENOSPC had been a sync's
 * (a writeback failure, maybe of other writes): latched for good, with
 * the witness's errno, as a failed flush */
START_TEST(test_exec_enospc_witness_error_latches)
{
	refused_write_latches_soft();
	fx.fdatasync_errno = EIO;
	assert_sense(write16(0, 8, false), 0x03, 0x0c00);
	fx.fdatasync_errno = 0;		/* the kernel would now say "fine" */
	assert_sense(write16(0, 8, false), 0x03, 0x0c00);
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	ck_assert_uint_eq(lun.stats->latched, EIO);
	ck_assert_uint_eq(lun.stats->latched_soft, 0);
}
END_TEST

/* A file that refuses writes (immutable, a read-only remount): DATA
 * PROTECT / WRITE PROTECTED, not MEDIUM ERROR (as after chattr +i) */
START_TEST(test_exec_write_protected)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fx.pwrite_errno = EPERM;
	assert_sense(write16(0, 8, false), 0x07, 0x2700);
	fx.pwrite_errno = EROFS;
	assert_sense(write16(0, 8, false), 0x07, 0x2700);
}
END_TEST

START_TEST(test_exec_flush_error_latches)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	fx.fdatasync_errno = EIO;
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	fx.fdatasync_errno = 0;		/* the kernel would now say "fine" */
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	assert_sense(write16(0, 8, true), 0x03, 0x0c00);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* never asked again */
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);	/* promises
								 * nothing */
	ck_assert_int_eq(read10(0, 8, false), SYNCGUARD_OK);
}
END_TEST

START_TEST(test_exec_dsync_failure_latches_all_modes)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_WRITE_SYNC_DSYNC);
	fx.pwrite_errno = EIO;
	assert_sense(write16(0, 8, false), 0x03, 0x0c00);
	fx.pwrite_errno = 0;
	assert_sense(write16(0, 8, false), 0x03, 0x0c00);
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
}
END_TEST

START_TEST(test_exec_eintr_and_short_writes_complete)
{
	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	fill(5);
	fx.pwrite_eintr = 2;
	ck_assert_int_eq(write16(0, 16, true), SYNCGUARD_OK);
	ck_assert_int_eq(fx.pwrites, 3);
	fill(6);
	fx.pwrite_short = true;
	ck_assert_int_eq(write16(0, 16, false), SYNCGUARD_OK);
	ck_assert_int_eq(fx.pwrites, 5);	/* half, then the rest */
	ck_assert_int_eq(read10(0, 16, false), SYNCGUARD_OK);
	ck_assert_mem_eq(back, data, 16 * BS);
}
END_TEST

/* An RWF_DSYNC write's EOPNOTSUPP is its sync's (Linux takes the flag on
 * every file; a FUSE daemon passes its FSYNC answer through): the write
 * fails and the LUN latches.  Taken for "no RWF_DSYNC here" and written
 * again with a flush after it, the write was answered GOOD over a cache
 * the failed sync may have dropped. */
START_TEST(test_exec_dsync_eopnotsupp_latches)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_THROUGH, SYNCGUARD_WRITE_SYNC_DSYNC);
	fill(8);
	fx.dsync_errno = EOPNOTSUPP;
	assert_sense(write16(0, 8, false), 0x03, 0x0c00);
	ck_assert_int_eq(fx.fdatasyncs, 0);	/* not written again */
	ck_assert_int_eq(syncguard_lun_latched(&lun), EOPNOTSUPP);
	fx.dsync_errno = 0;
	assert_sense(write16(8, 8, false), 0x03, 0x0c00);
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
}
END_TEST

/* ---- latches that outlive the LUN (core/poison.c) ---- */

static ino_t state_dir_ino;
static int state_dir_synced;

/* fsync, counting the syncs of the directory whose inode is
 * state_dir_ino */
static int counting_fsync(int fd)
{
	struct stat st;

	if (!fstat(fd, &st) && S_ISDIR(st.st_mode) &&
	    st.st_ino == state_dir_ino)
		state_dir_synced++;
	return fsync(fd);
}

/* A record is made durable with the directories it is in: the state
 * directory is synced too when latched/ is there already (a thread
 * that finds it made may not count on the sync of the one that made
 * it), and the record's write reports a failure of either. */
START_TEST(test_poison_record_dirs_synced)
{
	char state[300], latched[320];
	struct stat st;

	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(latched, sizeof(latched), "%s/latched", state);
	ck_assert_int_eq(mkdir(state, 0700), 0);
	ck_assert_int_eq(mkdir(latched, 0700), 0);
	ck_assert_int_eq(stat(state, &st), 0);
	state_dir_ino = st.st_ino;
	syncguard_sys.fsync = counting_fsync;
	ck_assert_int_eq(syncguard_poison_write(state, "store-a", "/x", EIO),
			 0);
	syncguard_sys.fsync = fsync;
	ck_assert_int_ge(state_dir_synced, 1);
	ck_assert_int_eq(syncguard_poison_clear(state, "store-a"), 0);
	rmdir(latched);
	rmdir(state);
}
END_TEST

/* The store's identity survives a reopen, not its reuse: another file,
 * or the same name for a new inode, is another store */
START_TEST(test_poison_store_id)
{
	char a[256], b[256], c[256], p2[80];
	int fd;

	make_file(path, 4096, true);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(syncguard_store_id(fd, a, sizeof(a)), 0);
	close(fd);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(syncguard_store_id(fd, b, sizeof(b)), 0);
	close(fd);
	ck_assert_str_eq(a, b);
	snprintf(p2, sizeof(p2), "%s/other.img", dir);
	make_file(p2, 4096, true);
	fd = open(p2, O_RDONLY);
	ck_assert_int_eq(syncguard_store_id(fd, c, sizeof(c)), 0);
	close(fd);
	ck_assert_str_ne(a, c);
	unlink(path);		/* the name again, a new inode */
	make_file(path, 4096, true);
	fd = open(path, O_RDONLY);
	ck_assert_int_eq(syncguard_store_id(fd, b, sizeof(b)), 0);
	close(fd);
	ck_assert_str_ne(a, b);
	unlink(p2);
}
END_TEST

/* Reopen @path as LUN @opts (its file as it is): the errno it starts
 * latched with */
static int reopen_latched(const char *bsopts)
{
	struct syncguard_opts o;
	char err[256];

	ck_assert_int_eq(syncguard_opts_parse(bsopts, &o, err, 256), 0);
	ck_assert_msg(syncguard_lun_open(&lun, path, 9, &o, err, 256) == 0,
		      "%s", err);
	if (syncguard_mode_wce(o.mode))	/* as the glue does at open */
		syncguard_lun_set_wce(&lun, true);
	return syncguard_lun_latched(&lun);
}

/* A failed flush latches the LUN and is recorded: the store's next LUN
 * starts latched (its flush would succeed: the kernel reports a writeback
 * error once), until the record is cleared */
START_TEST(test_poison_latch_recorded)
{
	const char *dir_state = syncguard_state_dir(NULL);

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	fx.fdatasync_errno = EIO;
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	fx.fdatasync_errno = 0;
	syncguard_lun_close(&lun);
	ck_assert_int_eq(reopen_latched("mode=write-back"), EIO);
	ck_assert_ptr_nonnull(strstr(lun.poison, "errno 5"));
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	ck_assert_int_eq(fx.fdatasyncs, 1);	/* never asked again */
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, lun.store_id), 0);
	ck_assert_int_eq(reopen_latched("mode=write-back"), 0);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
}
END_TEST

/* So is a failed final flush (delete, path=, shutdown), and a soft latch
 * (a refused write, which lost nothing) is not */
START_TEST(test_poison_final_flush_recorded)
{
	open_lun_ws(SYNCGUARD_MODE_WRITE_BACK, SYNCGUARD_WRITE_SYNC_DSYNC);
	lun.enospc_soft = true;
	fx.pwrite_errno = ENOSPC;
	assert_sense(write16(0, 8, true), 0x07, 0x2707);
	fx.pwrite_errno = 0;
	ck_assert_int_eq(syncguard_lun_close(&lun), 0);
	ck_assert_int_eq(reopen_latched("mode=write-back"), 0);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	fx.fdatasync_errno = EIO;
	ck_assert_int_eq(syncguard_lun_close(&lun), -EIO);
	fx.fdatasync_errno = 0;
	ck_assert_int_eq(reopen_latched("mode=write-back"), EIO);
}
END_TEST

/* A LUN created on a store whose last LUN's final flush still runs
 * (on a thread of its own, after that LUN let go of the store) waits for
 * that flush's outcome before its first durable command: latched if it
 * failed (on FUSE the failure reaches that flush alone, and the new
 * LUN's own flush would succeed over the lost writes), clean if not */
START_TEST(test_poison_final_flush_pending)
{
	static struct syncguard_lun next;
	const char *dir_state = syncguard_state_dir(NULL);
	char id[256];
	int fd;

	for (int fails = 0; fails < 2; fails++) {
		open_lun(SYNCGUARD_MODE_WRITE_BACK);
		ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
		snprintf(id, sizeof(id), "%s", lun.store_id);
		fd = syncguard_lun_close_deferred(&lun);	/* the old LUN */
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(reopen_latched("mode=write-back"), EINPROGRESS);
		ck_assert(syncguard_lun_latched_soft(&lun));
		next = lun;	/* the new LUN: run() works on lun */
		close(fd);	/* its flush "ran" ... and ended so: */
		ck_assert_int_eq(syncguard_final_flush_end(dir_state, id,
							   lun.final_seq, path,
							   fails ? EIO : 0), 0);
		if (fails) {
			assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
			ck_assert_int_eq(syncguard_lun_latched(&lun), EIO);
			ck_assert_int_eq(syncguard_poison_clear(dir_state, id), 0);
		} else {
			ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
			ck_assert_int_eq(syncguard_lun_latched(&lun), 0);
		}
		syncguard_lun_close(&lun);
	}
	(void)next;
}
END_TEST

/*
 * However many stores have a final flush on its way, each is marked: a
 * LUN re-created on the last of 100 waits for its flush as on the first
 * (a fixed table of marks left the stores past it unmarked).  And a
 * failed flush of a store that is not a final flush (plp's fsync at
 * open: syncguard_store_failed) records the failure without taking off
 * another LUN's mark.
 */
START_TEST(test_poison_marks_many_stores)
{
	const char *dir_state = syncguard_state_dir(NULL);
	unsigned int seqs[100];
	char id[64];

	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "test-marks-%d", i);
		ck_assert_int_eq(syncguard_final_flush_begin(dir_state, id,
							     &seqs[i]), 0);
	}
	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "test-marks-%d", i);
		ck_assert_int_eq(syncguard_store_marked(id, false), EINPROGRESS);
	}
	ck_assert_int_eq(syncguard_store_failed(dir_state, "test-marks-99",
						path, EIO), 0);
	ck_assert_int_eq(syncguard_store_marked("test-marks-99", false),
			 EINPROGRESS);	/* its final flush still runs */
	ck_assert_int_gt(syncguard_poison_read(dir_state, "test-marks-99", id,
					       sizeof(id)), 0);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, "test-marks-99"), 0);
	for (int i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "test-marks-%d", i);
		ck_assert_int_eq(syncguard_final_flush_end(dir_state, id,
							   seqs[i], path, 0), 0);
		ck_assert_int_eq(syncguard_store_marked(id, false), 0);
	}
}
END_TEST

/* The markers of final flushes of store @id in @dir (core/poison.c) */
static int markers_in(const char *dir_state, const char *id)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "exit $(ls -A '%s/latched' 2>/dev/null | "
		 "grep -c '^\\.%s\\.flush-')", dir_state, id);
	return WEXITSTATUS(system(cmd));
}

/* Two final flushes of one store in one process may overlap, each with
 * its LUN's state directory: each takes its own marker away (the last to
 * end took only its own, and the other stayed: another tgtd's LUN waited
 * for a flush that had ended) */
START_TEST(test_poison_overlapping_final_flushes)
{
	const char *dir_state = syncguard_state_dir(NULL);
	unsigned int a, b;
	char other[200];

	ck_assert_ptr_nonnull(realpath(dir, other));
	strncat(other, "/states", sizeof(other) - strlen(other) - 1);
	ck_assert_int_eq(syncguard_final_flush_begin(dir_state, "test-two",
						     &a), 0);
	ck_assert_int_eq(syncguard_final_flush_begin(other, "test-two", &b), 0);
	ck_assert_int_eq(markers_in(dir_state, "test-two"), 1);
	ck_assert_int_eq(markers_in(other, "test-two"), 1);
	ck_assert_int_eq(syncguard_final_flush_end(other, "test-two", b, path,
						   0), 0);
	ck_assert_int_eq(markers_in(other, "test-two"), 0);
	ck_assert_int_eq(syncguard_store_marked("test-two", false),
			 EINPROGRESS);
	ck_assert_int_eq(syncguard_final_flush_end(dir_state, "test-two", a,
						   path, 0), 0);
	ck_assert_int_eq(markers_in(dir_state, "test-two"), 0);
	ck_assert_int_eq(syncguard_store_marked("test-two", false), 0);
}
END_TEST

/* A final flush that ends while tgtd has no descriptor to spare still
 * takes its marker away (the marker's name wanted /proc/self/stat read
 * again, and the marker stayed: another tgtd's LUN waited for a flush
 * that had ended, as long as this one ran) */
START_TEST(test_poison_marker_without_descriptors)
{
	const char *dir_state = syncguard_state_dir(NULL);
	struct rlimit lim, few;
	int fd, taken[64], n = 0;
	unsigned int seq;

	ck_assert_int_eq(syncguard_final_flush_begin(dir_state, "test-nofd",
						     &seq), 0);
	ck_assert_int_eq(markers_in(dir_state, "test-nofd"), 1);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &lim), 0);
	few = lim;
	few.rlim_cur = 64;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &few), 0);
	while (n < 64 && (fd = open("/dev/null", O_RDONLY)) >= 0)
		taken[n++] = fd;	/* every descriptor taken */
	ck_assert_int_lt(n, 64);
	ck_assert_int_eq(errno, EMFILE);
	ck_assert_int_eq(syncguard_final_flush_end(dir_state, "test-nofd", seq,
						   path, 0), 0);
	while (n)
		close(taken[--n]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	ck_assert_int_eq(markers_in(dir_state, "test-nofd"), 0);
}
END_TEST

/* Store @id's @marker reads as a final flush that stopped on its way
 * (EIO), and --clear-latch takes it */
static void assert_stopped_marker(const char *dir_state, const char *id,
				  const char *marker)
{
	char text[512];

	ck_assert_int_eq(syncguard_store_record(dir_state, id, text,
						sizeof(text), NULL, 0), EIO);
	ck_assert_ptr_nonnull(strstr(text, "outcome is unknown"));
	ck_assert_int_eq(syncguard_poison_clear(dir_state, id), 0);
	ck_assert_int_ne(access(marker, F_OK), 0);
}

/* What other processes read of markers this one left: a final flush
 * that failed and whose record could not be written latches them (its
 * marker had gone with it, and another tgtd's waiting LUN answered GOOD),
 * and so does a marker from before this boot, whatever process its pid
 * and start time name now (one naming this process was skipped as its
 * own) */
START_TEST(test_poison_markers_left)
{
	const char *dir_state = syncguard_state_dir(NULL);
	struct timespec old[2] = { { 0, 0 }, { 0, 0 } };
	char rec[600], marker[600], text[512];
	unsigned int seq;
	int fd;

	ck_assert_int_eq(syncguard_final_flush_begin(dir_state, "test-left",
						     &seq), 0);
	snprintf(rec, sizeof(rec), "%s/latched/test-left", dir_state);
	ck_assert_int_eq(mkdir(rec, 0700), 0);	/* no record can go there */
	ck_assert_int_ne(syncguard_final_flush_end(dir_state, "test-left", seq,
						   path, EIO), 0);
	ck_assert_int_eq(rmdir(rec), 0);
	ck_assert_int_eq(syncguard_store_record(dir_state, "test-left", text,
						sizeof(text), NULL, 0), EIO);
	ck_assert_ptr_nonnull(strstr(text, "could not be written"));
	ck_assert_int_eq(syncguard_poison_clear(dir_state, "test-left"), 0);
	ck_assert_int_eq(syncguard_store_record(dir_state, "test-left", text,
						sizeof(text), NULL, 0), 0);
	/* this process's name, from before this boot */
	ck_assert_int_eq(syncguard_flush_marker(dir_state, "test-left",
						(long)getpid(), 7, marker,
						sizeof(marker)), 0);
	ck_assert_int_ge(fd = open(marker, O_WRONLY | O_CREAT, 0600), 0);
	ck_assert_int_eq(futimens(fd, old), 0);
	close(fd);
	assert_stopped_marker(dir_state, "test-left", marker);
}
END_TEST

/* A final flush that failed, whose record cannot be written and whose
 * marker cannot be renamed ".failed-" either (a directory in the way;
 * for real, a full state directory): the marker stays, dated 1970, so
 * that another process reads a flush that stopped on its way (EIO) at
 * once, and --clear-latch takes it (it was removed, and nothing was
 * left of the failure for another tgtd) */
START_TEST(test_poison_marker_kept_unrenamed)
{
	const char *dir_state = syncguard_state_dir(NULL);
	char rec[600], marker[600], failed[600], *k;
	unsigned int seq;
	struct stat st;

	ck_assert_int_eq(syncguard_final_flush_begin(dir_state, "test-keep",
						     &seq), 0);
	ck_assert_int_eq(syncguard_flush_marker(dir_state, "test-keep",
						(long)getpid(), seq, marker,
						sizeof(marker)), 0);
	snprintf(failed, sizeof(failed), "%s", marker);
	ck_assert_ptr_nonnull(k = strstr(failed, ".flush-"));
	snprintf(k, sizeof(failed) - (size_t)(k - failed), ".failed-%s",
		 strstr(marker, ".flush-") + 7);
	snprintf(rec, sizeof(rec), "%s/latched/test-keep", dir_state);
	ck_assert_int_eq(mkdir(rec, 0700), 0);	/* no record can go there */
	ck_assert_int_eq(mkdir(failed, 0700), 0);	/* nor the marker */
	ck_assert_int_ne(syncguard_final_flush_end(dir_state, "test-keep", seq,
						   path, EIO), 0);
	ck_assert_msg(stat(marker, &st) == 0, "%s removed", marker);
	ck_assert_int_eq(st.st_mtime, 0);
	ck_assert_int_eq(syncguard_store_marked("test-keep", false), EIO);
	ck_assert_int_eq(rmdir(rec), 0);
	ck_assert_int_eq(rmdir(failed), 0);
	assert_stopped_marker(dir_state, "test-keep", marker);
}
END_TEST

/* The store id of the device model's disk mounted at @mnt (made, then
 * unmounted) into @id (256 bytes) */
static void model_store_id(const char *mnt, const char *img, char *id)
{
	char cmd[1400], file[600];
	int fd;

	snprintf(file, sizeof(file), "%s/disk.img", mnt);
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s' && tools/syncguard-devmodel "
		 "--image '%s' '%s' && for i in $(seq 100); do [ -e '%s' ] && "
		 "exit 0; sleep 0.02; done; exit 1", mnt, img, mnt, file);
	ck_assert_int_eq(system(cmd), 0);
	fd = open(file, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(syncguard_store_id(fd, id, 256), 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "fusermount3 -u '%s'", mnt);
	ck_assert_int_eq(system(cmd), 0);
}

/* On a file system without a UUID or fsid (FUSE: its device number is
 * handed out afresh at every mount) the store is its path: the same
 * after a remount, as the device model is mounted again */
START_TEST(test_poison_fuse_identity)
{
	char mnt[128], img[128], a[256], b[256];

	snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
	snprintf(img, sizeof(img), "%s/model.img", dir);
	make_file(img, LUN_BYTES, true);
	model_store_id(mnt, img, a);
	model_store_id(mnt, img, b);
	ck_assert_msg(!strncmp(a, "path", 4), "FUSE store id %s", a);
	ck_assert_str_eq(a, b);
	unlink(img);
	rmdir(mnt);
}
END_TEST

/* A FUSE store is known by its path: two paths whose names read alike
 * ("m 1" and "m_1", every character outside [A-Za-z0-9._-] being '_' in
 * a record's name) are two stores, and a path of over 255 characters
 * still has an id a record can be named by (it had none, and its
 * latches went unrecorded) */
START_TEST(test_poison_path_ids)
{
	char img[128], mnt[700], a[256], b[256], c[256], deep[600];
	const char *dir_state = syncguard_state_dir(NULL);

	snprintf(img, sizeof(img), "%s/model.img", dir);
	make_file(img, LUN_BYTES, true);
	snprintf(mnt, sizeof(mnt), "%s/m 1", dir);
	model_store_id(mnt, img, a);
	rmdir(mnt);
	snprintf(mnt, sizeof(mnt), "%s/m_1", dir);
	model_store_id(mnt, img, b);
	rmdir(mnt);
	ck_assert_str_ne(a, b);
	snprintf(deep, sizeof(deep), "%s/%0250d", dir, 0);
	snprintf(mnt, sizeof(mnt), "%s/mnt", deep);
	model_store_id(mnt, img, c);
	rmdir(mnt);
	rmdir(deep);
	ck_assert_uint_le(strlen(c), 202);
	ck_assert_int_eq(syncguard_poison_write(dir_state, c, mnt, EIO), 0);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, c), 0);
	ck_assert_int_eq(syncguard_flush_marker(dir_state, c, (long)getpid(),
						UINT_MAX, deep, sizeof(deep)), 0);
	unlink(img);
}
END_TEST

/* A record is written under a name no store's id has: writing store A's
 * replaced store B's where B's id was A's and ".tmp" */
START_TEST(test_poison_records_apart)
{
	const char *dir_state = syncguard_state_dir(NULL);
	char text[512];

	ck_assert_int_eq(syncguard_poison_write(dir_state, "test-apart.tmp",
						path, EIO), 0);
	ck_assert_int_eq(syncguard_poison_write(dir_state, "test-apart", path,
						ENOSPC), 0);
	ck_assert_int_eq(syncguard_poison_read(dir_state, "test-apart.tmp",
					       text, sizeof(text)), EIO);
	ck_assert_int_eq(syncguard_poison_read(dir_state, "test-apart", text,
					       sizeof(text)), ENOSPC);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, "test-apart.tmp"), 0);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, "test-apart"), 0);
}
END_TEST

/* A record left unfinished (tgtd killed while it wrote one: its ".tmp"
 * alone) latches the store's next LUN; clearing it removes it */
START_TEST(test_poison_unfinished_record)
{
	const char *dir_state = syncguard_state_dir(NULL);
	char tmp[600];
	int fd;

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_write(dir_state, lun.store_id, path,
						EIO), 0);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, lun.store_id), 0);
	snprintf(tmp, sizeof(tmp), "%s/latched/.%s.tmp", dir_state,
		 lun.store_id);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(reopen_latched("mode=write-back"), EIO);
	ck_assert_ptr_nonnull(strstr(lun.poison, "unfinished"));
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, lun.store_id), 0);
	ck_assert_int_ne(access(tmp, F_OK), 0);
	ck_assert_int_eq(reopen_latched("mode=write-back"), 0);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
}
END_TEST

/* the other tgtd of test_poison_other_final_flush: its final flush
 * fails after 200 ms, is recorded, and its marker goes */
static char other_marker[600], other_id[256];
static void *other_tgtd_flush_fails(void *arg)
{
	(void)arg;
	usleep(200000);
	syncguard_poison_write(syncguard_state_dir(NULL), other_id, path, EIO);
	unlink(other_marker);
	return NULL;
}

/* Another process's final flush of the store (its marker in the shared
 * state directory: another tgtd, whose in-process mark this one cannot
 * see): a LUN created meanwhile waits for its outcome before its first
 * durable command, and latches when it failed; a marker left by a
 * process that stopped on the way latches (the outcome is unknown),
 * until it is cleared */
START_TEST(test_poison_other_final_flush)
{
	const char *dir_state = syncguard_state_dir(NULL);
	siginfo_t gone;
	pthread_t t;
	pid_t child;
	int fd;

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	syncguard_lun_close(&lun);
	snprintf(other_id, sizeof(other_id), "%s", lun.store_id);
	ck_assert_int_ge(child = fork(), 0);
	if (!child) {		/* the other tgtd, alive until killed */
		pause();
		_exit(0);
	}
	ck_assert_int_eq(syncguard_flush_marker(dir_state, other_id, child, 1,
						other_marker,
						sizeof(other_marker)), 0);
	ck_assert_int_ge(fd = open(other_marker, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	ck_assert_int_eq(reopen_latched("mode=write-back"), EINPROGRESS);
	ck_assert(syncguard_lun_latched_soft(&lun));
	ck_assert_int_eq(pthread_create(&t, NULL, other_tgtd_flush_fails, NULL), 0);
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);	/* waited */
	pthread_join(t, NULL);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, other_id), 0);
	/* the other tgtd killed during its final flush: its marker stays
	 * (a zombie that its parent has not reaped yet is gone too) */
	kill(child, SIGKILL);
	ck_assert_int_eq(waitid(P_PID, (id_t)child, &gone, WEXITED | WNOWAIT),
			 0);
	ck_assert_int_ge(fd = open(other_marker, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	ck_assert_int_eq(reopen_latched("mode=write-back"), EIO);
	ck_assert_ptr_nonnull(strstr(lun.poison, "outcome is unknown"));
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_clear(dir_state, other_id), 0);
	ck_assert_int_ne(access(other_marker, F_OK), 0);
	ck_assert_int_eq(reopen_latched("mode=write-back"), 0);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	waitpid(child, NULL, 0);
}
END_TEST

/* test-old's entries in @dir taken over by test-new, whose record then
 * reads EIO, and test-old has none */
static void adopt_old(const char *dir)
{
	char text[512];

	ck_assert_int_eq(syncguard_poison_adopt(dir, "test-old", "test-new",
						false),
			 0);
	ck_assert_int_eq(syncguard_poison_read(dir, "test-new", text,
					       sizeof(text)), EIO);
	ck_assert_int_eq(syncguard_poison_read(dir, "test-old", text,
					       sizeof(text)), 0);
}

/* Taking a store's former identity over moves its record and its final
 * flushes' markers (a failed one's is all that is left of a record that
 * could not be written); where the store has its own record, that one
 * stays and the former's goes */
START_TEST(test_poison_adopt)
{
	char p[PATH_MAX], other[200];
	int fd;

	ck_assert_ptr_nonnull(realpath(dir, other));
	strncat(other, "/adopt", sizeof(other) - strlen(other) - 1);
	static const char *const mine[] = { ".test-old.failed-1-2-3",
					    ".test-old.tmp" };
	/* other stores' entries, however alike */
	static const char *const theirs[] = { "test-old2", ".test-old2.tmp",
					      ".test-old.x.failed-1-2-3",
					      ".test-old.failed-1-2" };

	ck_assert_int_eq(syncguard_poison_write(other, "test-old", "/x", EIO),
			 0);
	for (size_t i = 0; i < 6; i++) {
		snprintf(p, sizeof(p), "%s/latched/%s", other,
			 i < 2 ? mine[i] : theirs[i - 2]);
		ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT, 0600), 0);
		close(fd);
	}
	adopt_old(other);
	snprintf(p, sizeof(p), "%s/latched/.test-new.failed-1-2-3", other);
	ck_assert_int_eq(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/latched/.test-new.tmp", other);
	ck_assert_int_eq(access(p, F_OK), 0);
	for (size_t i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/latched/%s", other, theirs[i]);
		ck_assert_msg(access(p, F_OK) == 0, "%s taken", theirs[i]);
	}
	ck_assert_int_eq(syncguard_poison_write(other, "test-old", "/x",
						ENOSPC), 0);
	adopt_old(other);
	ck_assert_int_eq(syncguard_poison_adopt(other, "test-none", "test-new",
						false),
			 0);
	/* a list of former names: each taken over; the store's own name
	 * in it is passed over (renamed onto itself, it would be removed) */
	ck_assert_int_eq(syncguard_poison_write(other, "test-b", "/x", EIO),
			 0);
	ck_assert_int_eq(syncguard_poison_adopt(other, "test-a\ntest-b\n"
						"test-new", "test-new", false),
			 0);
	ck_assert_int_eq(syncguard_poison_read(other, "test-new", p,
					       sizeof(p)), EIO);
	ck_assert_int_eq(syncguard_poison_read(other, "test-b", p, sizeof(p)),
			 0);
	ck_assert_int_eq(syncguard_poison_clear(other, "test-new"), 0);
	ck_assert_int_eq(syncguard_poison_write(other, "test-b", "/x", EIO),
			 0);
	ck_assert_int_eq(syncguard_poison_adopt(other, "test-a\ntest-b",
						"test-new", false), 0);
	ck_assert_int_eq(syncguard_poison_read(other, "test-new", p,
					       sizeof(p)), EIO);
	snprintf(p, sizeof(p), "rm -rf '%s'", other);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

/* A record under a device number (blk-M.m) among a store's former
 * identities is not taken over at open (the number may have been
 * another store's then, whose latch would be lost), but found, with
 * what it says: it latches the LUN where it lies.  So is a final
 * flush's marker alone, and a partition's (partN-blk-M.m).
 * syncguard-stat --clear-latch takes it over (numbers too), and clears
 * it. */
START_TEST(test_poison_device_number_held)
{
	const char *formers = "test-x\nblk-259.3";
	char held[300], name[64] = "", text[400];
	int fd;

	snprintf(held, sizeof(held), "%s/held", dir);
	ck_assert_int_eq(syncguard_poison_write(held, "blk-259.3", "/x", EIO),
			 0);
	ck_assert_int_eq(syncguard_poison_adopt(held, formers, "part2-f",
						false), 0);
	ck_assert_int_eq(syncguard_poison_read(held, "blk-259.3", text,
					       sizeof(text)), EIO);
	ck_assert_int_eq(syncguard_poison_read(held, "part2-f", text,
					       sizeof(text)), 0);
	ck_assert_int_eq(syncguard_poison_held(held, formers, name,
					       sizeof(name), text,
					       sizeof(text)), 1);
	ck_assert_str_eq(name, "blk-259.3");
	ck_assert_msg(strstr(text, "path /x"), "%s", text);
	ck_assert_int_eq(syncguard_poison_adopt(held, formers, "part2-f",
						true), 0);
	ck_assert_int_eq(syncguard_poison_read(held, "part2-f", text,
					       sizeof(text)), EIO);
	ck_assert_int_eq(syncguard_poison_held(held, formers, name,
					       sizeof(name), text,
					       sizeof(text)), 0);
	/* a failed final flush's marker alone, under a partition's number
	 * name: held too, and not taken over */
	snprintf(text, sizeof(text), "%s/latched/.part1-blk-9.0.failed-1-2-3",
		 held);
	ck_assert_int_ge(fd = open(text, O_WRONLY | O_CREAT, 0600), 0);
	close(fd);
	ck_assert_int_eq(syncguard_poison_adopt(held, "part1-blk-9.0",
						"part1-g", false), 0);
	ck_assert_int_eq(syncguard_poison_held(held, "part1-blk-9.0", name,
					       sizeof(name), text,
					       sizeof(text)), 1);
	ck_assert_str_eq(name, "part1-blk-9.0");
	snprintf(text, sizeof(text), "rm -rf '%s'", held);
	ck_assert_int_eq(system(text), 0);
}
END_TEST

/* bsopts state_dir keeps a LUN's records apart from the default's; a
 * LUN with another state directory, in the process that wrote a record,
 * starts latched by it all the same, until it is cleared where it is */
START_TEST(test_poison_state_dir)
{
	char opts[300], other[200], text[512];
	const char *dir_state = syncguard_state_dir(NULL);

	make_file(path, LUN_BYTES, true);
	ck_assert_ptr_nonnull(realpath(dir, other));
	strncat(other, "/states", sizeof(other) - strlen(other) - 1);
	ck_assert_int_eq(mkdir(other, 0700), 0);
	snprintf(opts, sizeof(opts), "mode=write-back;state_dir=%s", other);
	ck_assert_int_eq(reopen_latched(opts), 0);
	ck_assert_int_eq(write16(0, 8, false), SYNCGUARD_OK);
	fx.fdatasync_errno = EIO;
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	fx.fdatasync_errno = 0;
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_read(dir_state, lun.store_id, text,
					       sizeof(text)), 0);	/* none here */
	ck_assert_int_eq(reopen_latched("mode=write-back"), EIO);
	ck_assert_str_eq(lun.poison_dir, other);
	assert_sense(sync_cache10(0, 0), 0x03, 0x0c00);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(reopen_latched(opts), EIO);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_poison_clear(other, lun.store_id), 0);
	ck_assert_int_eq(reopen_latched("mode=write-back"), 0);
	ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(reopen_latched(opts), 0);
	syncguard_lun_close(&lun);
	snprintf(opts, sizeof(opts), "rm -rf '%s'", other);
	ck_assert_int_eq(system(opts), 0);
}
END_TEST

/* ---- open-time checks ---- */

static int try_open(const char *p, const char *bsopts, char *err)
{
	struct syncguard_opts o;

	ck_assert_int_eq(syncguard_opts_parse(bsopts, &o, err, 256), 0);
	return syncguard_lun_open(&lun, p, 9, &o, err, 256);
}

/* bsopts state_dir that is misspelt (no such directory) or names a file
 * refuses the LUN, saying why: made, a misspelt one would keep records
 * where no LUN given the right one looks, and a file started the LUN
 * latched over an unreadable record */
START_TEST(test_state_dir_refused)
{
	char err[256], opts[PATH_MAX + 64], where[PATH_MAX];

	make_file(path, LUN_BYTES, true);
	ck_assert_ptr_nonnull(realpath(dir, where));
	snprintf(opts, sizeof(opts), "mode=write-back;state_dir=%s/typo/states",
		 where);
	ck_assert_int_eq(try_open(path, opts, err), -ENOENT);
	ck_assert_msg(strstr(err, "/typo/states: No such file or directory: "
			     "create it"), "%s", err);
	strncat(where, "/typo", sizeof(where) - strlen(where) - 1);
	ck_assert_int_ne(access(where, F_OK), 0);	/* nothing made */
	ck_assert_ptr_nonnull(realpath(path, where));
	snprintf(opts, sizeof(opts), "mode=write-back;state_dir=%s", where);
	ck_assert_int_eq(try_open(path, opts, err), -ENOTDIR);
	ck_assert_msg(strstr(err, "is not a directory"), "%s", err);
	/* tgtd's own state directory ($SYNCGUARD_STATE_DIR), named in
	 * bsopts before it exists: made on the first record, as unnamed */
	{
		char saved[PATH_MAX];

		snprintf(saved, sizeof(saved), "%s", syncguard_state_dir(NULL));
		ck_assert_ptr_nonnull(realpath(dir, where));
		strncat(where, "/later", sizeof(where) - strlen(where) - 1);
		ck_assert_int_eq(setenv("SYNCGUARD_STATE_DIR", where, 1), 0);
		snprintf(opts, sizeof(opts), "mode=write-back;state_dir=%s",
			 where);
		ck_assert_int_eq(try_open(path, opts, err), 0);
		syncguard_lun_close(&lun);
		ck_assert_int_eq(setenv("SYNCGUARD_STATE_DIR", saved, 1), 0);
	}
}
END_TEST

/* try_open, and close the LUN again if it opened */
static int try_open_close(const char *p, const char *bsopts, char *err)
{
	int ret = try_open(p, bsopts, err);

	if (!ret)
		syncguard_lun_close(&lun);
	return ret;
}

START_TEST(test_open_rejects)
{
	char err[256], p2[80];

	ck_assert_int_eq(try_open(dir, "", err), -EISDIR);
	ck_assert_ptr_nonnull(strstr(err, "is a directory"));
	snprintf(p2, sizeof(p2), "%s/missing", dir);
	ck_assert_int_eq(try_open(p2, "", err), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "No such file"));
	make_file(path, 1000, true);
	ck_assert_int_eq(try_open(path, "", err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a positive multiple"));
	ck_assert_int_eq(try_open("/dev/null", "", err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a regular file or block"));
}
END_TEST

START_TEST(test_open_one_lun_per_file)
{
	struct syncguard_lun other;
	struct syncguard_opts o = { .mode = SYNCGUARD_MODE_WRITE_THROUGH };
	char err[256];

	open_lun(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(syncguard_lun_open(&other, path, 9, &o, err,
					    sizeof(err)), -EBUSY);
	ck_assert_ptr_nonnull(strstr(err, "already exported"));
	syncguard_lun_close(&lun);
	ck_assert_int_eq(syncguard_lun_open(&other, path, 9, &o, err,
					    sizeof(err)), 0);
	syncguard_lun_close(&other);
}
END_TEST

START_TEST(test_open_plp_needs_allocated_file)
{
	char err[256];
	int ret;

	make_file(path, LUN_BYTES, false);		/* sparse */
	ret = try_open(path, "mode=plp", err);
	ck_assert_msg(ret == -EINVAL, "plp on a sparse file: %d %s", ret, err);
	ck_assert_ptr_nonnull(strstr(err, "allocated and written"));
	ck_assert_int_eq(try_open(path, "mode=plp;alloc_check=no", err), 0);
	syncguard_lun_close(&lun);
	ck_assert_int_eq(try_open(path, "mode=write-back", err), 0);
	syncguard_lun_close(&lun);
	make_file(path, LUN_BYTES, true);
	ck_assert_msg(try_open(path, "mode=plp", err) == 0, "%s", err);
}
END_TEST

/* statx as an inode that cannot do direct I/O answers it: STATX_DIOALIGN
 * reported, with an offset alignment of 0 (fscrypt without inline
 * crypto, fs-verity, data journalling, inline data); with @attr, an
 * older kernel's way: no STATX_DIOALIGN, STATX_ATTR_ENCRYPTED set */
static bool statx_attr;

static int statx_no_dio(int fd, unsigned int mask, struct statx *stx)
{
	int ret = statx(fd, "", AT_EMPTY_PATH, mask, stx);

	if (ret)
		return ret;
	if (statx_attr) {
		stx->stx_mask &= ~STATX_DIOALIGN;
		stx->stx_attributes |= STATX_ATTR_ENCRYPTED;
		stx->stx_attributes_mask |= STATX_ATTR_ENCRYPTED;
	} else {
		stx->stx_mask |= STATX_DIOALIGN;
		stx->stx_dio_offset_align = stx->stx_dio_mem_align = 0;
	}
	return 0;
}

/* plp on an inode that cannot do direct I/O: O_DIRECT writes would be
 * buffered silently and answered GOOD from the page cache.  direct=auto
 * takes the page cache and writes each write out (sync_file_range);
 * direct=yes is refused.  An offset alignment of 0 says no direct I/O,
 * not "unknown, use 4096". */
START_TEST(test_open_plp_without_direct_io)
{
	int (*real)(int, unsigned int, struct statx *) = syncguard_sys.statx;
	char err[256];

	make_file(path, LUN_BYTES, true);
	syncguard_sys.statx = statx_no_dio;
	for (int i = 0; i < 2; i++) {
		statx_attr = i;
		ck_assert_int_eq(try_open(path, "mode=plp;direct=yes", err),
				 -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "cannot do direct I/O"));
		ck_assert_msg(try_open(path, "mode=plp", err) == 0, "%s", err);
		ck_assert(lun.no_dio && !lun.direct_io && lun.dfd < 0);
		memset(&fx, 0, sizeof(fx));
		fill(3);
		ck_assert_int_eq(write16(0, 8, true), SYNCGUARD_OK);
		ck_assert_int_eq(fx.writeouts, 1);	/* written out */
		ck_assert_uint_eq(lun.stats->direct_writes, 0);
		syncguard_lun_close(&lun);
	}
	syncguard_sys.statx = real;
	ck_assert_msg(try_open(path, "mode=plp", err) == 0, "%s", err);
	ck_assert(!lun.no_dio && lun.direct_io);
}
END_TEST

/* A LUN keeps writing and flushing the file it opened when its path is
 * renamed and a new file takes the name: its durable writes and flushes
 * go through descriptors opened later (the pools), which do not reopen
 * the path (that would write the other file). */
START_TEST(test_open_rename_keeps_the_file)
{
	char old[96];
	uint8_t got[BS];
	int fd;

	for (int direct = 0; direct < 2; direct++) {
		open_lun_opts(SYNCGUARD_MODE_WRITE_BACK,
			      SYNCGUARD_WRITE_SYNC_DSYNC, direct ?
			      SYNCGUARD_DIRECT_YES : SYNCGUARD_DIRECT_NO);
		snprintf(old, sizeof(old), "%s.old", path);
		ck_assert_int_eq(rename(path, old), 0);
		make_file(path, LUN_BYTES, true);	/* zeroes */
		memset(data, 0x5a, BS);
		ck_assert_int_eq(write16(3, 1, true), SYNCGUARD_OK);
		ck_assert_int_eq(sync_cache10(0, 0), SYNCGUARD_OK);
		syncguard_lun_close(&lun);
		fd = open(path, O_RDONLY);
		ck_assert_int_eq(pread(fd, got, BS, 3 * BS), BS);
		close(fd);
		ck_assert_msg(got[0] == 0, "direct=%d: the write went to the "
			      "new file under the old name", direct);
		fd = open(old, O_RDONLY);
		ck_assert_int_eq(pread(fd, got, BS, 3 * BS), BS);
		close(fd);
		ck_assert_mem_eq(got, data, BS);
		unlink(old);
	}
}
END_TEST

/* A mountinfo text (proc(5)): an unrelated mount first, then @opts as
 * the super options of mount @id on device @dev ("major:minor"). */
static const char *table_of(char *buf, size_t len, unsigned long long id,
			    const char *dev, const char *fstype,
			    const char *source, const char *opts)
{
	snprintf(buf, len, "%llu 1 999:1 / /x rw,relatime - ext4 /dev/x rw\n"
		 "%llu 1 %s / /y rw,noatime shared:1 master:2 - %s %s %s\n",
		 id + 1, id, dev, fstype, source, opts);
	return buf;
}

/* syncguard_fs_barriers reads the super options of the file's own mount
 * (mountinfo lines as proc(5) gives them, optional fields included),
 * found by its mount ID, or by its device (after a lazy unmount). */
START_TEST(test_open_barriers_from_mountinfo)
{
	static char long_dev[300], long_nobarrier[300];
	static const struct {
		const char *source, *opts;
		int want;
	} cases[] = {
		{ "/dev/y", "rw,nobarrier", 0 },
		{ "/dev/y", "rw,barrier=0,data=ordered", 0 },
		{ "/dev/y", "rw,barrier=1", 1 }, { "/dev/y", "rw,nobarrierx", 1 },
		{ "/dev/y", "rw", 1 },
		/* f2fs's fsync skips the device flush; cifs's sends no SMB
		 * FLUSH: as nobarrier */
		{ "/dev/y", "rw,fsync_mode=nobarrier,active_logs=6", 0 },
		{ "/dev/y", "rw,fsync_mode=posix", 1 },
		{ "//srv/s", "rw,vers=3.1.1,nostrictsync,cache=strict", 0 },
		/* sources of any length */
		{ long_dev, "rw,nobarrier", 0 }, { long_nobarrier, "rw", 1 },
	};
	char table[1024], dev[32];
	struct statx stx;
	int fd;

	memset(long_dev, 'd', sizeof(long_dev) - 1);
	memset(long_nobarrier, 'o', sizeof(long_nobarrier) - 1);
	memcpy(long_nobarrier + sizeof(long_nobarrier) - 10, "nobarrier", 9);
	make_file(path, LUN_BYTES, true);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(syncguard_fs_barriers(fd, table_of(table,
			sizeof(table), stx.stx_mnt_id, "8:2", "ext4",
			cases[i].source, cases[i].opts)) == cases[i].want,
			"case %zu: super options \"%s\"", i, cases[i].opts);
	snprintf(dev, sizeof(dev), "%u:%u", stx.stx_dev_major,
		 stx.stx_dev_minor);
	ck_assert_int_eq(syncguard_fs_barriers(fd, table_of(table,
		sizeof(table), stx.stx_mnt_id + 5, dev, "ext4", "/dev/y",
		"rw,nobarrier")), 0);
	ck_assert_int_eq(syncguard_fs_barriers(fd, table_of(table,
		sizeof(table), stx.stx_mnt_id + 5, "8:2", "ext4", "/dev/y",
		"rw,nobarrier")), -ENOENT);
	ck_assert_int_eq(syncguard_fs_barriers(fd, ""), -ENOENT);
	close(fd);
}
END_TEST

/* syncguard_overlay_upper finds upperdir= among the super options and
 * undoes mountinfo's \ooo escapes, then overlayfs's own backslashes (a
 * comma, a backslash: read wrongly, they name another directory, and the
 * check of the upper layer is bypassed); a relative one is refused. */
START_TEST(test_open_overlay_upper_from_mountinfo)
{
	static const struct {
		const char *opts, *want;
		int ret;
	} cases[] = {
		{ "rw,lowerdir=/l,upperdir=/x\\054y\\040z,workdir=/w", "/x,y z", 0 },
		{ "upperdir=/first,workdir=/w", "/first", 0 },
		{ "rw,upperdir=/t/u\\134\\054c,workdir=/w", "/t/u,c", 0 },
		{ "rw,upperdir=/t/u\\134\\134b,workdir=/w", "/t/u\\b", 0 },
		{ "rw,lowerdir=/l,upperdir=up2,workdir=wk2", "", -EINVAL },
		{ "rw,lowerdir=/l,xupperdir=/no", "", -ENOENT },
	};
	char table[1024], dir[64];
	struct statx stx;
	int fd;

	make_file(path, LUN_BYTES, true);
	fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(syncguard_overlay_upper(fd, table_of(table,
			sizeof(table), stx.stx_mnt_id, "0:40", "overlay",
			"overlay", cases[i].opts), dir, sizeof(dir)) ==
			cases[i].ret, "case %zu", i);
		if (!cases[i].ret)
			ck_assert_str_eq(dir, cases[i].want);
	}
	close(fd);
}
END_TEST

/* syncguard_mounts_fs_path places a path by the longest mount point
 * that is a prefix of it (a later line with the same mount point covers
 * an earlier one), joins that mount's root with the rest, and undoes
 * mountinfo's escapes in both; a bind mount of a subdirectory (root
 * "/srv") names the same inner path as the file system's own mount. */
START_TEST(test_open_fs_path_from_mountinfo)
{
	static const char table[] =
		"20 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
		"30 20 8:2 / /data rw - ext4 /dev/sdb rw\n"
		"31 20 8:2 /srv /mnt/b\\040x rw - ext4 /dev/sdb rw\n"
		"32 20 8:3 / /dat rw - ext4 /dev/sdc rw\n"
		"33 30 0:50 / /data/over rw - tmpfs tmpfs rw\n"
		"34 30 8:4 / /data/over rw - ext4 /dev/sdd rw\n"
		"35 20 8:2 /srv/img /f.img rw - ext4 /dev/sdb rw\n";
	static const struct {
		const char *path, *dev, *inner;
		int ret;
	} cases[] = {
		{ "/data/srv/lun.img", "8:2", "/srv/lun.img", 0 },
		{ "/mnt/b x/lun.img", "8:2", "/srv/lun.img", 0 },
		{ "/mnt/b x", "8:2", "/srv", 0 },
		{ "/dat/a", "8:3", "/a", 0 },		/* not /data's */
		{ "/datax/a", "8:1", "/datax/a", 0 },
		{ "/data/over/f", "8:4", "/f", 0 },	/* the later line */
		{ "/f.img", "8:2", "/srv/img", 0 },	/* a file bind mount */
		{ "/", "8:1", "/", 0 },
		{ "/data", "8:2", "/", 0 },
	};
	char dev[32], inner[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_msg(syncguard_mounts_fs_path(table, cases[i].path,
			dev, sizeof(dev), inner, sizeof(inner)) == cases[i].ret,
			"case %zu: %s", i, cases[i].path);
		ck_assert_str_eq(dev, cases[i].dev);
		ck_assert_str_eq(inner, cases[i].inner);
	}
	ck_assert_int_eq(syncguard_mounts_fs_path("", "/a", dev, sizeof(dev),
		inner, sizeof(inner)), -ENOENT);
}
END_TEST

/* A real overlay whose upper layer is a tmpfs: the file is refused as
 * a RAM file system's (its own statfs says overlay). */
START_TEST(test_open_refuses_overlay_on_tmpfs)
{
	char sh[1024], file[96], err[256] = "";
	int set_up, got;

	snprintf(file, sizeof(file), "%s/ovl/lun.img", dir);
	snprintf(sh, sizeof(sh), "set -e; cd %s; mkdir low t ovl; "
		 "mount -t tmpfs tmpfs t; mkdir t/up t/work; mount -t overlay "
		 "overlay -o \"lowerdir=$PWD/low,upperdir=$PWD/t/up,"
		 "workdir=$PWD/t/work\" ovl; dd if=/dev/zero of=ovl/lun.img "
		 "bs=64k count=%u status=none", dir, LUN_BYTES / 65536);
	set_up = system(sh);
	got = try_open_close(file, "mode=write-back", err);
	snprintf(sh, sizeof(sh), "cd %s; umount ovl; umount t; "
		 "rm -rf low t ovl", dir);
	ck_assert_int_eq(system(sh), 0);
	ck_assert_int_eq(set_up, 0);
	ck_assert_int_eq(got, -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "(an overlay's upper layer "));
	ck_assert_ptr_nonnull(strstr(err, "file is on a RAM file system"));
}
END_TEST

/* The same on a real ext4 mounted nobarrier, whose fdatasync sends the
 * device no flush: write-back and write-through are refused, plp (which
 * never flushes) is not, and after a remount with barriers all are.  The
 * loop has direct I/O on, which plp needs (core/loopdev.c). */
START_TEST(test_open_refuses_nobarrier_mount)
{
	char sh[1024], file[96], err[3][256] = { "", "", "" };
	int got[4];

	snprintf(file, sizeof(file), "%s/mnt/lun.img", dir);
	snprintf(sh, sizeof(sh), "set -e; cd %s; truncate -s 16M fs.img; "
		 "mkdir mnt; losetup --find --show --direct-io=on fs.img "
		 ">dev; "
		 "mkfs.ext4 -q \"$(cat dev)\"; "
		 "mount -o nobarrier \"$(cat dev)\" mnt; "
		 "dd if=/dev/zero of=mnt/lun.img bs=64k count=%u status=none",
		 dir, LUN_BYTES / 65536);
	got[0] = system(sh);
	got[1] = try_open_close(file, "mode=write-back", err[0]);
	got[2] = try_open_close(file, "mode=write-through", err[1]);
	got[3] = try_open_close(file, "mode=plp", err[2]);
	snprintf(sh, sizeof(sh), "cd %s && mount -o remount,barrier mnt",
		 dir);
	if (!got[0] && !system(sh) &&
	    !try_open_close(file, "mode=write-back", err[0]))
		got[0] = 1;
	snprintf(sh, sizeof(sh), "cd %s; umount mnt; losetup -d \"$(cat dev)"
		 "\"; rm -rf mnt fs.img dev", dir);
	ck_assert_int_eq(system(sh), 0);
	ck_assert_msg(got[0] == 1, "set-up or remount failed, or write-back "
		      "refused with barriers: %s", err[0]);
	ck_assert_int_eq(got[1], -EINVAL);
	ck_assert_int_eq(got[2], -EINVAL);
	ck_assert_ptr_nonnull(strstr(err[1], "mounted nobarrier (or f2fs "
				     "fsync_mode=nobarrier, cifs nostrictsync): "
				     "its fdatasync does not flush"));
	ck_assert_msg(got[3] == 0, "plp refused: %s", err[2]);
}
END_TEST

/* A latch recorded under a store's former identity still latches the
 * store's LUN, and is then recorded under the identity the store has
 * now.  Here the former one is what Linux before 6.9 (no
 * FS_IOC_GETFSUUID) names a file on ext4 by, its statfs f_fsid: before,
 * a kernel upgrade left every such record behind, and the LUN started
 * clean.  Needs Linux 6.9 or later. */
START_TEST(test_poison_former_identity)
{
	const char *dir_state = syncguard_state_dir(NULL);
	char sh[1024], file[96], id[256], former[SYNCGUARD_FORMER_LEN] = "";
	char text[256];
	char why[512] = "";
	int set_up, fd, latched = -1, left = -1, moved = -1, unmoved = -1;
	struct syncguard_opts o;

	snprintf(file, sizeof(file), "%s/mnt/lun.img", dir);
	snprintf(sh, sizeof(sh), "set -e; cd %s; truncate -s 16M fs.img; "
		 "mkdir mnt; losetup --find --show --direct-io=on fs.img "
		 ">dev; mkfs.ext4 -q \"$(cat dev)\"; mount \"$(cat dev)\" mnt; "
		 "dd if=/dev/zero of=mnt/lun.img bs=64k count=%u status=none",
		 dir, LUN_BYTES / 65536);
	set_up = system(sh);
	if (!set_up && (fd = open(file, O_RDONLY)) >= 0) {
		set_up = syncguard_store_ids(fd, id, sizeof(id), former,
					     sizeof(former));
		close(fd);
	}
	if (!set_up && former[0] &&
	    !syncguard_poison_write(dir_state, former, file, EIO) &&
	    !syncguard_opts_parse("mode=write-back", &o, text, sizeof(text)) &&
	    !syncguard_lun_open(&lun, file, 9, &o, text, sizeof(text))) {
		latched = syncguard_lun_latched(&lun);
		syncguard_lun_close(&lun);
		left = syncguard_poison_read(dir_state, former, text,
					     sizeof(text));
		moved = syncguard_poison_read(dir_state, id, text,
					      sizeof(text));
		syncguard_poison_clear(dir_state, id);
		/* a former record that cannot be taken over (here the
		 * state directory is immutable) latches all the same */
		syncguard_poison_write(dir_state, former, file, EIO);
		snprintf(sh, sizeof(sh), "chattr +i '%s/latched'", dir_state);
		if (!system(sh) &&
		    !syncguard_lun_open(&lun, file, 9, &o, text, sizeof(text))) {
			unmoved = syncguard_lun_latched(&lun);
			snprintf(why, sizeof(why), "%s", lun.poison);
			syncguard_lun_close(&lun);
		}
		snprintf(sh, sizeof(sh), "chattr -i '%s/latched'", dir_state);
		ck_assert_int_eq(system(sh), 0);
		syncguard_poison_clear(dir_state, former);
	}
	snprintf(sh, sizeof(sh), "cd %s; umount mnt; losetup -d \"$(cat dev)"
		 "\"; rm -rf mnt fs.img dev", dir);
	ck_assert_int_eq(system(sh), 0);
	ck_assert_msg(!set_up, "set-up failed");
	ck_assert_msg(former[0], "store %s has no former identity (Linux "
		      "before 6.9?)", id);
	ck_assert_msg(latched == EIO, "a LUN on a store recorded latched "
		      "under its former identity %s started with %d", former,
		      latched);
	ck_assert_int_eq(left, 0);
	ck_assert_int_eq(moved, EIO);
	ck_assert_msg(unmoved == EIO && strstr(why, "former identity"),
		      "a record under the former identity that could not be "
		      "taken over: the LUN started with %d (%s)", unmoved, why);
}
END_TEST

/* Can this test mount a loop device (root, loop, mkfs.ext4)? */
static bool can_mount_loop(void)
{
	return geteuid() == 0 && access("/dev/loop-control", F_OK) == 0 &&
	       system("command -v mkfs.ext4 >/dev/null") == 0;
}

Suite *exec_suite(void)
{
	Suite *s = suite_create("exec");
	TCase *cost = tcase_create("cost");
	TCase *data = tcase_create("data");
	TCase *faults = tcase_create("faults");
	TCase *open = tcase_create("open");
	TCase *all[] = { cost, data, faults, open };

	for (int i = 0; i < 4; i++) {
		tcase_add_checked_fixture(all[i], setup, teardown);
		suite_add_tcase(s, all[i]);
	}
	tcase_add_test(cost, test_exec_write_back_costs);
	tcase_add_test(cost, test_exec_start_stop_flushes);
	tcase_add_test(cost, test_exec_no_descriptor_busy);
	tcase_add_test(cost, test_exec_plp_sync_cache_during_switch);
	tcase_add_test(cost, test_exec_write_back_dsync_costs);
	tcase_add_test(cost, test_exec_auto_write_sync);
	tcase_add_test(cost, test_exec_write_sync_loop);
	tcase_add_test(cost, test_exec_write_sync_loop_group);
	tcase_add_test(cost, test_exec_write_sync_loop_off);
	tcase_add_test(cost, test_exec_write_sync_loop_interleaved);
	tcase_add_test(cost, test_exec_write_back_mix);
	tcase_add_test(cost, test_exec_zero_blocks);
	tcase_add_test(cost, test_exec_write_through_costs);
	tcase_add_test(cost, test_exec_plp_costs);
	tcase_add_test(cost, test_exec_wce_off_flushes_then_writes_through);
	tcase_add_test(data, test_exec_data_round_trip);
	tcase_add_test(data, test_exec_write_same_lbdata);
	tcase_add_test(data, test_exec_write_same_ndob);
	tcase_add_test(data, test_exec_bytchk_reserved);
	tcase_add_test(data, test_exec_compare_and_write);
	tcase_add_test(data, test_exec_orwrite);
	tcase_add_test(data, test_exec_write_lock_lets_writer_in);
	tcase_add_test(data, test_exec_lba_out_of_range);
	tcase_add_test(data, test_exec_short_data_in_and_out);
	tcase_add_test(data, test_exec_write_same_unmap_huge_lun);
	tcase_add_test(data, test_exec_write_same_unmap_data);
	tcase_add_test(data, test_exec_unmap_parameter_list_length);
	tcase_add_test(data, test_exec_fua_with_failed_flush_meanwhile);
	tcase_add_test(faults, test_exec_write_eio);
	tcase_add_test(faults, test_exec_read_eio);
	tcase_add_test(faults, test_exec_enospc);
	tcase_add_test(faults, test_exec_enospc_witness_error_latches);
	tcase_add_test(faults, test_exec_enospc_recheck_race);
	tcase_add_test(faults, test_exec_close_flushes_with_soft_latch);
	tcase_add_test(faults, test_exec_enospc_elsewhere_latches);
	tcase_add_test(faults, test_exec_write_protected);
	tcase_add_test(faults, test_exec_flush_error_latches);
	tcase_add_test(faults, test_exec_group_flush_descriptor);
	tcase_add_test(faults, test_exec_dsync_failure_latches_all_modes);
	tcase_add_test(faults, test_exec_eintr_and_short_writes_complete);
	tcase_add_test(faults, test_exec_dsync_eopnotsupp_latches);
	tcase_add_test(faults, test_poison_store_id);
	tcase_add_test(faults, test_poison_record_dirs_synced);
	tcase_add_test(faults, test_poison_device_number_held);
	tcase_add_test(faults, test_poison_latch_recorded);
	tcase_add_test(faults, test_poison_final_flush_recorded);
	tcase_add_test(faults, test_poison_state_dir);
	tcase_add_test(faults, test_state_dir_refused);
	tcase_add_test(faults, test_poison_marker_kept_unrenamed);
	tcase_add_test(faults, test_poison_adopt);
	tcase_add_test(faults, test_poison_final_flush_pending);
	tcase_add_test(faults, test_poison_marks_many_stores);
	tcase_add_test(faults, test_poison_records_apart);
	tcase_add_test(faults, test_poison_unfinished_record);
	tcase_add_test(faults, test_poison_other_final_flush);
	tcase_add_test(faults, test_poison_overlapping_final_flushes);
	tcase_add_test(faults, test_poison_markers_left);
	tcase_add_test(faults, test_poison_marker_without_descriptors);
	if (access("tools/syncguard-devmodel", X_OK) == 0 &&
	    access("/dev/fuse", W_OK) == 0) {
		tcase_add_test(faults, test_poison_fuse_identity);
		tcase_add_test(faults, test_poison_path_ids);
	} else {
		test_left_out("test_poison_fuse_identity", true,
			      "needs tools/syncguard-devmodel and /dev/fuse");
		test_left_out("test_poison_path_ids", true,
			      "needs tools/syncguard-devmodel and /dev/fuse");
	}
	tcase_add_test(open, test_open_rejects);
	tcase_add_test(open, test_open_one_lun_per_file);
	tcase_add_test(open, test_open_plp_needs_allocated_file);
	tcase_add_test(open, test_open_plp_without_direct_io);
	tcase_add_test(open, test_open_barriers_from_mountinfo);
	tcase_add_test(open, test_open_rename_keeps_the_file);
	tcase_add_test(open, test_open_overlay_upper_from_mountinfo);
	tcase_add_test(open, test_open_fs_path_from_mountinfo);
	if (can_mount_loop()) {
		tcase_add_test(open, test_open_refuses_nobarrier_mount);
		tcase_add_test(open, test_poison_former_identity);
	} else {
		fprintf(stderr, "exec: test_open_refuses_nobarrier_mount left "
			"out: needs root, loop devices and mkfs.ext4\n");
		test_left_out("test_poison_former_identity", false,
			      "needs root, loop devices and mkfs.ext4");
	}
	if (geteuid() == 0 && system("grep -qw overlay /proc/filesystems || "
				     "modprobe overlay 2>/dev/null") == 0)
		tcase_add_test(open, test_open_refuses_overlay_on_tmpfs);
	else
		fprintf(stderr, "exec: test_open_refuses_overlay_on_tmpfs left "
			"out: needs root and overlayfs\n");
	return s;
}
