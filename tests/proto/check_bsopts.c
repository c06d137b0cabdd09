/*
 * Bad input at LUN creation: tgtadm fails, tgtd logs one line naming
 * the problem, keeps running, and the LUN that was already there keeps
 * serving I/O.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define GOOD_LUN 1
#define BS 512u

enum path_kind { P_GOOD, P_SPARSE, P_DIR, P_MISSING, P_ODD_SIZE, P_CHARDEV,
		 P_IN_USE, P_IMMUTABLE };

static char good_path[700];	/* the file behind GOOD_LUN */

static const struct {
	const char *bsopts;
	enum path_kind path;
	const char *log;	/* the line tgtd must log */
} bad[] = {
	{ "mode=writeback", P_GOOD,
	  "bsopts: bad value 'writeback' for mode (use write-through, "
	  "write-back or plp)" },
	{ "mode=write-back;cache=off", P_GOOD,
	  "bsopts: unknown key 'cache' (known: mode, alloc_check, allow_wce, "
	  "engine, write_sync, direct, flush_batch, sync_loop, state_dir, "
	  "workers)" },
	{ "write-back", P_GOOD, "bsopts: 'write-back' is not key=value" },
	{ "mode=write-back;state_dir=rel", P_GOOD,
	  "bad value 'rel' for state_dir (use an existing directory: an "
	  "absolute path of at most 255" },
	{ "alloc_check=perhaps", P_GOOD,
	  "bad value 'perhaps' for alloc_check" },
	{ "mode=write-through;direct=maybe", P_GOOD,
	  "bad value 'maybe' for direct (use auto, yes or no)" },
	{ "mode=write-back;sync_loop=streak", P_GOOD,
	  "bad value 'streak' for sync_loop (use auto or off)" },
	{ "mode=write-back;flush_batch=no", P_GOOD,
	  "bad value 'no' for flush_batch (use auto or off)" },
	{ "mode=write-through;workers=0", P_GOOD,
	  "bad value '0' for workers (use auto or 1 to 256)" },
	{ "mode=write-back", P_DIR, ": is a directory" },
	{ "mode=write-back", P_MISSING, "missing.img: No such file or directory" },
	{ "mode=write-back", P_ODD_SIZE,
	  "size 1000 bytes is not a positive multiple of the 512-byte" },
	{ "mode=write-through", P_CHARDEV,
	  "/dev/null: not a regular file or block device" },
	{ "mode=plp", P_SPARSE, "mode=plp needs every block allocated" },
	{ "mode=write-through", P_IN_USE, "already exported by another syncguard LUN" },
	{ "mode=write-back", P_IMMUTABLE, "cannot open read-write" },
};
#define NBAD (int)(sizeof(bad) / sizeof(bad[0]))

static void setup(void)
{
	proto_tgtd_start();
	snprintf(good_path, sizeof(good_path), "%s",
		 proto_file("good.img", 4 << 20, false));
	if (proto_add_lun(GOOD_LUN, good_path, "mode=write-back", 0)) {
		proto_tgtd_stop();
		exit(EXIT_FAILURE);
	}
}

static void teardown(void)
{
	proto_tgtd_stop();
}

static const char *make_path(enum path_kind kind)
{
	const char *p;

	switch (kind) {
	case P_GOOD: return proto_file("other.img", 4 << 20, false);
	case P_SPARSE: return proto_file("sparse.img", 4 << 20, true);
	case P_DIR: return proto_dir();
	case P_MISSING: return "/nonexistent/missing.img";
	case P_ODD_SIZE: return proto_file("odd.img", 1000, false);
	case P_CHARDEV: return "/dev/null";
	case P_IN_USE: return good_path;
	case P_IMMUTABLE:
		p = proto_file("immutable.img", 4 << 20, false);
		return proto_sh("chattr +i '%s' 2>/dev/null", p) ? NULL : p;
	}
	return NULL;
}

static void assert_good_lun_serves(void)
{
	struct iscsi_context *iscsi = proto_connect(GOOD_LUN);
	unsigned char out[BS];
	struct scsi_task *t;

	memset(out, 0x3c, sizeof(out));
	proto_assert_good(iscsi_write10_sync(iscsi, GOOD_LUN, 7, out, BS, BS,
					     0, 0, 1, 0, 0), "WRITE(10)", false);
	t = iscsi_read10_sync(iscsi, GOOD_LUN, 7, BS, BS, 0, 0, 0, 0, 0);
	proto_assert_good(t, "READ(10)", true);
	ck_assert_mem_eq(t->datain.data, out, BS);
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
}

START_TEST(test_bsopts_bad_input_rejected)
{
	const char *path = make_path(bad[_i].path);
	int lun = 10 + _i;

	ck_assert_msg(path != NULL, "case %d: cannot make its path", _i);
	ck_assert_msg(proto_add_lun(lun, path, bad[_i].bsopts, 0) != 0,
		      "LUN %d (%s on %s) was created", lun, bad[_i].bsopts,
		      path);
	if (bad[_i].path == P_IMMUTABLE)
		proto_sh("chattr -i '%s'", path);
	ck_assert_msg(proto_log_has(bad[_i].log), "tgtd.log lacks \"%s\"",
		      bad[_i].log);
	ck_assert(proto_tgtd_alive());
	assert_good_lun_serves();
}
END_TEST

START_TEST(test_bsopts_good_after_bad)
{
	/* the same LUN number works once the input is right */
	ck_assert_int_eq(proto_add_lun(10, proto_file("fine.img", 4 << 20,
				       false), "mode=write-through", 0), 0);
	ck_assert_int_eq(proto_del_lun(10), 0);
}
END_TEST

/* tgt splits --bsopts on commas and drops what follows without a word:
 * tgtd.log shows what syncguard got (bs_syncguard_init) */
START_TEST(test_bsopts_logged_as_received)
{
	ck_assert_int_eq(proto_add_lun(10, proto_file("fine.img", 4 << 20,
				       false), "mode=write-through,direct=no",
				       0), 0);
	ck_assert(proto_log_has("lun 10: bsopts \"mode=write-through\" (as "
				"tgt passed them: it drops anything after a "
				"',')"));
	ck_assert_int_eq(proto_del_lun(10), 0);
}
END_TEST

/* tgtd.log lines of LUNs opened with @n workers */
static int workers_logged(long long n)
{
	char line[64];

	snprintf(line, sizeof(line), ", %lld workers, writes ", n);
	return proto_log_count(line);
}

/* bsopts workers: a LUN gets that many worker threads, and
 * with auto tgtd's --nr_iothreads (16 here) within 32..256, as its
 * tgtd.log line says; deleting the LUN ends them */
START_TEST(test_bsopts_workers)
{
	static const struct { const char *bsopts; long long threads; } t[] = {
		{ "mode=write-through;workers=3", 3 },
		{ "mode=write-through", 32 },
		{ "mode=plp;workers=40", 40 },
	};
	long long before = proto_tgtd_threads();
	int logged[3];

	ck_assert_int_gt(before, 0);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		logged[i] = workers_logged(t[i].threads);
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ck_assert_int_eq(proto_add_lun(10, proto_file("workers.img",
					       4 << 20, false), t[i].bsopts, 0), 0);
		ck_assert_msg(proto_tgtd_threads() == before + t[i].threads,
			      "%s: %lld threads, %lld before", t[i].bsopts,
			      proto_tgtd_threads(), before);
		ck_assert_msg(workers_logged(t[i].threads) == ++logged[i],
			      "%s: tgtd.log lacks \", %lld workers, writes \"",
			      t[i].bsopts, t[i].threads);
		ck_assert_int_eq(proto_del_lun(10), 0);
		ck_assert_int_eq(proto_tgtd_threads(), before);
	}
}
END_TEST

/* An unwritable file for root needs chattr +i (ext2/3/4, xfs, btrfs). */
static bool can_make_immutable(void)
{
	const char *probe = "build/.chattr-probe";
	bool ok;

	if (proto_sh("touch %s && chattr +i %s 2>/dev/null", probe, probe))
		return false;
	ok = proto_sh("chattr -i %s && rm -f %s", probe, probe) == 0;
	return ok;
}

Suite *bsopts_suite(void)
{
	Suite *s = suite_create("bsopts");
	TCase *tc = tcase_create("bad-input");
	int nbad = NBAD;

	if (!can_make_immutable()) {
		test_left_out("test_bsopts_bad_input_rejected (its unwritable-"
			      "file case)",
			      false, "chattr +i does not work on build/'s "
			      "file system");
		nbad--;		/* P_IMMUTABLE is the last case */
	}
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_bsopts_bad_input_rejected, 0, nbad);
	tcase_add_test(tc, test_bsopts_good_after_bad);
	tcase_add_test(tc, test_bsopts_logged_as_received);
	tcase_add_test(tc, test_bsopts_workers);
	suite_add_tcase(s, tc);
	return s;
}
