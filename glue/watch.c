/*
 * The mount watch (and the watch of what lies beneath a LUN: a zvol's
 * sync property, a device's write cache setting, core/stack.c).
 * write-through and write-back are refused at LUN
 * creation on a file system mounted nobarrier (core/lun.c); one
 * remounted so later would have every flush silently dropped.  Linux
 * signals a change of the mount table (a remount included) on
 * /proc/self/mountinfo with POLLPRI, so while any LUN is open the table
 * is watched, and a LUN whose file system lost its flushes latches an
 * error: from then on every command that promises durability fails
 * (core/policy.c), as after a failed flush.  Only changes made in
 * tgtd's own mount name space are signalled (a tgtd in a private one,
 * as tgtd-private's, sees a remount only when made there).
 *
 * Why a thread, and not the mountinfo descriptor in tgtd's event loop:
 * Linux reports each change on that descriptor once, to the poll that
 * sees it, and tgtd's loop drops the rest of an epoll batch whenever a
 * handler removes an event (a connection or a tgtadm request that
 * closes, tgtd.c's event_need_refresh).  A remount that comes in one
 * batch behind such a close would be lost for good
 * (test_blockdev_remount_beside_closing_connection).  So a thread of
 * ours polls the descriptor and adds one to an eventfd, which stays
 * readable until tgtd's loop has read it: what a dropped batch held is
 * reported again.
 *
 * The descriptor is opened before the first LUN's own check of the
 * table (bs_syncguard_open): Linux signals the changes made after the
 * open, so a remount between that check and the watch is seen too.
 *
 * And the table is checked every RECHECK_S seconds without a signal:
 * nobarrier is an option of the file system, not of one mount, so a
 * remount in another mount name space (the host's, for a tgtd in a
 * private one such as tgtd-private's) takes the flushes away from
 * tgtd's LUNs too, but Linux signals it only in that name space
 * (without the check FUA writes go on GOOD, faster than the flushes
 * they no longer wait for: test_blockdev_remount_elsewhere_latches).  A
 * check runs on tgtd's event thread and reads only what the kernel holds
 * in memory: the mount table, sysfs, and each device-mapper layer's
 * table (DM_TABLE_STATUS for the table alone, never the targets' status,
 * which would write a thin pool's or a cache's metadata out first).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "glue.h"
#include "internal.h"
#include "work.h"

#define RECHECK_S 2	/* seconds between checks without a signal */

static struct syncguard_bs *watched;	/* tgtd's event thread only */
static struct {
	int mountinfo_fd;	/* polled by the thread */
	int changed_fd;		/* eventfd: the thread saw a change */
	int stop_fd;		/* eventfd: the thread is to end */
	pthread_t thread;
	bool on;
	struct tgt_work retry;	/* a table that could not be read */
	bool retry_set;
} watch = { .mountinfo_fd = -1, .changed_fd = -1, .stop_fd = -1 };

/* the thread: POLLPRI on the mount table, or RECHECK_S seconds without
 * one, passed on as an eventfd count */
static void *watch_thread(void *arg)
{
	struct pollfd p[2] = {
		{ .fd = watch.mountinfo_fd, .events = POLLPRI },
		{ .fd = watch.stop_fd, .events = POLLIN },
	};
	uint64_t one = 1;

	(void)arg;
	for (;;) {
		int n = poll(p, 2, RECHECK_S * 1000);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			eprintf("syncguard: mount watch: poll: %m: a remount "
				"nobarrier under a LUN will go unnoticed\n");
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		if ((n == 0 || p[0].revents & (POLLPRI | POLLERR)) &&
		    write(watch.changed_fd, &one, sizeof(one)) < 0)
			eprintf("syncguard: mount watch: eventfd: %m\n");
	}
}

static void mounts_changed(int fd, int events, void *data);

/* tgtd's work timer: try the table again */
static void retry_read(void *data)
{
	(void)data;
	watch.retry_set = false;
	mounts_changed(watch.changed_fd, 0, NULL);
}

/* The mount table could not be read (out of memory): the change it
 * signalled must not be lost, so try again in a second (not at once:
 * the eventfd would wake the loop without end). */
static void retry_later(void)
{
	if (watch.retry_set)
		return;
	eprintf("syncguard: mount watch: cannot read /proc/self/mountinfo "
		"(%m): trying again in 1 s\n");
	watch.retry.func = retry_read;
	watch.retry.data = NULL;
	add_work(&watch.retry, 1);
	watch.retry_set = true;
}

/* A LUN whose durability went away under it latches (core/policy.c):
 * its zvol's sync property (as the zvol watch last read it, on a thread
 * of its own: glue/zvolwatch.c) or its device's write cache setting
 * changed (core/stack.c), its file system remounted nobarrier, or, under
 * plp, its loop device's direct I/O turned off (core/loopdev.c:
 * plp_over_loop). */
static void check_lun(struct syncguard_bs *bs, const char *table)
{
	const char *why, *fix;
	char beneath[512];

	if (syncguard_zvol_lost(bs, beneath, sizeof(beneath)) ||
	    syncguard_lun_beneath_lost(&bs->lun, beneath, sizeof(beneath))) {
		why = beneath;
		fix = "undo that";
	} else if (syncguard_lun_flushes_lost(&bs->lun, table)) {
		why = "its file system was remounted nobarrier: flushes no "
		      "longer reach the device";
		fix = "remount with barriers";
	} else if (syncguard_loop_dio_lost(&bs->lun)) {
		why = "its loop device's direct I/O was turned off: plp's "
		      "writes end in the page cache, which plp never flushes";
		fix = "turn it on (losetup --direct-io=on)";
	} else {
		return;
	}
	syncguard_latch(&bs->lun, EIO);
	eprintf("syncguard: lun %" PRIu64 ": %s, so every command that "
		"promises durability fails from now on; %s, then re-create "
		"the LUN\n", bs->lun_nr, why, fix);
}

/* tgtd's event loop: the mount table changed.  The count is read (and
 * so reset) before the table, so a change after the read is signalled
 * again.  The table is read through the polled descriptor: no new one
 * is needed (a tgtd out of descriptors lost the change otherwise). */
static void mounts_changed(int fd, int events, void *data)
{
	uint64_t n;
	char *table;

	(void)events;
	(void)data;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	table = syncguard_mounts_read_fd(watch.mountinfo_fd);
	if (!table) {
		retry_later();
		return;
	}
	/* not a LUN latched for good; a soft latch may clear at its next
	 * durable command (its witness need not see a remount) */
	for (struct syncguard_bs *bs = watched; bs; bs = bs->next_watched)
		if (!syncguard_lun_lost_meanwhile(&bs->lun))
			check_lun(bs, table);
	free(table);
}

void syncguard_watch_recheck(void)
{
	if (watch.on)
		mounts_changed(watch.changed_fd, 0, NULL);
}

static void close_fds(void)
{
	int *fds[] = { &watch.mountinfo_fd, &watch.changed_fd, &watch.stop_fd };

	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

/* the thread, with every signal blocked (tgtd's handlers run elsewhere) */
static int start_thread(void)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&watch.thread, NULL, watch_thread, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -ret;
}

int syncguard_watch_open(void)
{
	int ret = 0;

	if (watch.on)
		return 0;
	watch.mountinfo_fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	watch.changed_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	watch.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (watch.mountinfo_fd < 0 || watch.changed_fd < 0 || watch.stop_fd < 0)
		ret = -errno;
	else if ((ret = tgt_event_add(watch.changed_fd, EPOLLIN,
				      mounts_changed, NULL)) != 0)
		ret = ret < 0 ? ret : -EIO;
	else if ((ret = start_thread()) != 0)
		tgt_event_del(watch.changed_fd);
	if (ret) {
		eprintf("syncguard: cannot watch /proc/self/mountinfo: %s\n",
			strerror(-ret));
		close_fds();
		return ret;
	}
	watch.on = true;
	return 0;
}

void syncguard_watch_close_unused(void)
{
	uint64_t one = 1;

	if (watched || !watch.on)
		return;
	if (write(watch.stop_fd, &one, sizeof(one)) < 0)
		pthread_cancel(watch.thread);	/* poll() is a cancellation point */
	pthread_join(watch.thread, NULL);
	if (watch.retry_set)
		del_work(&watch.retry);
	watch.retry_set = false;
	tgt_event_del(watch.changed_fd);
	close_fds();
	watch.on = false;
}

void syncguard_watch_add(struct syncguard_bs *bs, uint64_t lun_nr)
{
	bs->lun_nr = lun_nr;
	bs->next_watched = watched;
	watched = bs;
}

void syncguard_watch_remove(struct syncguard_bs *bs)
{
	struct syncguard_bs **p = &watched;

	while (*p && *p != bs)
		p = &(*p)->next_watched;
	if (*p)
		*p = bs->next_watched;
	syncguard_watch_close_unused();
}
