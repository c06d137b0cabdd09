/*
 * The LUN's worker threads: the commands the io_uring engine leaves (all
 * of them with engine=threads) run here, one at a time per thread, and
 * tgtd's event thread answers them.
 *
 * tgt's own workers (bs.c, bs_thread.h) do the same, but tell the
 * event thread of each completion with kill(getpid(), SIGUSR2): every
 * tgtd thread blocks that signal (tgtd reads it from a signalfd), so the
 * kernel walks all of tgtd's threads, of every LUN, to place each one,
 * and a worker's command costs more the more LUNs and workers tgtd has
 * (docs/performance.md, "The workers' own completion signal"). Here a
 * completion writes the LUN's eventfd, and only when the event thread
 * has not been told of an earlier one still waiting.  Tests:
 * test_bsopts_workers (the count), test_blockdev_unwatched_lun_refused
 * (a start that fails half way), the proto tests and tests/stall.sh
 * (every worker path); tests/deps.sh checks no file uses tgt's.
 *
 * Layer: used by bs_syncguard.c, cmdtable.c, wce.c and uring.c; uses
 * only tgt.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "glue.h"

/* Run queued commands until told to stop (the queue then is empty:
 * tgt deletes a LUN only without commands). */
static void *worker(void *arg)
{
	struct syncguard_workers *w = arg;

	for (;;) {
		struct scsi_cmd *cmd;
		bool first;

		pthread_mutex_lock(&w->lock);
		while (list_empty(&w->pending) && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (list_empty(&w->pending)) {
			pthread_mutex_unlock(&w->lock);
			return NULL;
		}
		cmd = list_first_entry(&w->pending, struct scsi_cmd, bs_list);
		list_del(&cmd->bs_list);
		pthread_mutex_unlock(&w->lock);

		w->fn(cmd);

		/* told under the lock: a worker preempted between adding
		 * and telling would hold back every answer added after */
		pthread_mutex_lock(&w->done_lock);
		first = list_empty(&w->done);
		list_add_tail(&cmd->bs_list, &w->done);
		if (first) {	/* else the event thread is told already */
			uint64_t one = 1;

			if (write(w->efd, &one, sizeof(one)) < 0)
				eprintf("syncguard: worker eventfd: %m\n");
		}
		pthread_mutex_unlock(&w->done_lock);
	}
}

/* The event thread: answer what the workers finished. */
static void answer_done(int fd, int events, void *data)
{
	struct syncguard_workers *w = data;
	uint64_t n;
	LIST_HEAD(done);

	(void)events;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		eprintf("syncguard: worker eventfd: %m\n");
	pthread_mutex_lock(&w->done_lock);
	list_splice_init(&w->done, &done);
	pthread_mutex_unlock(&w->done_lock);
	while (!list_empty(&done)) {
		struct scsi_cmd *cmd = list_first_entry(&done, struct scsi_cmd,
							bs_list);

		list_del(&cmd->bs_list);
		target_cmd_io_done(cmd, scsi_get_result(cmd));
	}
}

int syncguard_workers_start(struct syncguard_workers *w, unsigned int n,
			    void (*fn)(struct scsi_cmd *cmd))
{
	sigset_t all, old;
	int ret = 0;

	memset(w, 0, sizeof(*w));
	w->inited = true;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	pthread_mutex_init(&w->done_lock, NULL);
	INIT_LIST_HEAD(&w->pending);
	INIT_LIST_HEAD(&w->done);
	w->fn = fn;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0) {
		ret = -errno;
		goto fail;
	}
	w->threads = calloc(n, sizeof(*w->threads));
	if (!w->threads) {
		ret = -ENOMEM;
		goto fail;
	}
	/* tgt_event_add: -ENOMEM, or epoll_ctl's -1 (tgt logs its errno) */
	ret = tgt_event_add(w->efd, EPOLLIN, answer_done, w);
	if (ret) {
		ret = ret == -ENOMEM ? ret : -EIO;
		goto fail;
	}
	w->watched = true;
	/* the threads take no signal: tgtd's handlers run on its own */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (; w->n < n; w->n++) {
		ret = -pthread_create(&w->threads[w->n], NULL, worker, w);
		if (ret)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ret)
		return 0;
fail:
	syncguard_workers_stop(w);
	return ret;
}

int syncguard_workers_submit(struct scsi_cmd *cmd)
{
	struct syncguard_workers *w = &SYNCGUARD_BS(cmd->dev)->workers;

	set_cmd_async(cmd);
	pthread_mutex_lock(&w->lock);
	list_add_tail(&cmd->bs_list, &w->pending);
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void syncguard_workers_stop(struct syncguard_workers *w)
{
	if (!w->inited)		/* never started: bs_init failed before */
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (unsigned int i = 0; i < w->n; i++)
		pthread_join(w->threads[i], NULL);
	if (w->watched)
		tgt_event_del(w->efd);
	if (w->efd >= 0)
		close(w->efd);
	free(w->threads);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->done_lock);
	memset(w, 0, sizeof(*w));
}
