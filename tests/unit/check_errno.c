/*
 * The errno matrix: every system call whose result decides durability,
 * failed with every errno Linux can return there, through syncguard_sys.
 * The expected answers come from the rule for every failing call (the
 * table in core/policy.c, above syncguard_policy_latches), not from the
 * code:
 * - a data write, flush, write-out or RWF_DSYNC write that failed: CHECK
 *   CONDITION (MEDIUM ERROR / WRITE ERROR; ENOSPC and EDQUOT SPACE
 *   ALLOCATION FAILED; EROFS WRITE PROTECTED), never GOOD;
 * - the LUN latches exactly when the failed call was a flush, a write-out
 *   or an RWF_DSYNC write (acknowledged data may be lost), never for a
 *   plain data write or a hole punch;
 * - EINTR and EAGAIN from a call that only moves data (a plain write, a
 *   hole punch, an open) are retried a bounded number of times: GOOD only
 *   after a retry succeeded; from a flush, a write-out or an RWF_DSYNC
 *   write they are failures like any errno (a retry's success proves
 *   nothing: core/sys.c, syncguard_retry);
 * - a resource missing before any I/O (a pool descriptor: open's EMFILE,
 *   ENFILE, ENOMEM) is BUSY and latches nothing;
 * - WCE never reads 0 over volatile data: a switch whose flush failed
 *   fails, and WCE stays 1.
 * The io_uring engine (glue/uring.c, compiled against tgt) is
 * modelled here by the calls it makes into the core (syncguard_plan,
 * syncguard_plan_done, syncguard_flush_done) with its completions passed
 * through syncguard_sys.ring_result, as the engine passes them; the
 * engine itself meets the same errnos end to end in tests/proto
 * (check_faults.c, from the FUSE device model below the module).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"
#include "unit.h"

#define BS 512u
#define LUN_BYTES (1u << 20)

/* the call that fails */
enum target {
	T_PLAIN,	/* pwritev2 without RWF_DSYNC */
	T_DSYNC,	/* pwritev2 with RWF_DSYNC */
	T_FLUSH,	/* fdatasync */
	T_FSYNC,	/* fsync (plp's open-time sync) */
	T_WRITEOUT,	/* sync_file_range */
	T_PUNCH,	/* fallocate */
	T_OPEN,		/* open of a pool descriptor */
	T_RING_WRITE,	/* an io_uring write's completion */
	T_RING_DSYNC,	/* an io_uring RWF_DSYNC write's completion */
	T_RING_FLUSH,	/* an io_uring fsync's completion */
};

/* one column of the matrix: the errno, and how many calls fail (-1:
 * every one; a retried EINTR or EAGAIN then succeeds) */
static const struct column {
	int err, times;
} columns[] = {
	{ EIO, -1 }, { ENOSPC, -1 }, { EDQUOT, -1 }, { EROFS, -1 },
	{ EMFILE, -1 }, { ENFILE, -1 }, { ENOMEM, -1 }, { ENOSYS, -1 },
	{ EINTR, -1 }, { EAGAIN, -1 }, { EINTR, 1 }, { EAGAIN, 3 },
	{ EOPNOTSUPP, -1 },	/* a FUSE daemon's, a device's failed flush */
};
#define NCOLUMNS ((int)(sizeof(columns) / sizeof(columns[0])))

static struct {
	enum target t;
	int err, times;
	int calls;		/* calls of the target made */
	bool armed;
} inj;
static enum target armed_t;	/* the last target armed */

static struct syncguard_lun lun;
static char dir[] = "build/errno.XXXXXX";
static char path[64];
static uint8_t data[16 * BS], back[16 * BS];

/* Does this call of @t fail?  Sets errno when it does. */
static bool hit(enum target t)
{
	if (!inj.armed || inj.t != t)
		return false;
	inj.calls++;
	if (!inj.times)
		return false;
	if (inj.times > 0)
		inj.times--;
	errno = inj.err;
	return true;
}

static ssize_t fx_pwritev2(int fd, const struct iovec *iov, int cnt,
			   off_t off, int flags)
{
	if (hit(flags & RWF_DSYNC ? T_DSYNC : T_PLAIN))
		return -1;
	return pwritev2(fd, iov, cnt, off, flags);
}

static int fx_fdatasync(int fd)
{
	return hit(T_FLUSH) ? -1 : fdatasync(fd);
}

static int fx_fsync(int fd)
{
	return hit(T_FSYNC) ? -1 : fsync(fd);
}

static int fx_sync_file_range(int fd, off_t off, off_t len, unsigned int f)
{
	return hit(T_WRITEOUT) ? -1 : sync_file_range(fd, off, len, f);
}

static int fx_fallocate(int fd, int mode, off_t off, off_t len)
{
	return hit(T_PUNCH) ? -1 : fallocate(fd, mode, off, len);
}

static int fx_open(const char *p, int flags)
{
	return hit(T_OPEN) ? -1 : open(p, flags);
}

static int fx_ring_result(enum syncguard_call call, int fd, int res)
{
	enum target t = call == SYNCGUARD_CALL_FLUSH ? T_RING_FLUSH :
			call == SYNCGUARD_CALL_DSYNC_WRITE ? T_RING_DSYNC :
			T_RING_WRITE;

	(void)fd;
	return hit(t) ? -errno : res;
}

static void setup(void)
{
	lun.fd = -1;
	strcpy(dir, "build/errno.XXXXXX");	/* again in one test too */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lun.img", dir);
	syncguard_sys.pwritev2 = fx_pwritev2;
	syncguard_sys.fdatasync = fx_fdatasync;
	syncguard_sys.fsync = fx_fsync;
	syncguard_sys.sync_file_range = fx_sync_file_range;
	syncguard_sys.fallocate = fx_fallocate;
	syncguard_sys.open = fx_open;
	syncguard_sys.ring_result = fx_ring_result;
	memset(&inj, 0, sizeof(inj));
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 13 + 1);
}

static void teardown(void)
{
	inj.armed = false;
	if (lun.fd >= 0)
		syncguard_lun_close(&lun);
	unlink(path);
	rmdir(dir);
}

/* A LUN on a fully written file with @bsopts; WCE as its mode has it. */
static void open_lun(const char *bsopts)
{
	struct syncguard_opts o;
	char err[256];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, 0, 0, LUN_BYTES), 0);
	for (off_t off = 0; off < LUN_BYTES; off += sizeof(data))
		ck_assert_int_eq(pwrite(fd, data, sizeof(data), off),
				 (ssize_t)sizeof(data));
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	ck_assert_int_eq(syncguard_opts_parse(bsopts, &o, err, sizeof(err)), 0);
	ck_assert_msg(syncguard_lun_open(&lun, path, 9, &o, err,
					 sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, syncguard_mode_wce(o.mode)),
			 0);
	lun.enospc_soft = false;	/* the rule's own case; soft latches:
					 * check_exec.c test_exec_enospc* */
}

/* From now on, column @c of the matrix fails call @t. */
static void arm(enum target t, int c)
{
	inj = (typeof(inj)){ .t = t, .err = columns[c].err,
			     .times = columns[c].times, .armed = true };
	armed_t = t;
}

/* Does the call @t only move data, so that its EINTR and EAGAIN are
 * made again (syncguard_retry)? */
static bool retried(enum target t)
{
	return t == T_PLAIN || t == T_PUNCH || t == T_OPEN || t == T_RING_WRITE;
}

/* Is @c's errno EINTR or EAGAIN? */
static bool not_now(int c)
{
	return columns[c].err == EINTR || columns[c].err == EAGAIN;
}

static void disarm(void)
{
	inj.armed = false;
}

/* Does column @c end in success for the call armed last (an EINTR or
 * EAGAIN made again, then no error)? */
static bool retried_ok(int c)
{
	return columns[c].times > 0 && retried(armed_t);
}

static struct syncguard_result run(const uint8_t *cdb, size_t len,
				   const uint8_t *out, uint32_t out_len,
				   uint8_t *in, uint32_t in_len)
{
	struct syncguard_req req = { cdb, len, out, out_len, in, in_len };
	struct syncguard_result res;

	syncguard_execute(&lun, &req, &res);
	return res;
}

static enum syncguard_reason write10(uint32_t lba, uint16_t n, bool fua)
{
	uint8_t cdb[10] = { 0x2a, fua ? 0x08 : 0, lba >> 24, lba >> 16,
			    lba >> 8, lba, 0, n >> 8, n, 0 };

	return run(cdb, 10, data, n * BS, NULL, 0).reason;
}

static enum syncguard_reason read10(uint32_t lba, uint16_t n, bool fua)
{
	uint8_t cdb[10] = { 0x28, fua ? 0x08 : 0, lba >> 24, lba >> 16,
			    lba >> 8, lba, 0, n >> 8, n, 0 };

	return run(cdb, 10, NULL, 0, back, n * BS).reason;
}

static enum syncguard_reason sync_cache10(void)
{
	uint8_t cdb[10] = { 0x35 };

	return run(cdb, 10, NULL, 0, NULL, 0).reason;
}

static enum syncguard_reason write_same10(uint32_t lba, uint16_t n,
					  bool unmap)
{
	uint8_t cdb[10] = { 0x41, unmap ? 0x08 : 0, lba >> 24, lba >> 16,
			    lba >> 8, lba, 0, n >> 8, n, 0 };
	static const uint8_t zero[BS];

	return run(cdb, 10, unmap ? zero : data, BS, NULL, 0).reason;
}

/* The sense the table gives a write or flush that failed with @err */
static void assert_failed(enum syncguard_reason r, int err, const char *what)
{
	struct syncguard_sense s = syncguard_sense_of(r);
	uint8_t key = 0x03;
	uint16_t asc = 0x0c00;

	if (err == ENOSPC || err == EDQUOT) {
		key = 0x07;
		asc = 0x2707;
	} else if (err == EROFS) {
		key = 0x07;
		asc = 0x2700;
	}
	ck_assert_msg(s.status == 0x02 && s.key == key && s.asc == asc,
		      "%s, %s: status %02x sense %x/%04x, want CHECK CONDITION "
		      "%x/%04x", what, strerror(err), s.status, s.key, s.asc,
		      key, asc);
}

/* Column @c's answer for a command whose call failed: GOOD after a
 * retry, else CHECK CONDITION as the table says; and the call was made
 * again for EINTR and EAGAIN, a bounded number of times. */
static void assert_answer(enum syncguard_reason r, int c, const char *what)
{
	if (retried_ok(c)) {
		ck_assert_msg(r == SYNCGUARD_OK, "%s: %s once, then success: "
			      "reason %d", what, strerror(columns[c].err), r);
		return;
	}
	assert_failed(r, columns[c].err, what);
	if (not_now(c))		/* made again only where it only moves data */
		ck_assert_int_eq(inj.calls, retried(armed_t) ?
				 SYNCGUARD_RETRIES + 1 : 1);
}

/* Is the LUN latched as the table says, @latches for this call? */
static void assert_latch(bool latches, int c, const char *what)
{
	int want = latches && !retried_ok(c) ? columns[c].err : 0;

	ck_assert_msg(syncguard_lun_latched(&lun) == want, "%s, %s: latched "
		      "%d, want %d", what, strerror(columns[c].err),
		      syncguard_lun_latched(&lun), want);
}

/* WCE never reads 0 over volatile data: after the failure, a switch to
 * WCE=0 succeeds only on a LUN that is not latched, and WCE reads 1 when
 * it failed. */
static void assert_switch(void)
{
	bool latched = syncguard_lun_latched(&lun);
	int ret = syncguard_lun_set_wce(&lun, false);

	ck_assert_int_eq(ret != 0, latched);
	ck_assert_int_eq(syncguard_lun_reported_wce(&lun), latched);
}

/* ---- the worker threads' engine (core/exec.c) ---- */

/* a plain data write: its command fails, the LUN goes on */
START_TEST(test_errno_plain_write)
{
	open_lun("mode=write-back;write_sync=group");
	arm(T_PLAIN, _i);
	assert_answer(write10(0, 8, false), _i, "WRITE(10)");
	assert_latch(false, _i, "WRITE(10)");
	arm(T_PLAIN, _i);	/* a FUA write's cached write, then a flush */
	assert_answer(write10(8, 8, true), _i, "FUA WRITE(10), group");
	assert_latch(false, _i, "FUA WRITE(10), group");
	disarm();
	ck_assert_int_eq(sync_cache10(), SYNCGUARD_OK);
	ck_assert_int_eq(write10(0, 8, true), SYNCGUARD_OK);
	assert_switch();
}
END_TEST

/* an RWF_DSYNC write: its sync reports the mapping's writeback errors */
START_TEST(test_errno_dsync_write)
{
	open_lun("mode=write-through;write_sync=dsync");
	arm(T_DSYNC, _i);
	assert_answer(write10(0, 8, false), _i, "write-through WRITE(10)");
	assert_latch(true, _i, "write-through WRITE(10)");
	disarm();
	if (retried_ok(_i))
		return;
	assert_failed(sync_cache10(), columns[_i].err, "SYNCHRONIZE CACHE "
		      "after it");
	assert_failed(write10(8, 8, true), columns[_i].err, "FUA WRITE after");
	ck_assert_int_eq(write10(8, 8, false) == SYNCGUARD_OK, false);
}
END_TEST

/* write-back's FUA write by RWF_DSYNC, and WCE=0 after it */
START_TEST(test_errno_dsync_write_back)
{
	open_lun("mode=write-back;write_sync=dsync");
	ck_assert_int_eq(write10(16, 8, false), SYNCGUARD_OK);	/* cached */
	arm(T_DSYNC, _i);
	assert_answer(write10(0, 8, true), _i, "write-back FUA WRITE(10)");
	assert_latch(true, _i, "write-back FUA WRITE(10)");
	disarm();
	assert_switch();
}
END_TEST

/* a flush: SYNCHRONIZE CACHE, and everything after it */
START_TEST(test_errno_flush_sync_cache)
{
	open_lun("mode=write-back;write_sync=group");
	ck_assert_int_eq(write10(0, 8, false), SYNCGUARD_OK);
	arm(T_FLUSH, _i);
	assert_answer(sync_cache10(), _i, "SYNCHRONIZE CACHE(10)");
	assert_latch(true, _i, "SYNCHRONIZE CACHE(10)");
	disarm();
	if (!retried_ok(_i)) {
		assert_failed(sync_cache10(), columns[_i].err,
			      "SYNCHRONIZE CACHE again");
		assert_failed(write10(8, 8, true), columns[_i].err,
			      "FUA WRITE after");
	}
	assert_switch();
}
END_TEST

/* a flush that a FUA write joins (write_sync=group), a FUA READ's, an
 * IMMED SYNCHRONIZE CACHE's (the background flush's result is its
 * deferred error: syncguard_lun_flush) */
START_TEST(test_errno_flush_group)
{
	open_lun("mode=write-back;write_sync=group");
	arm(T_FLUSH, _i);
	assert_answer(write10(0, 8, true), _i, "FUA WRITE(10), group");
	assert_latch(true, _i, "FUA WRITE(10), group");
	teardown();
	setup();
	open_lun("mode=write-back;write_sync=group");
	ck_assert_int_eq(write10(0, 8, false), SYNCGUARD_OK);
	arm(T_FLUSH, _i);
	assert_answer(read10(0, 8, true), _i, "FUA READ(10)");
	assert_latch(true, _i, "FUA READ(10)");
	teardown();
	setup();
	open_lun("mode=write-back;write_sync=group");
	ck_assert_int_eq(write10(0, 8, false), SYNCGUARD_OK);
	arm(T_FLUSH, _i);
	ck_assert_int_eq(syncguard_lun_flush(&lun, true),
			 retried_ok(_i) ? 0 : -columns[_i].err);
	assert_latch(true, _i, "IMMED's flush");
}
END_TEST

/* the switch to WCE=0 (MODE SELECT, tgtadm, a write-through or plp
 * LUN's switch at open): fails with its flush, WCE stays 1, latched */
START_TEST(test_errno_flush_wce_switch)
{
	int ret;

	open_lun("mode=write-back;write_sync=group");
	ck_assert_int_eq(write10(0, 8, false), SYNCGUARD_OK);
	arm(T_FLUSH, _i);
	ret = syncguard_lun_set_wce(&lun, false);
	ck_assert_int_eq(ret, retried_ok(_i) ? 0 : -columns[_i].err);
	ck_assert_int_eq(syncguard_lun_reported_wce(&lun), !retried_ok(_i));
	assert_latch(true, _i, "the switch to WCE=0");
	disarm();
	teardown();
	setup();
	open_lun("mode=write-through");
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, true), 0);	/* as at open */
	arm(T_FLUSH, _i);
	ret = syncguard_lun_set_wce(&lun, false);
	ck_assert_int_eq(ret, retried_ok(_i) ? 0 : -columns[_i].err);
	ck_assert_int_eq(syncguard_lun_reported_wce(&lun), !retried_ok(_i));
}
END_TEST

/* write-through's WRITE SAME and UNMAP end in a flush */
START_TEST(test_errno_flush_write_same_unmap)
{
	open_lun("mode=write-through;write_sync=group");
	arm(T_FLUSH, _i);
	assert_answer(write_same10(0, 16, false), _i, "WRITE SAME(10)");
	assert_latch(true, _i, "WRITE SAME(10)");
	teardown();
	setup();
	open_lun("mode=write-through;write_sync=group");
	lun.thin = true;
	arm(T_FLUSH, _i);
	assert_answer(write_same10(0, 16, true), _i, "WRITE SAME(10) UNMAP");
	assert_latch(true, _i, "WRITE SAME(10) UNMAP");
}
END_TEST

/* plp's write-out (direct=no: buffered writes, then sync_file_range) */
START_TEST(test_errno_writeout)
{
	open_lun("mode=plp;direct=no");
	arm(T_WRITEOUT, _i);
	assert_answer(write10(0, 8, false), _i, "plp WRITE(10)");
	assert_latch(true, _i, "plp WRITE(10)");
	disarm();
	if (!retried_ok(_i))
		assert_failed(write10(8, 8, true), columns[_i].err,
			      "plp FUA WRITE after");
	teardown();
	setup();
	open_lun("mode=plp;direct=no");
	arm(T_WRITEOUT, _i);
	assert_answer(write_same10(0, 16, false), _i, "plp WRITE SAME(10)");
	assert_latch(true, _i, "plp WRITE SAME(10)");
}
END_TEST

/* plp's open-time fsync (the file's allocation must be durable) */
START_TEST(test_errno_fsync_at_open)
{
	struct syncguard_opts o;
	char err[256];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600), ret;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fallocate(fd, 0, 0, LUN_BYTES), 0);
	for (off_t off = 0; off < LUN_BYTES; off += sizeof(data))
		ck_assert_int_eq(pwrite(fd, data, sizeof(data), off),
				 (ssize_t)sizeof(data));
	close(fd);
	ck_assert_int_eq(syncguard_opts_parse("mode=plp", &o, err, 256), 0);
	arm(T_FSYNC, _i);
	ret = syncguard_lun_open(&lun, path, 9, &o, err, sizeof(err));
	disarm();
	ck_assert_int_eq(ret, -columns[_i].err);	/* fsync: never retried */
	lun.fd = -1;
	/* what the store held may be lost: its next LUN starts latched */
	ck_assert_int_eq(syncguard_lun_open(&lun, path, 9, &o, err,
					    sizeof(err)), 0);
	ck_assert_int_eq(syncguard_lun_latched(&lun), columns[_i].err);
}
END_TEST

/* a hole punch (UNMAP) changes metadata, which the flush after it makes
 * durable: its own failure fails the command, nothing else */
START_TEST(test_errno_punch)
{
	open_lun("mode=write-back");
	lun.thin = true;
	arm(T_PUNCH, _i);
	assert_answer(write_same10(0, 16, true), _i, "WRITE SAME(10) UNMAP");
	assert_latch(false, _i, "WRITE SAME(10) UNMAP");
}
END_TEST

/* no descriptor from the pool: BUSY before any I/O, nothing latched */
START_TEST(test_errno_pool_open)
{
	int err = columns[_i].err;
	struct syncguard_sense s;
	enum syncguard_reason r;

	open_lun("mode=write-through;write_sync=dsync");
	arm(T_OPEN, _i);
	r = write10(0, 8, false);
	disarm();
	assert_latch(false, _i, "WRITE(10) without a descriptor");
	s = syncguard_sense_of(r);
	if (retried_ok(_i))
		ck_assert_int_eq(r, SYNCGUARD_OK);
	else if (err == EMFILE || err == ENFILE || err == ENOMEM)
		ck_assert_uint_eq(s.status, 0x08);	/* BUSY */
	else
		assert_failed(r, err, "WRITE(10) without a descriptor");
	ck_assert_int_eq(write10(0, 8, false), SYNCGUARD_OK);
}
END_TEST

/* ---- the io_uring engine, by its calls into the core ---- */

/* Plan @cdb for the ring, carry out its write with pwritev2 (as the
 * kernel would), pass the completion through syncguard_sys.ring_result,
 * and finish it as glue/uring.c does: an RWF_DSYNC or plain
 * write is answered from its completion (syncguard_plan_done), a durable
 * one without RWF_DSYNC joins a group flush (syncguard_flush_done).
 * Returns the reason answered. */
static enum syncguard_reason ring_write(bool fua)
{
	uint8_t cdb[10] = { 0x2a, fua ? 0x08 : 0, 0, 0, 0, 0, 0, 0, 8, 0 };
	struct syncguard_req req = { cdb, 10, data, 8 * BS, NULL, 0 };
	struct syncguard_plan plan;
	struct iovec iov = { data, 8 * BS };
	unsigned int tries = 0;
	int fd, res, err;
	uint64_t covers;

	uint8_t *bounce = NULL;

	ck_assert_msg(syncguard_plan(&lun, &req, &plan), "not planned");
	fd = plan.dsync ? syncguard_direct_fd_get(&lun) :
	     plan.direct ? lun.dfd : lun.fd;
	ck_assert_int_ge(fd, 0);
	if (plan.direct)	/* the engine's aligned copy (prepare) */
		iov.iov_base = (void *)syncguard_direct_buf(&lun, data,
							    iov.iov_len, &bounce);
	do {	/* the engine re-queues a plain write's EINTR/EAGAIN */
		res = (int)pwritev2(fd, &iov, 1, 0, plan.dsync ? RWF_DSYNC : 0);
		res = syncguard_sys.ring_result(plan.dsync ?
			SYNCGUARD_CALL_DSYNC_WRITE : SYNCGUARD_CALL_WRITE, fd,
			res < 0 ? -errno : res);
	} while (res < 0 && !plan.dsync && syncguard_retry(-res, &tries));
	if (plan.dsync)
		syncguard_direct_fd_put(&lun, fd);
	free(bounce);
	err = res < 0 ? res : 0;
	if (err || plan.dsync || plan.persist != SYNCGUARD_PERSIST_DURABLE)
		return syncguard_plan_done(&lun, &plan, err);
	syncguard_plan_written(&lun, &plan);
	covers = syncguard_lun_dirty(&lun);
	res = fdatasync(lun.group_fd) ? -errno : 0;
	res = syncguard_sys.ring_result(SYNCGUARD_CALL_FLUSH, lun.group_fd, res);
	res = syncguard_flush_done(&lun, covers, res, 0, 1);
	return syncguard_plan_done(&lun, &plan, res);
}

START_TEST(test_errno_ring_write)
{
	open_lun("mode=write-back;write_sync=group");
	arm(T_RING_WRITE, _i);
	assert_answer(ring_write(false), _i, "ring WRITE(10)");
	assert_latch(false, _i, "ring WRITE(10)");
	disarm();
	assert_switch();
}
END_TEST

START_TEST(test_errno_ring_dsync_write)
{
	open_lun("mode=write-through;write_sync=dsync");
	ck_assert_msg(lun.async_dsync_ok, "no asynchronous RWF_DSYNC here");
	arm(T_RING_DSYNC, _i);
	assert_answer(ring_write(false), _i, "ring RWF_DSYNC WRITE(10)");
	assert_latch(true, _i, "ring RWF_DSYNC WRITE(10)");
}
END_TEST

START_TEST(test_errno_ring_flush)
{
	open_lun("mode=write-back;write_sync=group");
	arm(T_RING_FLUSH, _i);
	assert_answer(ring_write(true), _i, "ring FUA WRITE(10), group");
	assert_latch(true, _i, "ring FUA WRITE(10), group");
	disarm();
	assert_switch();
}
END_TEST

/* ---- short writes ---- */

static int short_left;

static ssize_t short_pwritev2(int fd, const struct iovec *iov, int cnt,
			      off_t off, int flags)
{
	struct iovec half = { iov[0].iov_base, iov[0].iov_len / 2 };

	(void)cnt;
	if (short_left < 0)
		return 0;	/* no progress at all */
	if (short_left && short_left-- && half.iov_len)
		return pwritev2(fd, &half, 1, off, flags);
	return pwritev2(fd, iov, 1, off, flags);
}

/* the rest of a short write is written; a write that makes no progress
 * fails as EIO would, in each kind of write */
START_TEST(test_errno_short_writes)
{
	static const char *const opts[] = {
		"mode=write-back;write_sync=group",
		"mode=write-through;write_sync=dsync", "mode=plp;direct=no",
	};

	for (int i = 0; i < 3; i++) {
		open_lun(opts[i]);
		syncguard_sys.pwritev2 = short_pwritev2;
		short_left = 3;
		ck_assert_int_eq(write10(0, 16, true), SYNCGUARD_OK);
		ck_assert_int_eq(read10(0, 16, false), SYNCGUARD_OK);
		ck_assert_mem_eq(back, data, 16 * BS);
		short_left = -1;
		assert_failed(write10(0, 16, true), EIO, opts[i]);
		short_left = 0;
		teardown();
		setup();
	}
}
END_TEST

/* ---- plp's write-out descriptor ---- */

/* the order of the calls: when each descriptor was opened, when the
 * data write came, and which descriptor wrote it out */
static struct {
	int seq, opened_at[1024], written_at, out_fd;
} order;

static int order_open(const char *p, int flags)
{
	int fd = open(p, flags);

	if (fd >= 0 && fd < 1024)
		order.opened_at[fd] = ++order.seq;
	return fd;
}

static ssize_t order_pwritev2(int fd, const struct iovec *iov, int cnt,
			      off_t off, int flags)
{
	order.written_at = ++order.seq;
	return pwritev2(fd, iov, cnt, off, flags);
}

static int order_sync_file_range(int fd, off_t off, off_t len,
				 unsigned int f)
{
	order.out_fd = fd;
	return sync_file_range(fd, off, len, f);
}

/* plp's buffered write is written out through a descriptor opened
 * before the data was written: one opened after it misses a writeback
 * error of that data that another descriptor already reported (errseq
 * samples at open), and the write would be answered GOOD while the
 * error latched only later.  The pool is empty here, so the write-out's
 * descriptor is a new one. */
START_TEST(test_errno_writeout_descriptor_first)
{
	open_lun("mode=plp;direct=no");
	memset(&order, 0, sizeof(order));
	syncguard_sys.open = order_open;
	syncguard_sys.pwritev2 = order_pwritev2;
	syncguard_sys.sync_file_range = order_sync_file_range;
	ck_assert_int_eq(write10(0, 8, false), SYNCGUARD_OK);
	ck_assert_int_gt(order.out_fd, 0);
	ck_assert_msg(order.opened_at[order.out_fd] &&
		      order.opened_at[order.out_fd] < order.written_at,
		      "write-out descriptor opened at %d, data written at %d",
		      order.opened_at[order.out_fd], order.written_at);
}
END_TEST

Suite *errno_suite(void)
{
	Suite *s = suite_create("errno");
	TCase *workers = tcase_create("workers");
	TCase *ring = tcase_create("ring");
	TCase *shorts = tcase_create("short");
	TCase *all[] = { workers, ring, shorts };

	for (int i = 0; i < 3; i++) {
		tcase_add_checked_fixture(all[i], setup, teardown);
		tcase_set_timeout(all[i], 120);
		suite_add_tcase(s, all[i]);
	}
	tcase_add_loop_test(workers, test_errno_plain_write, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_dsync_write, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_dsync_write_back, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_flush_sync_cache, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_flush_group, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_flush_wce_switch, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_flush_write_same_unmap, 0,
			    NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_writeout, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_fsync_at_open, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_punch, 0, NCOLUMNS);
	tcase_add_loop_test(workers, test_errno_pool_open, 0, NCOLUMNS);
	tcase_add_loop_test(ring, test_errno_ring_write, 0, NCOLUMNS);
	tcase_add_loop_test(ring, test_errno_ring_dsync_write, 0, NCOLUMNS);
	tcase_add_loop_test(ring, test_errno_ring_flush, 0, NCOLUMNS);
	tcase_add_test(shorts, test_errno_short_writes);
	tcase_add_test(shorts, test_errno_writeout_descriptor_first);
	return s;
}
