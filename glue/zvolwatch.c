/*
 * The zvol watch: a LUN on a ZFS zvol (or on a loop device or a file
 * system over one) latches when a dataset under it is set to a sync
 * property its mode refuses (core/policy.c, syncguard_policy_zvol), as
 * the mount watch's other checks do (glue/watch.c).
 *
 * Reading the property means running zfs get (core/stack.c), which on a
 * suspended pool may not answer for seconds, or at all.  So it runs on a
 * thread of its own, never on tgtd's event thread, whose LUNs, logins and
 * tgtadm would stop with it (test_blockdev_zvol).  The thread
 * reads every watched dataset every ZVOL_RECHECK_S seconds and keeps what
 * it read; a change wakes the event thread, which judges it.  The thread
 * starts with the first zvol LUN and is never stopped: a zfs that never
 * exits holds it in waitpid, and tgtd must not wait for that.  One that
 * has not answered for ZVOL_SILENT_S is logged, once.
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
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "glue.h"
#include "internal.h"

#define ZVOL_RECHECK_S 2	/* seconds between rounds of zfs get */
#define ZVOL_SILENT_S 30	/* a zfs get this old is logged */

/* A LUN's datasets (its struct syncguard_lun's zfs[]), and the sync
 * property each last had: read at open, then by the thread. */
struct syncguard_zvol {
	struct syncguard_zvol *next;
	uint64_t id;		/* the thread's handle: never reused */
	unsigned int n;
	char ds[SYNCGUARD_ZFS_DEPTH][256];
	char sync[SYNCGUARD_ZFS_DEPTH][16];
};

static struct {
	pthread_mutex_t lock;	/* all but changed_fd, changed, started */
	struct syncguard_zvol *list;
	uint64_t last_id;
	uint64_t busy_since_us;	/* the zfs get running began, 0: none */
	char busy_ds[256];
	bool told_silent;
	int changed_fd;		/* eventfd: a sync property changed */
	void (*changed)(void);	/* what the event thread then runs */
	bool started;		/* the thread runs (event thread only) */
} zv = { .lock = PTHREAD_MUTEX_INITIALIZER, .changed_fd = -1 };

/* Copy the watched LUN after @id (lowest id first) into @out: false when
 * there is none. */
static bool next_zvol(uint64_t id, struct syncguard_zvol *out)
{
	const struct syncguard_zvol *best = NULL;

	pthread_mutex_lock(&zv.lock);
	for (const struct syncguard_zvol *z = zv.list; z; z = z->next)
		if (z->id > id && (!best || z->id < best->id))
			best = z;
	if (best)
		*out = *best;
	pthread_mutex_unlock(&zv.lock);
	return best != NULL;
}

/* Note what zfs get said of dataset @i of LUN @id, if it is still
 * watched; a change wakes the event thread. */
static void store(uint64_t id, unsigned int i, const char *sync)
{
	uint64_t one = 1;
	bool changed = false;

	pthread_mutex_lock(&zv.lock);
	for (struct syncguard_zvol *z = zv.list; z; z = z->next) {
		if (z->id != id || !strcmp(z->sync[i], sync))
			continue;
		snprintf(z->sync[i], sizeof(z->sync[i]), "%s", sync);
		changed = true;
	}
	pthread_mutex_unlock(&zv.lock);
	if (changed && write(zv.changed_fd, &one, sizeof(one)) < 0)
		eprintf("syncguard: zvol watch: eventfd: %m\n");
}

/* Note a zfs get of @ds that begins (@ds NULL: the last one ended). */
static void set_busy(const char *ds)
{
	pthread_mutex_lock(&zv.lock);
	zv.busy_since_us = ds ? syncguard_now_us() : 0;
	snprintf(zv.busy_ds, sizeof(zv.busy_ds), "%s", ds ? ds : "");
	if (!ds)
		zv.told_silent = false;
	pthread_mutex_unlock(&zv.lock);
}

/* the thread: every dataset of every watched LUN, every ZVOL_RECHECK_S
 * seconds; what zfs get cannot say (it failed, or timed out) is left as
 * it was */
static void *zvol_thread(void *arg)
{
	struct syncguard_zvol z;
	uint64_t id = 0;

	(void)arg;
	for (;;) {
		if (!next_zvol(id, &z)) {
			id = 0;
			sleep(ZVOL_RECHECK_S);
			continue;
		}
		id = z.id;
		for (unsigned int i = 0; i < z.n; i++) {
			struct syncguard_zfs_props p;
			int ret;

			set_busy(z.ds[i]);
			ret = syncguard_zfs_get(z.ds[i], &p);
			set_busy(NULL);
			if (!ret)
				store(id, i, p.sync);
		}
	}
	return NULL;
}

/* tgtd's event loop: the thread read a changed property */
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

/* The eventfd in tgtd's loop, and the thread (every signal blocked:
 * tgtd's handlers run on its own thread): 0 or -errno. */
static int start(void)
{
	sigset_t all, old;
	pthread_t t;
	int ret;

	if (zv.started)
		return 0;
	if (zv.changed_fd < 0) {
		zv.changed_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (zv.changed_fd < 0)
			return -errno;
		ret = tgt_event_add(zv.changed_fd, EPOLLIN, zvol_changed, NULL);
		if (ret) {
			close(zv.changed_fd);
			zv.changed_fd = -1;
			return ret < 0 ? ret : -EIO;
		}
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = -pthread_create(&t, NULL, zvol_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ret) {
		pthread_detach(t);
		zv.started = true;
	}
	return ret;
}

int syncguard_zvol_watch_add(struct syncguard_bs *bs, void (*changed)(void))
{
	const struct syncguard_lun *lun = &bs->lun;
	struct syncguard_zvol *z;
	int ret;

	if (!lun->zfs[0][0])
		return 0;
	if ((ret = start()) != 0)
		return ret;
	if (!(z = calloc(1, sizeof(*z))))
		return -ENOMEM;
	for (; z->n < SYNCGUARD_ZFS_DEPTH && lun->zfs[z->n][0]; z->n++) {
		snprintf(z->ds[z->n], sizeof(z->ds[z->n]), "%s",
			 lun->zfs[z->n]);
		snprintf(z->sync[z->n], sizeof(z->sync[z->n]), "%s",
			 lun->zfs_sync[z->n]);
	}
	zv.changed = changed;
	pthread_mutex_lock(&zv.lock);
	z->id = ++zv.last_id;
	z->next = zv.list;
	zv.list = z;
	pthread_mutex_unlock(&zv.lock);
	bs->zvol = z;
	return 0;
}

void syncguard_zvol_watch_remove(struct syncguard_bs *bs)
{
	struct syncguard_zvol **p;

	if (!bs->zvol)
		return;
	pthread_mutex_lock(&zv.lock);
	for (p = &zv.list; *p && *p != bs->zvol; p = &(*p)->next)
		;
	if (*p)
		*p = bs->zvol->next;
	pthread_mutex_unlock(&zv.lock);
	free(bs->zvol);
	bs->zvol = NULL;
}

/* Log, once, a zfs get that has not answered for ZVOL_SILENT_S. */
static void tell_silent(void)
{
	uint64_t now = syncguard_now_us();

	pthread_mutex_lock(&zv.lock);
	if (zv.busy_since_us && !zv.told_silent &&
	    now > zv.busy_since_us + ZVOL_SILENT_S * 1000000ull) {
		eprintf("syncguard: zfs get %s has not answered for %d s: a "
			"change of a ZFS dataset's sync property goes unnoticed "
			"until it does\n", zv.busy_ds, ZVOL_SILENT_S);
		zv.told_silent = true;
	}
	pthread_mutex_unlock(&zv.lock);
}

bool syncguard_zvol_lost(struct syncguard_bs *bs, char *why, size_t len)
{
	char sync[16];
	const char *bad;

	if (!bs->zvol)
		return false;
	tell_silent();
	for (unsigned int i = 0; i < bs->zvol->n; i++) {
		pthread_mutex_lock(&zv.lock);
		memcpy(sync, bs->zvol->sync[i], sizeof(sync));
		pthread_mutex_unlock(&zv.lock);
		if (!(bad = syncguard_policy_zvol(bs->lun.opts.mode, sync)))
			continue;
		snprintf(why, len, "its ZFS dataset %s now has sync=%s: %s",
			 bs->zvol->ds[i], sync, bad);
		return true;
	}
	return false;
}
