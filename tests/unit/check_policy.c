/* The durability policy, cell by cell, and the invariant behind it. */
#include "core.h"
#include "unit.h"

#define WT SYNCGUARD_MODE_WRITE_THROUGH
#define WB SYNCGUARD_MODE_WRITE_BACK
#define PLP SYNCGUARD_MODE_PLP
#define C SYNCGUARD_PERSIST_CACHED
#define W SYNCGUARD_PERSIST_WRITTEN
#define D SYNCGUARD_PERSIST_DURABLE

static const struct {
	enum syncguard_mode mode;
	bool wce;
	enum syncguard_class class;
	bool flush_before;
	enum syncguard_persist persist;
} cells[] = {
	/* write-back, WCE=1: only FUA, SYNCHRONIZE CACHE and FUA reads cost */
	{ WB, 1, SYNCGUARD_CLASS_WRITE, 0, C },
	{ WB, 1, SYNCGUARD_CLASS_WRITE_FUA, 0, D },
	{ WB, 1, SYNCGUARD_CLASS_SYNC_CACHE, 1, C },
	{ WB, 1, SYNCGUARD_CLASS_READ, 0, C },
	{ WB, 1, SYNCGUARD_CLASS_READ_FUA, 1, C },
	{ WB, 1, SYNCGUARD_CLASS_UNMAP, 0, C },
	/* write-back after WCE=0: behaves as write-through */
	{ WB, 0, SYNCGUARD_CLASS_WRITE, 0, D },
	{ WB, 0, SYNCGUARD_CLASS_WRITE_FUA, 0, D },
	{ WB, 0, SYNCGUARD_CLASS_SYNC_CACHE, 0, C },
	{ WB, 0, SYNCGUARD_CLASS_READ_FUA, 0, C },
	{ WB, 0, SYNCGUARD_CLASS_UNMAP, 0, D },
	/* write-through: every write durable, flushes free */
	{ WT, 0, SYNCGUARD_CLASS_WRITE, 0, D },
	{ WT, 0, SYNCGUARD_CLASS_WRITE_FUA, 0, D },
	{ WT, 0, SYNCGUARD_CLASS_SYNC_CACHE, 0, C },
	{ WT, 0, SYNCGUARD_CLASS_READ_FUA, 0, C },
	/* write-through whose initiator turned WCE on (allow_wce=yes) */
	{ WT, 1, SYNCGUARD_CLASS_WRITE, 0, C },
	{ WT, 1, SYNCGUARD_CLASS_SYNC_CACHE, 1, C },
	/* plp: written to the device, never a device flush */
	{ PLP, 0, SYNCGUARD_CLASS_WRITE, 0, W },
	{ PLP, 0, SYNCGUARD_CLASS_WRITE_FUA, 0, W },
	{ PLP, 0, SYNCGUARD_CLASS_SYNC_CACHE, 0, C },
	{ PLP, 0, SYNCGUARD_CLASS_READ_FUA, 0, C },
	{ PLP, 0, SYNCGUARD_CLASS_UNMAP, 0, D },
	{ PLP, 1, SYNCGUARD_CLASS_WRITE, 0, W },	/* WCE ignored */
};

START_TEST(test_policy_cells)
{
	for (size_t i = 0; i < sizeof(cells) / sizeof(cells[0]); i++) {
		struct syncguard_action a = syncguard_policy(cells[i].mode,
			cells[i].wce, cells[i].class);

		ck_assert_msg(a.flush_before == cells[i].flush_before &&
			      a.persist == cells[i].persist,
			      "cell %zu: mode %s wce %d class %d: got flush %d "
			      "persist %d", i, syncguard_mode_name(cells[i].mode),
			      cells[i].wce, cells[i].class, a.flush_before,
			      a.persist);
	}
}
END_TEST

/* The contract's core: a LUN whose Caching page says WCE=0 never
 * completes a write that is still only in the host cache, whatever the
 * mode (the policy's wce argument is that bit). */
START_TEST(test_policy_wce0_never_volatile)
{
	enum syncguard_mode modes[] = { WT, WB, PLP };
	enum syncguard_class writes[] = { SYNCGUARD_CLASS_WRITE,
		SYNCGUARD_CLASS_WRITE_FUA, SYNCGUARD_CLASS_UNMAP };

	for (int m = 0; m < 3; m++)
		for (int c = 0; c < 3; c++)
			ck_assert_int_ne(syncguard_policy(modes[m], false,
				writes[c]).persist, C);
}
END_TEST

/* FUA is durable in every mode; only plp may skip the device flush. */
START_TEST(test_policy_fua_always_persists)
{
	enum syncguard_mode modes[] = { WT, WB, PLP };

	for (int m = 0; m < 3; m++)
		for (int wce = 0; wce <= 1; wce++) {
			enum syncguard_persist p = syncguard_policy(modes[m],
				wce, SYNCGUARD_CLASS_WRITE_FUA).persist;

			ck_assert_int_eq(p, modes[m] == PLP ? W : D);
		}
}
END_TEST

START_TEST(test_policy_reported_wce)
{
	ck_assert(syncguard_mode_wce(WB));
	ck_assert(!syncguard_mode_wce(WT));
	ck_assert(!syncguard_mode_wce(PLP));
	ck_assert(syncguard_mode_wce_changeable(WB, false));
	ck_assert(!syncguard_mode_wce_changeable(WT, false));
	ck_assert(!syncguard_mode_wce_changeable(PLP, false));
	ck_assert(syncguard_mode_wce_changeable(WT, true));
	ck_assert(syncguard_mode_wce_changeable(PLP, true));
	ck_assert(syncguard_policy_switch_flushes(true, false));
	ck_assert(!syncguard_policy_switch_flushes(false, true));
	ck_assert(!syncguard_policy_switch_flushes(true, true));
	ck_assert(syncguard_policy_close_flushes(WB, true));
	ck_assert(!syncguard_policy_close_flushes(WT, true));
	ck_assert(syncguard_policy_close_flushes(WT, false));
	ck_assert(!syncguard_policy_close_flushes(PLP, true));
	ck_assert(syncguard_policy_async_dsync_honoured(true, 0x65735546));
	ck_assert(syncguard_policy_async_dsync_honoured(false, 0xef53));
	ck_assert(!syncguard_policy_async_dsync_honoured(false, 0x65735546));
	/* cached pages dropped after an asynchronous O_DIRECT write: ext4,
	 * XFS; not a block device, FUSE, NFS or an unknown file system */
	ck_assert(syncguard_policy_async_direct_drops_cache(false, 0xef53));
	ck_assert(syncguard_policy_async_direct_drops_cache(false, 0x58465342));
	ck_assert(!syncguard_policy_async_direct_drops_cache(true, 0));
	ck_assert(!syncguard_policy_async_direct_drops_cache(false,
							      0x65735546));
	ck_assert(!syncguard_policy_async_direct_drops_cache(false, 0x6969));
	ck_assert(!syncguard_policy_async_direct_drops_cache(false, 0));
	/* ENOSPC a refusal: ext4, XFS, block devices; not FUSE, NFS,
	 * overlayfs, btrfs, or an unknown file system */
	ck_assert(syncguard_policy_enospc_refused(true, 0));
	ck_assert(syncguard_policy_enospc_refused(false, 0xef53));
	ck_assert(syncguard_policy_enospc_refused(false, 0x58465342));
	ck_assert(!syncguard_policy_enospc_refused(false, 0x65735546));
	ck_assert(!syncguard_policy_enospc_refused(false, 0x6969));
	ck_assert(!syncguard_policy_enospc_refused(false, 0x794c7630));
	ck_assert(!syncguard_policy_enospc_refused(false, 0x9123683e));
	ck_assert(!syncguard_policy_enospc_refused(false, 0));
}
END_TEST

START_TEST(test_policy_unknown_mode_is_safe)
{
	struct syncguard_action a = syncguard_policy((enum syncguard_mode)42,
		true, SYNCGUARD_CLASS_WRITE);

	ck_assert_int_eq(a.persist, D);
}
END_TEST

Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("decisions");

	tcase_add_test(tc, test_policy_cells);
	tcase_add_test(tc, test_policy_wce0_never_volatile);
	tcase_add_test(tc, test_policy_fua_always_persists);
	tcase_add_test(tc, test_policy_reported_wce);
	tcase_add_test(tc, test_policy_unknown_mode_is_safe);
	suite_add_tcase(s, tc);
	return s;
}
