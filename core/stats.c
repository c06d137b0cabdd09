/*
 * Publishing a LUN's counters in a shared file (include/syncguard_stats.h)
 * so that tools read them while tgtd runs, at no cost on the command path:
 * the counters simply live in the mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "internal.h"

/* mkdir -p of @path's parent directories; 0 or -errno */
static int make_parents(const char *path)
{
	char *copy = strdup(path);
	int ret = 0;

	if (!copy)
		return -ENOMEM;
	for (char *p = copy + 1; !ret && (p = strchr(p, '/')) != NULL; p++) {
		*p = '\0';
		if (mkdir(copy, 0755) && errno != EEXIST)
			ret = -errno;
		*p = '/';
	}
	free(copy);
	return ret;
}

/* Is @path the live counters file of another process?  (Two tgtd
 * instances may export targets of the same name.) */
static bool owned_by_other(const char *path)
{
	struct syncguard_stats st = { 0 };
	/* magic, version and pid: the same in every version of the file */
	const ssize_t head = offsetof(struct syncguard_stats, mode);
	ssize_t n;
	/* not blocking: a FIFO of that name would hang tgtd's event loop */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	bool other;

	if (fd < 0)
		return false;
	n = pread(fd, &st, sizeof(st), 0);
	other = n >= head && st.magic == SYNCGUARD_STATS_MAGIC &&
		st.pid != (uint32_t)getpid() &&
		syncguard_stats_owner_alive(st.pid,
			syncguard_stats_pid_start(&st, (size_t)n));
	close(fd);
	return other;
}

/*
 * A new file is made beside @path and renamed over it: an existing file
 * (a dead tgtd's) is replaced, never truncated, so a process that still
 * maps it cannot fault; a live one's is left alone (-EEXIST).
 */
int syncguard_stats_publish(struct syncguard_lun *lun, const char *path)
{
	struct syncguard_stats *map;
	struct syncguard_proc self;
	char *tmp = NULL;
	struct stat st;
	int fd, ret = make_parents(path);

	if (ret)
		return ret;
	if (owned_by_other(path))
		return -EEXIST;
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkstemp(tmp);
	if (fd < 0 || fchmod(fd, 0644) || ftruncate(fd, sizeof(*map)) ||
	    fstat(fd, &st)) {
		ret = -errno;
		goto out;
	}
	map = mmap(NULL, sizeof(*map), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	memcpy(map, lun->stats, sizeof(*map));
	map->pid = (uint32_t)getpid();
	map->pid_start = syncguard_proc_read(map->pid, &self) ? 0 : self.start;
	if (rename(tmp, path) || !(lun->stats_path = strdup(path))) {
		ret = -errno;
		munmap(map, sizeof(*map));
		goto out;
	}
	lun->stats_ino = st.st_ino;
	lun->stats = map;
out:
	if (fd >= 0)
		close(fd);
	if (ret && tmp)
		unlink(tmp);
	free(tmp);
	return ret;
}

void syncguard_stats_unpublish(struct syncguard_lun *lun)
{
	struct stat st;

	if (lun->stats == &lun->local_stats)
		return;
	memcpy(&lun->local_stats, lun->stats, sizeof(lun->local_stats));
	munmap(lun->stats, sizeof(*lun->stats));
	lun->stats = &lun->local_stats;
	/* remove the file only if it is still ours */
	if (lun->stats_path && !stat(lun->stats_path, &st) &&
	    st.st_ino == lun->stats_ino) {
		char *slash = strrchr(lun->stats_path, '/');

		unlink(lun->stats_path);
		if (slash) {		/* the target's directory, once empty */
			*slash = '\0';
			rmdir(lun->stats_path);
		}
	}
	free(lun->stats_path);
	lun->stats_path = NULL;
}
