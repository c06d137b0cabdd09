/*
 * What lies beneath a LUN, besides file systems and loop devices
 * (core/lun.c, core/loop.c): a ZFS zvol and its dataset's properties, the
 * device-mapper and bcache layers that keep what a write needs in host
 * RAM until a flush, and a block device whose write cache setting
 * changes while the LUN lives.  What each finding means for each mode
 * is core/policy.c's (syncguard_policy_zvol, syncguard_policy_layers).
 *
 * Layer: beside loop.c (lun.c calls it at open, the mount watch while
 * the LUN lives); it uses policy.c and libc.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/dm-ioctl.h>

#include "syncguard.h"
#include "internal.h"

/* ---- ZFS zvols ---- */

/* Is block device @rdev behind a link under @root ("/dev/zvol", where
 * udev names each zvol by its dataset)?  Its dataset into @ds. */
static int zvol_scan(const char *root, const char *rel, dev_t rdev, char *ds,
		     size_t len, int depth)
{
	char dir[2 * PATH_MAX], p[PATH_MAX];
	struct dirent *e;
	struct stat st;
	int found = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s%s%s", root, rel[0] ? "/" : "", rel);
	if (depth > 8 || !(d = opendir(dir)))
		return 0;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s%s%s", rel, rel[0] ? "/" : "",
			 e->d_name);
		snprintf(dir, sizeof(dir), "%s/%s", root, p);
		if (stat(dir, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			found = zvol_scan(root, p, rdev, ds, len, depth + 1);
		else if (S_ISBLK(st.st_mode) && st.st_rdev == rdev &&
			 !strstr(p, "-part"))
			found = snprintf(ds, len, "%s", p) < (int)len;
	}
	closedir(d);
	return found;
}

int syncguard_zvol_dataset(const char *root, const char *path, dev_t rdev,
			   char *ds, size_t len)
{
	size_t n = strlen(root);
	char name[64];

	/* the path given: /dev/zvol/POOL/VOLUME */
	if (!strncmp(path, root, n) && path[n] == '/' && path[n + 1])
		return snprintf(ds, len, "%s", path + n + 1) < (int)len ?
		       1 : -ENAMETOOLONG;
	if (zvol_scan(root, "", rdev, ds, len, 0))
		return 1;
	/* a zvol (zdN) by another name, whose dataset no link tells */
	if (!syncguard_dev_name(rdev, name, sizeof(name)) &&
	    !strncmp(name, "zd", 2) && name[2] >= '0' && name[2] <= '9')
		return -ENOENT;
	return 0;
}

/* The zfs command, by absolute path (tgtd runs as root: never by PATH) */
static const char *zfs_binary(void)
{
	static const char *const where[] = { "/usr/sbin/zfs", "/sbin/zfs" };

	for (size_t i = 0; i < 2; i++)
		if (!access(where[i], X_OK))
			return where[i];
	return NULL;
}

#define ZFS_TIMEOUT_MS 5000

/* Run zfs get for @ds; its output into @out (@len bytes, NUL-ended):
 * 0, or -errno (-ENOENT: no zfs; -ETIMEDOUT; -EIO: it failed). */
static int zfs_run(const char *ds, char *out, size_t len)
{
	char *const argv[] = { "zfs", "get", "-Hp", "-o", "property,value",
			       "sync,volblocksize,logbias", (char *)ds, NULL };
	char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
			       NULL };
	const char *zfs = zfs_binary();
	posix_spawn_file_actions_t fa;
	int pipefd[2], ret, st = 0;
	size_t got = 0;
	pid_t pid;

	if (!zfs)
		return -ENOENT;
	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	ret = -posix_spawn(&pid, zfs, &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (ret) {
		close(pipefd[0]);
		return ret;
	}
	while (got + 1 < len) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, ZFS_TIMEOUT_MS) <= 0) {
			ret = -ETIMEDOUT;
			kill(pid, SIGKILL);
			break;
		}
		if ((n = read(pipefd[0], out + got, len - 1 - got)) <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(pipefd[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!ret && (!WIFEXITED(st) || WEXITSTATUS(st)))
		ret = -EIO;
	return ret;
}

int syncguard_zfs_get(const char *ds, struct syncguard_zfs_props *p)
{
	char out[1024], *line, *save = NULL;
	int ret = zfs_run(ds, out, sizeof(out));

	memset(p, 0, sizeof(*p));
	if (ret)
		return ret;
	for (line = strtok_r(out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *v = strchr(line, '\t');

		if (!v)
			continue;
		*v++ = '\0';
		if (!strcmp(line, "sync"))
			snprintf(p->sync, sizeof(p->sync), "%s", v);
		else if (!strcmp(line, "logbias"))
			snprintf(p->logbias, sizeof(p->logbias), "%s", v);
		else if (!strcmp(line, "volblocksize"))
			p->volblocksize = (unsigned int)strtoul(v, NULL, 10);
	}
	return p->sync[0] ? 0 : -EIO;
}

/* ---- layers that keep a write's metadata in RAM until a flush ---- */

/* The device-mapper target types of @dev, space-separated, into @types
 * (DM_TABLE_STATUS on /dev/mapper/control): 0, or -errno. */
int syncguard_dm_targets(dev_t dev, char *types, size_t len)
{
	union {
		struct dm_ioctl io;
		char buf[16384];
	} u;
	size_t used = 0;
	int fd, ret = 0;

	types[0] = '\0';
	memset(&u, 0, sizeof(u));
	u.io.version[0] = DM_VERSION_MAJOR;
	u.io.data_size = sizeof(u);
	u.io.data_start = sizeof(u.io);
	u.io.dev = (uint64_t)dev;
	if ((fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	if (ioctl(fd, DM_TABLE_STATUS, &u.io))
		ret = -errno;
	close(fd);
	if (ret)
		return ret;
	for (uint32_t i = 0, at = u.io.data_start; i < u.io.target_count &&
	     at + sizeof(struct dm_target_spec) <= sizeof(u); i++) {
		const struct dm_target_spec *t = (const void *)(u.buf + at);
		int n = snprintf(types + used, len - used, "%s%.*s",
				 used ? " " : "", DM_MAX_TYPE_NAME,
				 t->target_type);

		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
		at = u.io.data_start + t->next;
	}
	return 0;
}

static const char *const ram_metadata_targets[] = {
	"thin", "thin-pool", "cache", "writecache", "vdo",
};

/* The first of @types (space-separated target types) that keeps what a
 * write needs in host RAM until a flush, or NULL */
static const char *ram_metadata_target(char *types)
{
	char *save = NULL;

	for (char *t = strtok_r(types, " ", &save); t;
	     t = strtok_r(NULL, " ", &save))
		for (size_t i = 0; i < sizeof(ram_metadata_targets) /
				       sizeof(ram_metadata_targets[0]); i++)
			if (!strcmp(t, ram_metadata_targets[i]))
				return ram_metadata_targets[i];
	return NULL;
}

/* The current value, in brackets, of a sysfs choice like bcache's
 * cache_mode ("writethrough [writeback] writearound none") */
static bool bracketed(const char *text, const char *want)
{
	char w[40];

	snprintf(w, sizeof(w), "[%s]", want);
	return strstr(text, w) != NULL;
}

static int layers_at(const struct syncguard_layers *l, dev_t dev, char *what,
		     size_t len, int depth);

/* Each device under @sys (its slaves/), as layers_at. */
static int layers_below(const struct syncguard_layers *l, const char *sys,
			char *what, size_t len, int depth)
{
	char p[2 * PATH_MAX], num[32];
	unsigned int ma, mi;
	struct dirent *e;
	int found = 0;
	FILE *f;
	DIR *d;

	snprintf(p, sizeof(p), "%s/slaves", sys);
	if (!(d = opendir(p)))
		return 0;
	while (!found && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/slaves/%s/dev", sys, e->d_name);
		if (!(f = fopen(p, "re")))
			continue;
		if (fgets(num, sizeof(num), f) &&
		    sscanf(num, "%u:%u", &ma, &mi) == 2)
			found = layers_at(l, makedev(ma, mi), what, len,
					  depth + 1);
		fclose(f);
	}
	closedir(d);
	return found;
}

static int layers_at(const struct syncguard_layers *l, dev_t dev, char *what,
		     size_t len, int depth)
{
	char sys[PATH_MAX], p[PATH_MAX + 32], text[256] = "";

	if (strlen(l->sysfs) > 256)
		return 0;
	FILE *f;

	if (depth > 8)
		return 0;
	snprintf(sys, sizeof(sys), "%s/dev/block/%u:%u", l->sysfs, major(dev),
		 minor(dev));
	snprintf(p, sizeof(p), "%s/dm", sys);
	if (!access(p, F_OK) && !l->dm_targets(dev, text, sizeof(text))) {
		const char *t = ram_metadata_target(text);

		if (t) {
			snprintf(what, len, "device-mapper %s (dm %u:%u)", t,
				 major(dev), minor(dev));
			return 1;
		}
	}
	snprintf(p, sizeof(p), "%s/bcache/cache_mode", sys);
	if ((f = fopen(p, "re"))) {
		if (!fgets(text, sizeof(text), f))
			text[0] = '\0';
		fclose(f);
		if (bracketed(text, "writeback")) {
			snprintf(what, len, "bcache in write-back (%u:%u)",
				 major(dev), minor(dev));
			return 1;
		}
	}
	return layers_below(l, sys, what, len, depth);
}

int syncguard_ram_metadata_layer(const struct syncguard_layers *l, dev_t dev,
				 char *what, size_t len)
{
	return layers_at(l, dev, what, len, 0);
}

const struct syncguard_layers syncguard_host_layers = {
	.sysfs = "/sys", .dm_targets = syncguard_dm_targets,
};

/* ---- at open, and while the LUN lives ---- */

/* A zvol under @lun: its sync property as the policy wants it, and its
 * volblocksize as the LUN's physical block.  0 or -EINVAL. */
static int check_zvol(struct syncguard_lun *lun, const char *path, dev_t rdev,
		      char *err, size_t errlen)
{
	struct syncguard_zfs_props p;
	const char *why;
	int ret = syncguard_zvol_dataset("/dev/zvol", path, rdev, lun->zvol,
					 sizeof(lun->zvol));

	if (ret == 0)
		return 0;
	if (ret < 0 || (ret = syncguard_zfs_get(lun->zvol, &p)) != 0) {
		syncguard_seterr(err, errlen, "%s: a ZFS zvol whose sync property "
			"cannot be read (%s), so whether its flushes reach the "
			"disk cannot be told: give its /dev/zvol/POOL/VOLUME path, "
			"with zfs in /usr/sbin or /sbin", path, ret == -ENOENT ?
			"no dataset under /dev/zvol, or no zfs" : strerror(-ret));
		lun->zvol[0] = '\0';
		return -EINVAL;
	}
	why = syncguard_policy_zvol(lun->opts.mode, p.sync);
	if (why) {
		syncguard_seterr(err, errlen, "%s: zvol %s has sync=%s, and "
			"mode=%s: %s", path, lun->zvol, p.sync,
			syncguard_mode_name(lun->opts.mode), why);
		return -EINVAL;
	}
	snprintf(lun->zvol_sync, sizeof(lun->zvol_sync), "%s", p.sync);
	snprintf(lun->zvol_logbias, sizeof(lun->zvol_logbias), "%s", p.logbias);
	/* initiators align to it: READ CAPACITY(16), Block Limits VPD */
	if (p.volblocksize && !(p.volblocksize & (p.volblocksize - 1)) &&
	    p.volblocksize >= (1u << lun->block_shift))
		lun->phys_block_size = p.volblocksize;
	return 0;
}

/* The device @fd's data is on: a block device's own, a file's file
 * system's. */
static dev_t data_dev_of(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		return 0;
	return S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
}

int syncguard_check_beneath(struct syncguard_lun *lun, const char *path,
			    const struct stat *st, char *err, size_t errlen)
{
	dev_t devs[2 + SYNCGUARD_LOOP_DEPTH] = { 0 };
	char what[128];
	int ret, n = 0;

	lun->data_dev = lun->blockdev ? st->st_rdev : st->st_dev;
	if (lun->blockdev &&
	    (ret = check_zvol(lun, path, st->st_rdev, err, errlen)) != 0)
		return ret;
	if (syncguard_policy_ram_metadata_ok(lun->opts.mode))
		return 0;
	devs[n++] = lun->data_dev;	/* and every loop's backing below */
	if (lun->loop_fd >= 0)
		devs[n++] = data_dev_of(lun->loop_fd);
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		if (lun->under_fd[i] >= 0)
			devs[n++] = data_dev_of(lun->under_fd[i]);
	for (int i = 0; i < n; i++) {
		if (!devs[i] || syncguard_ram_metadata_layer(
				&syncguard_host_layers, devs[i], what,
				sizeof(what)) != 1)
			continue;
		syncguard_seterr(err, errlen, "%s: mode=%s, but it stands on "
			"%s, which keeps a first write's metadata in host RAM "
			"until a flush, and plp sends none: use write-through or "
			"write-back", path, syncguard_mode_name(lun->opts.mode),
			what);
		return -EINVAL;
	}
	return 0;
}

bool syncguard_lun_beneath_lost(struct syncguard_lun *lun, char *why,
				size_t len)
{
	struct syncguard_zfs_props p;
	const char *bad;
	char name[32];

	if (lun->zvol[0] && !syncguard_zfs_get(lun->zvol, &p) &&
	    (bad = syncguard_policy_zvol(lun->opts.mode, p.sync))) {
		snprintf(why, len, "its zvol %s now has sync=%s: %s", lun->zvol,
			 p.sync, bad);
		return true;
	}
	/* Linux drops every flush to a device whose write_cache says
	 * "write through"; one that said "write back" at open was set so by
	 * hand since (plp sends none) */
	if (lun->opts.mode != SYNCGUARD_MODE_PLP && lun->dev_write_cache == 1 &&
	    syncguard_dev_write_cache(lun->data_dev, name, sizeof(name)) == 0) {
		snprintf(why, len, "the write cache of %s was set to \"write "
			 "through\": Linux now drops every flush it would get",
			 name);
		return true;
	}
	return false;
}
