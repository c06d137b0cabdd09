/*
 * Publishing a LUN's counters in a shared file (include/syncguard_stats.h)
 * so that tools read them while tgtd runs, at no cost on the command path:
 * the counters simply live in the mapping.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "syncguard.h"
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

int syncguard_stats_publish(struct syncguard_lun *lun, const char *path)
{
	struct syncguard_stats *map;
	int fd, ret = make_parents(path);

	if (ret)
		return ret;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(*map))) {
		ret = -errno;
		close(fd);
		unlink(path);
		return ret;
	}
	map = mmap(NULL, sizeof(*map), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED) {
		unlink(path);
		return -errno;
	}
	lun->stats_path = strdup(path);
	if (!lun->stats_path) {
		munmap(map, sizeof(*map));
		unlink(path);
		return -ENOMEM;
	}
	memcpy(map, lun->stats, sizeof(*map));
	map->pid = (uint32_t)getpid();
	lun->stats = map;
	return 0;
}

void syncguard_stats_unpublish(struct syncguard_lun *lun)
{
	if (lun->stats == &lun->local_stats)
		return;
	memcpy(&lun->local_stats, lun->stats, sizeof(lun->local_stats));
	munmap(lun->stats, sizeof(*lun->stats));
	lun->stats = &lun->local_stats;
	if (lun->stats_path) {
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
