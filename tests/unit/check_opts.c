/* bsopts parsing: every key, every bad input, the messages users see. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "unit.h"

static struct syncguard_opts opts;
static char err[256];

static int parse(const char *s)
{
	memset(&opts, 0xa5, sizeof(opts));	/* defaults must be set */
	return syncguard_opts_parse(s, &opts, err, sizeof(err));
}

START_TEST(test_opts_defaults)
{
	ck_assert_int_eq(parse(NULL), 0);
	ck_assert_int_eq(opts.mode, SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(opts.engine, SYNCGUARD_ENGINE_AUTO);
	ck_assert_int_eq(opts.write_sync, SYNCGUARD_WRITE_SYNC_AUTO);
	ck_assert_int_eq(opts.direct, SYNCGUARD_DIRECT_AUTO);
	ck_assert(opts.alloc_check);
	ck_assert(!opts.allow_wce);
	ck_assert_int_eq(parse("mode=plp"), 0);	/* the rest: defaults */
	ck_assert_int_eq(opts.engine, SYNCGUARD_ENGINE_AUTO);
	ck_assert_int_eq(opts.direct, SYNCGUARD_DIRECT_AUTO);
	ck_assert(!opts.allow_wce);
	ck_assert_int_eq(parse(""), 0);
	ck_assert_int_eq(opts.mode, SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(parse(";;"), 0);
}
END_TEST

START_TEST(test_opts_modes)
{
	static const struct {
		const char *s;
		enum syncguard_mode m;
	} t[] = {
		{ "mode=write-through", SYNCGUARD_MODE_WRITE_THROUGH },
		{ "mode=write-back", SYNCGUARD_MODE_WRITE_BACK },
		{ "mode=plp", SYNCGUARD_MODE_PLP },
		{ "mode=plp;", SYNCGUARD_MODE_PLP },
		{ "alloc_check=no;mode=write-through", SYNCGUARD_MODE_WRITE_THROUGH },
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ck_assert_msg(parse(t[i].s) == 0, "%s: %s", t[i].s, err);
		ck_assert_int_eq(opts.mode, t[i].m);
	}
	ck_assert_str_eq(syncguard_mode_name(SYNCGUARD_MODE_PLP), "plp");
	ck_assert_str_eq(syncguard_mode_name(SYNCGUARD_MODE_WRITE_THROUGH),
			 "write-through");
}
END_TEST

START_TEST(test_opts_alloc_check)
{
	ck_assert_int_eq(parse("mode=plp;alloc_check=no"), 0);
	ck_assert(!opts.alloc_check);
	ck_assert_int_eq(parse("alloc_check=no:mode=plp"), 0);	/* ":" too */
	ck_assert(!opts.alloc_check);
	ck_assert_int_eq(opts.mode, SYNCGUARD_MODE_PLP);
	ck_assert_int_eq(parse("alloc_check=yes"), 0);
	ck_assert(opts.alloc_check);
	ck_assert_int_eq(parse("alloc_check=maybe"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "maybe"));
	ck_assert_ptr_nonnull(strstr(err, "yes or no"));
}
END_TEST

START_TEST(test_opts_write_sync)
{
	ck_assert_int_eq(parse(""), 0);
	ck_assert_int_eq(opts.write_sync, SYNCGUARD_WRITE_SYNC_AUTO);
	ck_assert_int_eq(parse("write_sync=group"), 0);
	ck_assert_int_eq(opts.write_sync, SYNCGUARD_WRITE_SYNC_GROUP);
	ck_assert_int_eq(parse("write_sync=dsync"), 0);
	ck_assert_int_eq(opts.write_sync, SYNCGUARD_WRITE_SYNC_DSYNC);
	ck_assert_int_eq(parse("write_sync=fast"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "auto, group or dsync"));
}
END_TEST

START_TEST(test_opts_unknown_key)
{
	ck_assert_int_eq(parse("mode=plp;cache=off"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unknown key 'cache'"));
	ck_assert_ptr_nonnull(strstr(err, "mode, alloc_check"));
}
END_TEST

START_TEST(test_opts_bad_value)
{
	ck_assert_int_eq(parse("mode=writeback"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "'writeback'"));
	ck_assert_ptr_nonnull(strstr(err, "write-through, write-back or plp"));
	ck_assert_int_eq(parse("mode="), -EINVAL);
	ck_assert_int_eq(parse("mode=WRITE-BACK"), -EINVAL);
}
END_TEST

START_TEST(test_opts_repeated_key)
{
	ck_assert_int_eq(parse("mode=plp;mode=write-through"), -EINVAL);
	ck_assert_str_eq(err, "bsopts: mode given twice");
}
END_TEST

START_TEST(test_opts_control_characters)
{
	ck_assert_int_eq(parse("mode=plp\nx"), -EINVAL);
	ck_assert_ptr_null(strchr(err, '\n'));	/* one log line */
	ck_assert_ptr_nonnull(strstr(err, "'plp?x'"));
	ck_assert_int_eq(parse("bad\tkey=1"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "'bad?key'"));
}
END_TEST

/* the mechanisms' switches: defaults auto, each value, a bad one named */
START_TEST(test_opts_mechanism_switches)
{
	ck_assert_int_eq(parse(""), 0);
	ck_assert_int_eq(opts.flush_batch, SYNCGUARD_FLUSH_BATCH_AUTO);
	ck_assert_int_eq(opts.sync_loop, SYNCGUARD_SYNCLOOP_AUTO);
	ck_assert_int_eq(parse("flush_batch=off;sync_loop=off"), 0);
	ck_assert_int_eq(opts.flush_batch, SYNCGUARD_FLUSH_BATCH_OFF);
	ck_assert_int_eq(opts.sync_loop, SYNCGUARD_SYNCLOOP_OFF);
	ck_assert_int_eq(parse("sync_loop=streak"), -EINVAL);
	ck_assert_int_eq(parse("flush_batch=on"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "flush_batch (use auto or off)"));
}
END_TEST

/* workers: auto takes tgtd's count within 32..256; a number is taken
 * as it is, within 1..256; nothing else */
START_TEST(test_opts_workers)
{
	static const char *const bad[] = { "0", "257", "-1", "+4", " 4", "4 ",
					   "0x10", "010", "", "many",
					   "99999999999999999999" };

	ck_assert_int_eq(parse(""), 0);
	ck_assert_uint_eq(opts.workers, 0);
	ck_assert_uint_eq(syncguard_workers(&opts, 16), 32);	/* tgt's default */
	ck_assert_uint_eq(syncguard_workers(&opts, 64), 64);	/* -t 64 */
	ck_assert_uint_eq(syncguard_workers(&opts, 0), 32);
	ck_assert_uint_eq(syncguard_workers(&opts, 1000), 256);	/* -t 1000 */
	ck_assert_int_eq(parse("workers=auto"), 0);
	ck_assert_uint_eq(syncguard_workers(&opts, 4), 32);
	ck_assert_int_eq(parse("workers=4"), 0);
	ck_assert_uint_eq(syncguard_workers(&opts, 64), 4);	/* as given */
	ck_assert_int_eq(parse("workers=256;mode=plp"), 0);
	ck_assert_uint_eq(syncguard_workers(&opts, 16), 256);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char s[64];

		snprintf(s, sizeof(s), "workers=%s", bad[i]);
		ck_assert_msg(parse(s) == -EINVAL, "%s accepted", s);
		ck_assert_ptr_nonnull(strstr(err, "workers (use auto or 1 to 256)"));
	}
}
END_TEST

START_TEST(test_opts_not_key_value)
{
	ck_assert_int_eq(parse("write-back"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not key=value"));
	ck_assert_int_eq(parse("=plp"), -EINVAL);
}
END_TEST

START_TEST(test_opts_help_lists_every_key)
{
	char buf[4096];
	size_t need = syncguard_opts_help(buf, sizeof(buf));

	ck_assert_uint_lt(need, sizeof(buf));
	ck_assert_ptr_nonnull(strstr(buf, "mode=<write-through, write-back or plp>"));
	ck_assert_ptr_nonnull(strstr(buf, "alloc_check=<yes or no>"));
	ck_assert_ptr_nonnull(strstr(buf, "allow_wce=<yes or no>"));
	ck_assert_ptr_nonnull(strstr(buf, "engine=<auto, threads or uring>"));
	ck_assert_ptr_nonnull(strstr(buf, "write_sync=<auto, group or dsync>"));
	ck_assert_ptr_nonnull(strstr(buf, "direct=<auto, yes or no>"));
	ck_assert_ptr_nonnull(strstr(buf, "flush_batch=<auto or off>"));
	ck_assert_ptr_nonnull(strstr(buf, "sync_loop=<auto or off>"));
	ck_assert_ptr_nonnull(strstr(buf, "workers=<auto or 1 to 256>"));
	/* a short buffer is truncated, not overrun */
	ck_assert_uint_eq(syncguard_opts_help(buf, 8), need);
	ck_assert_uint_eq(strlen(buf), 7);
}
END_TEST

Suite *opts_suite(void)
{
	Suite *s = suite_create("opts");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_opts_defaults);
	tcase_add_test(tc, test_opts_modes);
	tcase_add_test(tc, test_opts_alloc_check);
	tcase_add_test(tc, test_opts_write_sync);
	tcase_add_test(tc, test_opts_unknown_key);
	tcase_add_test(tc, test_opts_bad_value);
	tcase_add_test(tc, test_opts_not_key_value);
	tcase_add_test(tc, test_opts_repeated_key);
	tcase_add_test(tc, test_opts_control_characters);
	tcase_add_test(tc, test_opts_help_lists_every_key);
	tcase_add_test(tc, test_opts_mechanism_switches);
	tcase_add_test(tc, test_opts_workers);
	suite_add_tcase(s, tc);
	return s;
}
