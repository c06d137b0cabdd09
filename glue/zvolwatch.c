/*
 * The zvol watch: a LUN on a ZFS zvol (or on a loop device or a file
 * system over one) latches when a dataset under it is set to a sync
 * property its mode refuses (core/policy.c, syncguard_policy_zvol), as
 * the mount watch's other checks do (glue/watch.c).
 *
 * Reading the property means running zfs get (core/stack.c), which on a
 * suspended pool may not answer for seconds, or at all.  So each LUN's
 * datasets are read on a thread of the LUN's own, never on tgtd's event
 * thread, whose LUNs, logins and tgtadm would stop with it, nor on one
 * thread for every LUN, where one pool's silent zfs would hide every
 * other pool's changes (test_blockdev_zvol,
 * test_blockdev_zvol_silent_pool).  The thread reads them
 * every ZVOL_RECHECK_S seconds and keeps what it read; a change wakes
 * the event thread, which judges it.  Each zfs get has 5 s, then is
 * killed; one that does not die is left behind, and no other for its
 * pool starts until it has (core/stack.c).  A LUN that closes while
 * its thread waits for zfs leaves the thread to end by itself (detached,
 * holding a reference), and tgtd never waits for it.  A dataset whose
 * zfs get has not answered (or failed) for ZVOL_SILENT_S is logged, once
 * until it answers again.
 *
 * A zvol's dataset is looked up by its device each round (zfs rename
 * moves its /dev/zvol link), and the watch reads it under the name it
 * has now: the old name may since be another dataset's.  A zvol that no
 * link names and whose dataset zfs get does not find, ZVOL_MISSING_ROUNDS
 * rounds in a row (destroyed), latches the LUN: its sync property could
 * be set to disabled unseen (test_blockdev_zvol_renamed).  A ZFS file
 * system's dataset is read by the name it had at open; renamed, it is
 * logged as silent after ZVOL_SILENT_S.
 *
 * Layer: used by watch.c and bs_syncguard.c; uses core/stack.c and tgt.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "glue.h"
#include "internal.h"

#define ZVOL_RECHECK_S 2	/* seconds between a LUN's rounds of zfs get */
#define ZVOL_SILENT_S 30	/* a dataset unanswered this long is logged */
#define ZVOL_MISSING_ROUNDS 3	/* rounds of a zvol not found that latch */

/* A LUN's datasets (its struct syncguard_lun's zfs[] and zfs_dev[]), and
 * under zv.lock the rest: each one's name (the thread renames it), the
 * sync property each last had (read at open, then by the thread; "" for
 * a zvol missing ZVOL_MISSING_ROUNDS rounds), when each last answered,
 * and who still holds it (the LUN and its thread). */
struct syncguard_zvol {
	unsigned int n;
	dev_t dev[SYNCGUARD_ZFS_DEPTH];
	unsigned int missing_rounds[SYNCGUARD_ZFS_DEPTH];	/* the thread's */
	char ds[SYNCGUARD_ZFS_DEPTH][256];
	char sync[SYNCGUARD_ZFS_DEPTH][16];
	uint64_t answered_us[SYNCGUARD_ZFS_DEPTH];	/* syncguard_now_us */
	bool told_silent[SYNCGUARD_ZFS_DEPTH];
	bool gone;		/* the LUN closed: the thread is to end */
	unsigned int refs;
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;	/* a LUN closed: its thread ends now
				 * (CLOCK_MONOTONIC: a step of the wall
				 * clock moves no round) */
	int changed_fd;		/* eventfd: a sync property changed; opened
				 * once, never closed (threads may outlive
				 * every LUN) */
	void (*changed)(void);	/* what the event thread then runs */
	bool wake_set;		/* wake is set up (event thread) */
} zv = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed_fd = -1 };

/* Drop a reference (under zv.lock): the last frees @z. */
static void put(struct syncguard_zvol *z)
{
	if (!--z->refs)
		free(z);
}

/* Note what zfs get said of dataset @i of @z (@sync NULL: it could not
 * say); a change wakes the event thread.  false once the LUN is gone. */
static bool store(struct syncguard_zvol *z, unsigned int i, const char *sync)
{
	uint64_t one = 1;
	bool changed = false, gone;

	pthread_mutex_lock(&zv.lock);
	gone = z->gone;
	if (!gone && sync) {
		z->answered_us[i] = syncguard_now_us();
		z->told_silent[i] = false;
		if (strcmp(z->sync[i], sync)) {
			snprintf(z->sync[i], sizeof(z->sync[i]), "%s", sync);
			changed = true;
		}
	}
	pthread_mutex_unlock(&zv.lock);
	if (changed && write(zv.changed_fd, &one, sizeof(one)) < 0)
		eprintf("syncguard: zvol watch: eventfd: %m\n");
	return !gone;
}

/* The name of dataset @i of @z into @ds (@len bytes): a zvol's by the
 * /dev/zvol link to its device now, kept in z->ds[@i] when it changed
 * (a zfs rename); 1 for a zvol that no link names, else 0. */
static int current_name(struct syncguard_zvol *z, unsigned int i, char *ds,
			size_t len)
{
	char now[256];
	int missing;

	pthread_mutex_lock(&zv.lock);
	snprintf(ds, len, "%s", z->ds[i]);
	pthread_mutex_unlock(&zv.lock);
	if (!z->dev[i])
		return 0;
	missing = syncguard_zvol_dataset("/dev/zvol", "", z->dev[i], now,
					 sizeof(now)) != 1;
	if (missing || !strcmp(now, ds))
		return missing;
	eprintf("syncguard: zvol watch: dataset %s is now %s\n", ds, now);
	snprintf(ds, len, "%s", now);
	pthread_mutex_lock(&zv.lock);
	snprintf(z->ds[i], sizeof(z->ds[i]), "%s", now);
	pthread_mutex_unlock(&zv.lock);
	return 0;
}

/* zfs get of dataset @i of @z under its current name: its sync property
 * into @p->sync ("" once a zvol no link names has not been found by zfs
 * either for ZVOL_MISSING_ROUNDS rounds); -errno when zfs could not
 * say. */
static int read_sync(struct syncguard_zvol *z, unsigned int i,
		     struct syncguard_zfs_props *p)
{
	char ds[256];
	int missing = current_name(z, i, ds, sizeof(ds));
	int ret = syncguard_zfs_get(ds, p);

	if (!missing || ret != -EIO) {	/* found, or zfs silent */
		z->missing_rounds[i] = 0;
		return ret;
	}
	if (++z->missing_rounds[i] < ZVOL_MISSING_ROUNDS)
		return ret;
	p->sync[0] = '\0';
	return 0;
}

/* A LUN's thread: its datasets every ZVOL_RECHECK_S seconds, until the
 * LUN is gone; what zfs get cannot say (it timed out or failed, a zvol
 * missing fewer than ZVOL_MISSING_ROUNDS rounds in a row) is left as it
 * was. */
static void *zvol_thread(void *arg)
{
	struct syncguard_zvol *z = arg;

	for (;;) {
		struct timespec until;
		bool gone;

		for (unsigned int i = 0; i < z->n; i++) {
			struct syncguard_zfs_props p;

			if (!store(z, i, read_sync(z, i, &p) ? NULL : p.sync))
				goto out;
		}
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += ZVOL_RECHECK_S;
		pthread_mutex_lock(&zv.lock);
		while (!z->gone &&
		       pthread_cond_timedwait(&zv.wake, &zv.lock, &until) == 0)
			;
		gone = z->gone;
		pthread_mutex_unlock(&zv.lock);
		if (gone)
			break;
	}
out:
	pthread_mutex_lock(&zv.lock);
	put(z);
	pthread_mutex_unlock(&zv.lock);
	return NULL;
}

/* tgtd's event loop: a thread read a changed property */
static void zvol_changed(int fd, int events, void *data)
{
	uint64_t n;

	(void)events;
	(void)data;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		eprintf("syncguard: zvol watch: eventfd: %m\n");
	if (zv.changed)
		zv.changed();
}

/* The eventfd, in tgtd's loop for good, and the condition variable,
 * once: 0 or -errno. */
static int open_changed(void)
{
	pthread_condattr_t ca;
	int ret;

	if (zv.changed_fd >= 0)
		return 0;
	if (!zv.wake_set) {
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&zv.wake, &ca);
		pthread_condattr_destroy(&ca);
		zv.wake_set = true;
	}
	zv.changed_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (zv.changed_fd < 0)
		return -errno;
	ret = tgt_event_add(zv.changed_fd, EPOLLIN, zvol_changed, NULL);
	if (ret) {
		close(zv.changed_fd);
		zv.changed_fd = -1;
		return ret < 0 ? ret : -EIO;
	}
	return 0;
}

/* @z's thread, detached, with every signal blocked (tgtd's handlers run
 * on its own thread): 0 or -errno. */
static int start_thread(struct syncguard_zvol *z)
{
	pthread_attr_t at;
	sigset_t all, old;
	pthread_t t;
	int ret;

	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&t, &at, zvol_thread, z);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&at);
	return ret;
}

int syncguard_zvol_watch_add(struct syncguard_bs *bs, void (*changed)(void))
{
	const struct syncguard_lun *lun = &bs->lun;
	struct syncguard_zvol *z;
	int ret;

	if (!lun->zfs[0][0])
		return 0;
	if ((ret = open_changed()) != 0)
		return ret;
	if (!(z = calloc(1, sizeof(*z))))
		return -ENOMEM;
	for (; z->n < SYNCGUARD_ZFS_DEPTH && lun->zfs[z->n][0]; z->n++) {
		snprintf(z->ds[z->n], sizeof(z->ds[z->n]), "%s",
			 lun->zfs[z->n]);
		snprintf(z->sync[z->n], sizeof(z->sync[z->n]), "%s",
			 lun->zfs_sync[z->n]);
		z->dev[z->n] = lun->zfs_dev[z->n];
		z->answered_us[z->n] = syncguard_now_us();	/* at open */
	}
	z->refs = 2;		/* the LUN's and the thread's */
	zv.changed = changed;
	if ((ret = start_thread(z)) != 0) {
		free(z);
		return ret;
	}
	bs->zvol = z;
	return 0;
}

void syncguard_zvol_watch_remove(struct syncguard_bs *bs)
{
	if (!bs->zvol)
		return;
	pthread_mutex_lock(&zv.lock);
	bs->zvol->gone = true;
	put(bs->zvol);
	pthread_cond_broadcast(&zv.wake);
	pthread_mutex_unlock(&zv.lock);
	bs->zvol = NULL;
}

/* Log, once until it answers again, each dataset of @z whose zfs get
 * has not answered for ZVOL_SILENT_S (under zv.lock). */
static void tell_silent(struct syncguard_zvol *z, uint64_t lun_nr)
{
	uint64_t now = syncguard_now_us();

	for (unsigned int i = 0; i < z->n; i++) {
		if (z->told_silent[i] ||
		    now < z->answered_us[i] + ZVOL_SILENT_S * 1000000ull)
			continue;
		eprintf("syncguard: lun %" PRIu64 ": zfs get %s has not "
			"answered for %d s: a change of its sync property goes "
			"unnoticed until one does\n", lun_nr, z->ds[i],
			ZVOL_SILENT_S);
		z->told_silent[i] = true;
	}
}

bool syncguard_zvol_lost(struct syncguard_bs *bs, char *why, size_t len)
{
	struct syncguard_zvol *z = bs->zvol;
	char sync[SYNCGUARD_ZFS_DEPTH][16], ds[SYNCGUARD_ZFS_DEPTH][256];
	const char *bad;

	if (!z)
		return false;
	pthread_mutex_lock(&zv.lock);
	tell_silent(z, bs->lun_nr);
	memcpy(sync, z->sync, sizeof(sync));
	memcpy(ds, z->ds, sizeof(ds));
	pthread_mutex_unlock(&zv.lock);
	for (unsigned int i = 0; i < z->n; i++) {
		if (!sync[i][0]) {
			snprintf(why, len, "its ZFS dataset %s is gone (no "
				 "/dev/zvol link names its zvol, and zfs get finds "
				 "no such dataset): a change of its sync property "
				 "would go unseen", ds[i]);
			return true;
		}
		if (!(bad = syncguard_policy_zvol(bs->lun.opts.mode, sync[i])))
			continue;
		snprintf(why, len, "its ZFS dataset %s now has sync=%s: %s",
			 ds[i], sync[i], bad);
		return true;
	}
	return false;
}
