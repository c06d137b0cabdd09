/*
 * Failures from a volatile cache we did not write: nbdkit's cache
 * filter (cache=writeback) keeps writes in memory until a flush, and
 * its error filter, under it, fails the cache's write-back to the image
 * with an errno the NBD protocol carries (EIO, ENOSPC, ENOMEM, EPERM).
 * nbdfuse exports it as a file, a write-back LUN stands on that, and the
 * errno reaches the module from below, through FUSE's fsync, where no
 * code of ours can turn it into something else.  The answers come from
 * the rule for every failing call (core/policy.c): the SYNCHRONIZE CACHE
 * whose flush failed gets the errno's sense, and the LUN stays latched
 * after the cache works again; on both engines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

#define BS 512u

/* one nbdkit per errno (its error filter's errno is fixed at start) */
static const struct {
	const char *name;
	int key, ascq;		/* the sense the table gives it */
} errs[] = {
	{ "EIO", SCSI_SENSE_MEDIUM_ERROR, 0x0c00 },
	{ "ENOSPC", SCSI_SENSE_DATA_PROTECTION, 0x2707 },
	{ "ENOMEM", SCSI_SENSE_MEDIUM_ERROR, 0x0c00 },
	{ "EPERM", SCSI_SENSE_DATA_PROTECTION, 0x2700 },
};
#define NERRS (int)(sizeof(errs) / sizeof(errs[0]))

static char base[700];

/* the files of nbdkit @i: its directory, mount point, disk, trigger */
static const char *nbd_path(int i, const char *what)
{
	static char p[16][800];	/* one call may use many */
	static int next;
	char *buf = p[next++ % 16];

	snprintf(buf, 800, "%s/%s%s%s", base, errs[i].name, what[0] ? "/" : "",
		 what);
	return buf;
}

static void stop_all(void)
{
	for (int i = 0; i < NERRS; i++)
		proto_sh("fusermount3 -u -z '%s' 2>/dev/null; kill $(cat '%s' "
			 "2>/dev/null) 2>/dev/null; true", nbd_path(i, "mnt"),
			 nbd_path(i, "pid"));
}

static void setup(void)
{
	proto_prepare();
	snprintf(base, sizeof(base), "%s/nbd", proto_dir());
	for (int i = 0; i < NERRS; i++) {
		if (proto_sh("mkdir -p '%s' && truncate -s 16M '%s' && nbdkit -U "
			     "'%s' -P '%s' --filter=cache --filter=error file '%s' "
			     "cache=writeback error-pwrite=%s error-pwrite-rate=1 "
			     "error-pwrite-file='%s' && nbdfuse '%s/disk.img' --unix "
			     "'%s' 2>>'%s' & for n in $(seq 100); do [ -e "
			     "'%s/disk.img' ] && exit 0; sleep 0.05; done; exit 1",
			     nbd_path(i, "mnt"), nbd_path(i, "img"),
			     nbd_path(i, "sock"), nbd_path(i, "pid"),
			     nbd_path(i, "img"), errs[i].name, nbd_path(i, "fail"),
			     nbd_path(i, "mnt"), nbd_path(i, "sock"),
			     nbd_path(i, "log"), nbd_path(i, "mnt"))) {
			fprintf(stderr, "nbdkit: nbdkit or nbdfuse did not start\n");
			stop_all();
			exit(EXIT_FAILURE);
		}
	}
	proto_tgtd_start();	/* after the mounts: see proto_prepare() */
}

static void teardown(void)
{
	stop_all();
	proto_tgtd_stop();
}

static void fresh_state(void)
{
	ck_assert_int_eq(proto_del_left_luns(0), 0);
	ck_assert_int_eq(proto_clear_latches(), 0);
	for (int i = 0; i < NERRS; i++)
		unlink(nbd_path(i, "fail"));
}

static struct scsi_task *write_lba(struct iscsi_context *iscsi, int lun,
				   uint32_t lba)
{
	static unsigned char out[BS * 8];

	memset(out, (int)lba + 1, sizeof(out));
	return iscsi_write10_sync(iscsi, lun, lba, out, sizeof(out), BS, 0, 0,
				  0, 0, 0);
}

static const char *const engines[] = { "mode=write-back;engine=threads",
				       "mode=write-back;engine=uring" };

START_TEST(test_nbdkit_flush_errno)
{
	int e = _i / 2;
	char disk[800];
	struct iscsi_context *iscsi;

	snprintf(disk, sizeof(disk), "%s/disk.img", nbd_path(e, "mnt"));
	ck_assert_int_eq(proto_add_lun(1, disk, engines[_i % 2], 0), 0);
	iscsi = proto_connect(1);
	proto_assert_good(write_lba(iscsi, 1, 0), "WRITE(10)", false);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10) while nbdkit writes back", false);
	for (uint32_t lba = 8; lba < 64; lba += 8)
		proto_assert_good(write_lba(iscsi, 1, lba), "WRITE(10)", false);
	ck_assert_int_eq(proto_sh("touch '%s'", nbd_path(e, "fail")), 0);
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			   errs[e].key, errs[e].ascq, errs[e].name);
	ck_assert_int_eq(unlink(nbd_path(e, "fail")), 0);
	/* nbdkit writes back again, but what it dropped is gone */
	proto_assert_sense(iscsi_synchronizecache10_sync(iscsi, 1, 0, 0, 0, 0),
			   errs[e].key, errs[e].ascq, "SYNCHRONIZE CACHE(10) after it");
	iscsi_destroy_context(iscsi);
	ck_assert_int_eq(proto_del_lun(1), 0);
}
END_TEST

Suite *nbdkit_suite(void)
{
	Suite *s = suite_create("nbdkit");
	TCase *tc = tcase_create("cache-filter");

	if (proto_sh("{ command -v nbdkit && command -v nbdfuse; } >/dev/null && "
		     "[ -w /dev/fuse ]") != 0) {
		test_left_out("tests/proto/check_nbdkit.c:cache-filter", true,
			      "needs nbdkit, nbdfuse (packages nbdkit, "
			      "libnbd-bin) and /dev/fuse");
		return s;
	}
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, fresh_state, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_nbdkit_flush_errno, 0, 2 * NERRS);
	suite_add_tcase(s, tc);
	return s;
}
