/*
 * syncguard_plan(): which commands an asynchronous engine may run as one
 * plain read or write, with what durability -- and the WCE switch that
 * must wait for cached writes planned before it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"
#include "unit.h"

static struct syncguard_lun lun;
static char dir[] = "build/unit.XXXXXX";
static char path[64];
static uint8_t buf[8192] __attribute__((aligned(4096)));

static void open_mode(enum syncguard_mode mode)
{
	struct syncguard_opts o = { .mode = mode, .alloc_check = true };
	static uint8_t zero[1 << 16];
	char err[256];
	int fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/lun.img", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	for (int i = 0; i < 64; i++)	/* 4 MiB: two 2 MiB granules */
		ck_assert_int_eq(write(fd, zero, sizeof(zero)), sizeof(zero));
	fsync(fd);
	close(fd);
	ck_assert_msg(syncguard_lun_open(&lun, path, 9, &o, err, sizeof(err)) == 0,
		      "%s", err);
	syncguard_lun_set_wce(&lun, syncguard_mode_wce(mode));
}

static void teardown(void)
{
	syncguard_lun_close(&lun);
	unlink(path);
	rmdir(dir);
}

static bool plan(uint8_t op, bool fua, uint32_t lba, uint16_t n,
		 uint32_t len, struct syncguard_plan *p)
{
	uint8_t cdb[10] = { op, fua ? 0x08 : 0, lba >> 24, lba >> 16, lba >> 8,
			    lba, 0, n >> 8, n, 0 };
	struct syncguard_req req = { cdb, 10, buf, op == 0x2a ? len : 0,
				     buf, op == 0x28 ? len : 0 };

	return syncguard_plan(&lun, &req, p);
}

/* write-back, direct=auto, ext4: a FUA write goes O_DIRECT and holds its
 * granule (2 MiB, the largest folio on x86-64) against page-cache writes,
 * which wait on a worker (core/mix.c) */
static void plan_write_back_fua(void)
{
	struct syncguard_plan p, q, r;
	uint32_t g = 1u << (lun.mix.granule_shift - 9);	/* in blocks */

	ck_assert(lun.mix.on && !lun.direct_io);
	ck_assert_uint_eq(lun.stats->direct_io, 2);
	ck_assert_uint_eq(lun.mix.granule_shift, 21);
	ck_assert(plan(0x2a, true, 8, 8, 4096, &p));
	ck_assert(p.direct && p.dsync && !p.cached_ref);
	ck_assert_int_eq(p.mix, SYNCGUARD_MIX_DIRECT);
	ck_assert(!plan(0x2a, false, 15, 1, 512, &q));	/* its page */
	ck_assert(!plan(0x2a, false, g - 1, 1, 512, &q)); /* its granule */
	ck_assert(plan(0x2a, false, g, 1, 512, &q));	/* the next one */
	ck_assert(!q.direct);
	ck_assert_int_eq(q.mix, SYNCGUARD_MIX_CACHED);
	/* a FUA write there now: the page cache's RWF_DSYNC, on a worker */
	ck_assert(!plan(0x2a, true, g + 1, 1, 512, &r));
	syncguard_plan_done(&lun, &q, 0);
	ck_assert_int_eq(q.mix, SYNCGUARD_MIX_NONE);
	syncguard_plan_done(&lun, &p, 0);
	ck_assert(plan(0x2a, false, 15, 1, 512, &q));	/* free again */
	syncguard_plan_done(&lun, &q, 0);
	ck_assert(plan(0x2a, true, g, 1, 512, &r));	/* O_DIRECT again */
	ck_assert(r.direct);
	syncguard_plan_cancel(&lun, &r);		/* releases it */
	ck_assert(plan(0x2a, false, g, 1, 512, &q));
	syncguard_plan_cancel(&lun, &q);
}

START_TEST(test_plan_write_back)
{
	struct syncguard_plan p;

	open_mode(SYNCGUARD_MODE_WRITE_BACK);
	/* it starts dirty (an earlier tgtd's writes): flushed, it is clean */
	ck_assert(!syncguard_lun_clean(&lun));
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	ck_assert(syncguard_lun_clean(&lun));
	ck_assert(plan(0x2a, false, 8, 8, 4096, &p));
	ck_assert_int_eq(p.persist, SYNCGUARD_PERSIST_CACHED);
	ck_assert(p.cached_ref);
	ck_assert_uint_eq(p.off, 4096);
	ck_assert_uint_eq(p.len, 4096);
	ck_assert_int_eq(lun.async_cached, 1);
	/* an engine that cannot carry it out hands it back */
	ck_assert_uint_eq(lun.stats->writes, 1);
	syncguard_plan_cancel(&lun, &p);
	ck_assert_int_eq(lun.async_cached, 0);
	ck_assert_uint_eq(lun.stats->writes, 0);
	ck_assert(syncguard_lun_clean(&lun));	/* nothing was written */
	ck_assert(plan(0x2a, false, 8, 8, 4096, &p));
	ck_assert_int_eq(lun.async_cached, 1);
	syncguard_plan_done(&lun, &p, 0);
	ck_assert_int_eq(lun.async_cached, 0);
	ck_assert(!syncguard_lun_clean(&lun));	/* it is dirty now */
	/* FUA under write_sync=auto is an RWF_DSYNC write: O_DIRECT where
	 * the file system honours that asynchronously, else a worker's */
	if (lun.async_dsync_ok)
		plan_write_back_fua();
	else
		ck_assert(!plan(0x2a, true, 8, 8, 4096, &p));
	ck_assert_int_eq(lun.async_cached, 0);
	/* FUA read with dirty data: a flush first, on a worker */
	ck_assert(!plan(0x28, true, 0, 1, 512, &p));
	ck_assert_int_eq(syncguard_lun_flush(&lun, true), 0);
	ck_assert(plan(0x28, true, 0, 1, 512, &p));	/* clean now */
	/* beyond the capacity: the worker reports it */
	ck_assert(!plan(0x2a, false, 8192, 1, 512, &p));
	/* Data-Out ending inside a block: the worker refuses it; one
	 * whole block of two is a plain write of that block */
	ck_assert(!plan(0x2a, false, 8, 2, 700, &p));
	ck_assert_int_eq(lun.async_cached, 0);
	ck_assert(plan(0x2a, false, 8, 2, 512, &p));
	ck_assert_uint_eq(p.len, 512);
	syncguard_plan_done(&lun, &p, 0);
	ck_assert_uint_eq(lun.stats->writes, lun.async_dsync_ok ? 4 : 2);
	ck_assert_uint_eq(lun.stats->reads, 1);
}
END_TEST

START_TEST(test_plan_write_through_and_plp)
{
	struct syncguard_plan p;
	bool scored;

	open_mode(SYNCGUARD_MODE_WRITE_THROUGH);
	/* write-through writes go O_DIRECT (direct=auto), and a durable
	 * one is RWF_DSYNC on it while the trial says so, on the ring */
	ck_assert(lun.direct_io);
	ck_assert_uint_eq(lun.stats->direct_io, 1);	/* syncguard-stat shows it */
	if (lun.async_dsync_ok) {		/* ext4, xfs */
		ck_assert(plan(0x2a, false, 0, 8, 4096, &p));
		ck_assert_int_eq(p.persist, SYNCGUARD_PERSIST_DURABLE);
		ck_assert(p.direct && p.dsync);
		ck_assert(!p.cached_ref);
		ck_assert_uint_eq(lun.durable_inflight, 1);
		syncguard_plan_done(&lun, &p, 0);
	} else {				/* a worker's pwritev2 */
		ck_assert(!plan(0x2a, false, 0, 8, 4096, &p));
	}
	ck_assert_uint_eq(lun.durable_inflight, 0);
	lun.sync_trial.arm = 1;			/* group commit measured faster */
	syncguard_durable_begin(&lun);		/* and another durable write is
						 * in flight (a worker's) */
	ck_assert(plan(0x2a, false, 0, 8, 4096, &p));
	ck_assert(p.direct && !p.dsync);	/* O_DIRECT, then a group flush */
	ck_assert_uint_eq(lun.durable_inflight, 2);
	syncguard_plan_cancel(&lun, &p);	/* handed back: uncounted */
	ck_assert_uint_eq(lun.durable_inflight, 1);
	ck_assert(plan(0x2a, false, 0, 8, 4096, &p));
	syncguard_plan_written(&lun, &p);	/* waiting for its flush: */
	ck_assert_uint_eq(lun.durable_inflight, 2);	/* still counted */
	syncguard_plan_done(&lun, &p, 0);
	syncguard_durable_end(&lun);
	ck_assert_uint_eq(lun.durable_inflight, 0);
	/* alone, it cannot share a flush: RWF_DSYNC whatever the trial */
	syncguard_durable_begin(&lun);
	ck_assert(syncguard_use_dsync(&lun, &scored));
	ck_assert(!scored);		/* a lone one: it starts no epoch */
	syncguard_durable_end(&lun);
	lun.sync_trial.arm = 0;
	ck_assert(!plan(0x2a, false, 0, 8, 1000, &p));	/* not aligned: the
							 * worker, RWF_DSYNC */
	syncguard_latch(&lun, 5);
	ck_assert(!plan(0x2a, false, 0, 8, 4096, &p));	/* latched: worker */
	teardown();
	strcpy(dir, "build/unit.XXXXXX");
	open_mode(SYNCGUARD_MODE_PLP);
	ck_assert(plan(0x2a, false, 0, 8, 4096, &p));
	ck_assert_int_eq(p.persist, SYNCGUARD_PERSIST_WRITTEN);
	ck_assert(p.direct);
	ck_assert(!plan(0x2a, false, 0, 8, 1000, &p));	/* not for O_DIRECT */
}
END_TEST

static volatile int switched;

static void *switch_wce(void *arg)
{
	(void)arg;
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, false), 0);
	switched = 1;
	return NULL;
}

/* A switch to WCE=0 waits for a cached write planned under WCE=1, so
 * its flush covers it. */
START_TEST(test_plan_wce_switch_waits)
{
	struct syncguard_plan p;
	pthread_t t;

	open_mode(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert(plan(0x2a, false, 0, 8, 4096, &p));
	pthread_create(&t, NULL, switch_wce, NULL);
	usleep(50000);
	ck_assert_int_eq(switched, 0);		/* still waiting */
	ck_assert(!syncguard_lun_wce(&lun));	/* new writes are durable */
	syncguard_plan_done(&lun, &p, 0);	/* the write landed */
	pthread_join(t, NULL);
	ck_assert_int_eq(switched, 1);
	ck_assert(syncguard_lun_clean(&lun));	/* and was flushed */
}
END_TEST

static volatile int caw_done;

static void *compare_and_write_block_0(void *arg)
{
	static uint8_t cdb[16] = { 0x89, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				   1, 0, 0 };
	static uint8_t out[1024];	/* compare zeroes, write zeroes */
	struct syncguard_req req = { cdb, 16, out, sizeof(out), NULL, 0 };
	struct syncguard_result res;

	(void)arg;
	syncguard_execute(&lun, &req, &res);
	ck_assert_int_eq(res.reason, SYNCGUARD_OK);
	caw_done = 1;
	return NULL;
}

/* COMPARE AND WRITE is atomic against writes an asynchronous engine
 * planned too: it waits for the ones planned before it, and while it
 * runs new ones go to the workers (which wait on write_lock) */
START_TEST(test_plan_compare_and_write_alone)
{
	struct syncguard_plan p, q;
	pthread_t t;

	open_mode(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert(plan(0x2a, false, 0, 8, 4096, &p));	/* in flight */
	pthread_create(&t, NULL, compare_and_write_block_0, NULL);
	usleep(50000);
	ck_assert_int_eq(caw_done, 0);		/* waits for it */
	ck_assert(!plan(0x2a, false, 16, 1, 512, &q));	/* to a worker */
	ck_assert_int_eq(lun.async_writes, 1);
	syncguard_plan_done(&lun, &p, 0);	/* the write landed */
	pthread_join(t, NULL);
	ck_assert_int_eq(caw_done, 1);
	ck_assert_int_eq(lun.async_writes, 0);
	ck_assert(plan(0x2a, false, 16, 1, 512, &q));	/* here again */
	syncguard_plan_cancel(&lun, &q);
	ck_assert_int_eq(lun.async_writes, 0);
}
END_TEST

/* WCE 0 -> 1 takes no lock: tgtd's event thread runs it for MODE
 * SELECT, and a worker's write that holds write_lock may be waiting for
 * that thread's O_DIRECT writes (core/mix.c): a lock there hangs tgtd */
START_TEST(test_wce_on_takes_no_lock)
{
	open_mode(SYNCGUARD_MODE_WRITE_BACK);
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, false), 0);
	ck_assert(!syncguard_lun_wce(&lun));
	pthread_rwlock_rdlock(&lun.write_lock);	/* a worker's write */
	ck_assert_int_eq(syncguard_lun_set_wce(&lun, true), 0);
	ck_assert(syncguard_lun_wce(&lun));
	pthread_rwlock_unlock(&lun.write_lock);
}
END_TEST

static struct syncguard_mix mix;
static volatile int waited;

static uint64_t G;	/* the granule, bytes */

static void *wait_cached(void *arg)
{
	(void)arg;
	syncguard_mix_wait(&mix, G, 512);
	waited = 1;
	return NULL;
}

/* The claims of core/mix.c: kinds exclude each other granule by granule
 * (the largest folio, 2 MiB on x86-64), never themselves; a page-cache
 * write waits for O_DIRECT ones and keeps new ones off its granules
 * while it waits. */
START_TEST(test_mix_claims)
{
	uint64_t wide;
	pthread_t t;

	ck_assert_int_eq(syncguard_mix_init(&mix, true), 0);
	ck_assert_uint_eq(mix.granule_shift, 21);
	G = 1ull << mix.granule_shift;
	wide = (uint64_t)SYNCGUARD_MIX_SLOTS * G;
	ck_assert(syncguard_mix_try(&mix, SYNCGUARD_MIX_DIRECT, G, 512));
	/* another page of the same granule (of a folio, maybe) */
	ck_assert(!syncguard_mix_try(&mix, SYNCGUARD_MIX_CACHED, 2 * G - 512, 512));
	ck_assert(syncguard_mix_try(&mix, SYNCGUARD_MIX_CACHED, 2 * G, 512));
	ck_assert(!syncguard_mix_try(&mix, SYNCGUARD_MIX_DIRECT, G, G + 512));
	ck_assert(syncguard_mix_try(&mix, SYNCGUARD_MIX_DIRECT, G, G));
	/* a range wider than the slots meets every granule */
	ck_assert(!syncguard_mix_try(&mix, SYNCGUARD_MIX_CACHED, 1ull << 40, wide));
	ck_assert(syncguard_mix_try(&mix, SYNCGUARD_MIX_CACHED, 0, 0));
	pthread_create(&t, NULL, wait_cached, NULL);
	usleep(50000);
	ck_assert_int_eq(waited, 0);
	ck_assert(!syncguard_mix_try(&mix, SYNCGUARD_MIX_DIRECT, G, 512));
	syncguard_mix_end(&mix, SYNCGUARD_MIX_DIRECT, G, 512);
	usleep(50000);
	ck_assert_int_eq(waited, 0);		/* the second still holds it */
	syncguard_mix_end(&mix, SYNCGUARD_MIX_DIRECT, G, G);
	pthread_join(t, NULL);
	ck_assert_int_eq(waited, 1);
	syncguard_mix_end(&mix, SYNCGUARD_MIX_CACHED, G, 512);
	syncguard_mix_end(&mix, SYNCGUARD_MIX_CACHED, 2 * G, 512);
	ck_assert(syncguard_mix_try(&mix, SYNCGUARD_MIX_DIRECT, 0, 4 * G));
	syncguard_mix_end(&mix, SYNCGUARD_MIX_DIRECT, 0, 4 * G);
	syncguard_mix_destroy(&mix);
}
END_TEST

Suite *plan_suite(void)
{
	Suite *s = suite_create("plan");
	TCase *tc = tcase_create("async");

	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, test_plan_write_back);
	tcase_add_test(tc, test_plan_write_through_and_plp);
	tcase_add_test(tc, test_plan_wce_switch_waits);
	tcase_add_test(tc, test_wce_on_takes_no_lock);
	tcase_add_test(tc, test_plan_compare_and_write_alone);
	suite_add_tcase(s, tc);
	tc = tcase_create("mix");
	tcase_add_test(tc, test_mix_claims);
	suite_add_tcase(s, tc);
	return s;
}
