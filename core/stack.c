/*
 * What lies beneath a LUN, besides file systems and loop devices
 * (core/lun.c, core/loopdev.c): a ZFS zvol and its dataset's properties, the
 * device-mapper and bcache layers that keep what a write needs in host
 * RAM until a flush, and a block device whose write cache setting
 * changes while the LUN lives.  What a dataset's sync property and a
 * RAM-keeping layer mean for each mode is core/policy.c's
 * (syncguard_policy_zvol, syncguard_policy_ram_metadata_ok); a RAM
 * block device, a device-mapper target that loses writes, and a loop
 * device or zvol under a layer the checks do not follow, are refused in
 * every mode (syncguard_layer_refused).
 *
 * Layer: beside loopdev.c (lun.c calls it at open, the mount watch while
 * the LUN lives); it uses fscheck.c, mounts.c and policy.c.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
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

#include "core.h"
#include "internal.h"

/* ---- ZFS zvols ---- */

int syncguard_zvol_dataset(const char *root, const char *path, dev_t rdev,
			   char *ds, size_t len)
{
	size_t n = strlen(root);
	char name[64];

	/* the path given: /dev/zvol/POOL/VOLUME */
	if (!strncmp(path, root, n) && path[n] == '/' && path[n + 1])
		return snprintf(ds, len, "%s", path + n + 1) < (int)len ?
		       1 : -ENAMETOOLONG;
	snprintf(name, sizeof(name), "/sys/dev/block/%u:%u/partition",
		 major(rdev), minor(rdev));
	/* a partition's link names no dataset */
	if (access(name, F_OK) && syncguard_zvol_name(root, rdev, ds, len))
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

/* Wait for child @pid until @end_us (syncguard_now_us), then kill it
 * (*@killed) and wait a second more: true once reaped (its status in
 * *@st), false for a child that would not die (stuck in the kernel on a
 * suspended pool): it is left (zfs_leave) rather than waited for without
 * end. */
static bool zfs_reap(pid_t pid, int *st, uint64_t end_us, bool *killed)
{
	for (;;) {
		pid_t r = waitpid(pid, st, WNOHANG);
		uint64_t now = syncguard_now_us();

		if (r == pid)
			return true;
		if (r < 0 && errno != EINTR)
			return false;
		if (now >= end_us) {
			if (*killed)
				return false;
			kill(pid, SIGKILL);
			*killed = true;
			end_us = now + 1000000;
		}
		usleep(2000);
	}
}

/* Children zfs_reap gave up on, by pool, reaped once they die.  While
 * one of a pool lives no other zfs get of its datasets starts (-EBUSY):
 * a suspended pool keeps one stuck zfs (or a few, begun at once), not
 * one more each round of the zvol watch, and other pools are not
 * held up.  A child left when all ZFS_LEFT_MAX places are taken (as
 * many pools stuck) is not counted, and stays a zombie. */
#define ZFS_LEFT_MAX 64
static struct {
	pid_t pid;
	char pool[256];
} zfs_left[ZFS_LEFT_MAX];
static pthread_mutex_t zfs_left_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether @a and @b name datasets of the same pool (their first
 * component). */
static bool same_pool(const char *a, const char *b)
{
	size_t n = strcspn(a, "/");

	return n == strcspn(b, "/") && !strncmp(a, b, n);
}

/* Reap the children left that died: whether one of @ds's pool lives. */
static bool zfs_left_busy(const char *ds)
{
	bool busy = false;
	int st;

	pthread_mutex_lock(&zfs_left_lock);
	for (int i = 0; i < ZFS_LEFT_MAX; i++) {
		if (zfs_left[i].pid &&
		    waitpid(zfs_left[i].pid, &st, WNOHANG) != 0)
			zfs_left[i].pid = 0;	/* reaped, or not ours */
		if (zfs_left[i].pid && same_pool(zfs_left[i].pool, ds))
			busy = true;
	}
	pthread_mutex_unlock(&zfs_left_lock);
	return busy;
}

static void zfs_leave(pid_t pid, const char *ds)
{
	pthread_mutex_lock(&zfs_left_lock);
	for (int i = 0; i < ZFS_LEFT_MAX; i++) {
		if (zfs_left[i].pid)
			continue;
		zfs_left[i].pid = pid;
		snprintf(zfs_left[i].pool, sizeof(zfs_left[i].pool), "%.*s",
			 (int)strcspn(ds, "/"), ds);
		break;
	}
	pthread_mutex_unlock(&zfs_left_lock);
}

/* Start @zfs with @argv, its output to @out_fd, with default signal
 * handling (tgtd's threads block every signal, and the child would
 * inherit that) and no descriptor of tgtd's but 0-2 (the iSCSI sockets
 * tgt opens without close-on-exec would outlive their connection in a
 * zfs that does not end).  0 or -errno. */
static int zfs_spawn(const char *zfs, char *const argv[], int out_fd,
		     pid_t *pid)
{
	char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C",
			       NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	int ret;

	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	ret = -posix_spawn(pid, zfs, &fa, &at, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	return ret;
}

/* Run zfs get for @ds; its output into @out (@len bytes, NUL-ended):
 * 0, or -errno (-ENOENT: no zfs; -ETIMEDOUT: no end of it within
 * ZFS_TIMEOUT_MS in all, and it was killed, also after it closed its
 * output; -EBUSY: an earlier one for its pool that would not die still
 * lives, zfs_left_busy; -EIO: it exited with a failure, as for a
 * dataset that does not exist).  At most ZFS_TIMEOUT_MS and a second,
 * whatever zfs does. */
static int zfs_run(const char *ds, char *out, size_t len)
{
	char *const argv[] = { "zfs", "get", "-Hp", "-o", "property,value",
			       "sync,volblocksize,logbias", (char *)ds, NULL };
	const char *zfs = zfs_binary();
	uint64_t end_us = syncguard_now_us() + ZFS_TIMEOUT_MS * 1000ull;
	int pipefd[2], ret, st = 0;
	bool killed = false;
	size_t got = 0;
	pid_t pid;

	if (!zfs)
		return -ENOENT;
	if (zfs_left_busy(ds))
		return -EBUSY;
	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	ret = zfs_spawn(zfs, argv, pipefd[1], &pid);
	close(pipefd[1]);
	if (ret) {
		close(pipefd[0]);
		return ret;
	}
	while (got + 1 < len) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		uint64_t now = syncguard_now_us();
		ssize_t n;

		if (now >= end_us ||
		    poll(&p, 1, (int)((end_us - now + 999) / 1000)) <= 0) {
			ret = -ETIMEDOUT;	/* zfs_reap kills it */
			break;
		}
		if ((n = read(pipefd[0], out + got, len - 1 - got)) <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(pipefd[0]);
	if (!zfs_reap(pid, &st, end_us, &killed)) {
		zfs_leave(pid, ds);
		return -ETIMEDOUT;
	}
	if (!ret && killed)
		ret = -ETIMEDOUT;
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

/* ---- layers that lose writes, or keep their metadata in RAM ---- */

/* Is @word one of the space-separated words of @words? */
static bool has_word(const char *words, const char *word)
{
	size_t n = strlen(word);

	if (!n)
		return false;
	for (const char *w = words; (w = strstr(w, word)) != NULL; w += n)
		if ((w == words || w[-1] == ' ') && (w[n] == ' ' || !w[n]))
			return true;
	return false;
}

/* What one device-mapper target is, for the layer rules: its type
 * @type, or for a target whose table line @params (as DM_TABLE_STATUS
 * gives it, Documentation/admin-guide/device-mapper/) makes it lose
 * writes where its type alone does not tell, the type and how, into
 * @kind (@len bytes): flakey with drop_writes ("flakey:drop_writes") or
 * corrupting writes (corrupt_bio_byte in direction w, or
 * random_write_corrupt: "flakey:corrupt_writes"); a transient snapshot
 * (persistence N: "snapshot:transient"). */
static void target_kind(const char *type, const char *params, char *kind,
			size_t len)
{
	char line[512], *save = NULL, *word[8] = { 0 };
	bool flakey = !strcmp(type, "flakey");
	const char *how = NULL;
	int n = 0;

	/* only these two types say in their table line how they lose
	 * writes: a table's many linear segments are not taken apart */
	if (!flakey && strcmp(type, "snapshot")) {
		snprintf(kind, len, "%s", type);
		return;
	}
	snprintf(line, sizeof(line), "%s", params);
	for (char *t = strtok_r(line, " ", &save); t;
	     t = strtok_r(NULL, " ", &save)) {
		word[n++ % 8] = t;	/* the last 8, for corrupt_bio_byte */
		if (!flakey)		/* snapshot <origin> <cow> <N|P|PO> */
			how = n == 3 && !strcmp(t, "N") ? "transient" : how;
		else if (!strcmp(t, "drop_writes"))
			how = "drop_writes";
		else if (!how && (!strcmp(t, "random_write_corrupt") ||
				  (n >= 3 && !strcmp(t, "w") &&	/* <Nth> <dir> */
				   !strcmp(word[(n - 3) % 8],
					   "corrupt_bio_byte"))))
			how = "corrupt_writes";
	}
	snprintf(kind, len, "%s%s%s", type, how ? ":" : "", how ? how : "");
}

int syncguard_dm_table_kinds(const struct dm_ioctl *io, size_t size,
			     char *kinds, size_t len)
{
	const char *base = (const char *)io;
	size_t at = io->data_start, used = 0;
	size_t end = io->data_size < size ? io->data_size : size;

	kinds[0] = '\0';
	if (io->flags & DM_BUFFER_FULL_FLAG)
		return -ENOBUFS;
	if (io->data_start < sizeof(*io))
		return -EIO;
	for (uint32_t i = 0; i < io->target_count; i++) {
		const struct dm_target_spec *t = (const void *)(base + at);
		char type[DM_MAX_TYPE_NAME + 1], kind[DM_MAX_TYPE_NAME + 24];
		const char *params = base + at + sizeof(*t);
		int n;

		if (at % 8 || at + sizeof(*t) >= end ||
		    !memchr(params, '\0', end - at - sizeof(*t)) ||
		    !t->target_type[0])
			return -EIO;
		snprintf(type, sizeof(type), "%.*s", DM_MAX_TYPE_NAME,
			 t->target_type);
		target_kind(type, params, kind, sizeof(kind));
		if (!has_word(kinds, kind)) {
			n = snprintf(kinds + used, len - used, "%s%s",
				     used ? " " : "", kind);
			if (n < 0 || (size_t)n >= len - used)
				return -ENOSPC;
			used += (size_t)n;
		}
		/* the next spec, further on */
		if (i + 1 < io->target_count && io->data_start + t->next <= at)
			return -EIO;
		at = io->data_start + t->next;
	}
	return 0;
}

/* The device-mapper target kinds of @dev, as syncguard_dm_table_kinds
 * gives them (DM_TABLE_STATUS on /dev/mapper/control, its answer in 16
 * KiB, or more, doubled up to 1 MiB, as a table of many segments
 * needs): 0, or -errno (-ENOBUFS: a table longer than 1 MiB). */
int syncguard_dm_targets(dev_t dev, char *types, size_t len)
{
	struct dm_ioctl *io;
	int fd, ret = -ENOBUFS;

	types[0] = '\0';
	if ((fd = open("/dev/mapper/control", O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	for (size_t size = 16384; ret == -ENOBUFS && size <= (1 << 20);
	     size *= 2) {
		if (!(io = calloc(1, size))) {
			ret = -ENOMEM;
			break;
		}
		io->version[0] = DM_VERSION_MAJOR;
		io->data_size = (uint32_t)size;
		io->data_start = sizeof(*io);
		io->dev = (uint64_t)dev;
		/* the table, not the targets' status: a thin pool or a
		 * cache would write its metadata out first, and one whose
		 * device hangs would hold up tgtd's event thread (the watch
		 * asks every round) */
		io->flags = DM_STATUS_TABLE_FLAG | DM_NOFLUSH_FLAG;
		ret = ioctl(fd, DM_TABLE_STATUS, io) ? -errno :
		      syncguard_dm_table_kinds(io, size, types, len);
		free(io);
	}
	close(fd);
	return ret;
}

/* device-mapper targets that answer a write they have thrown away or
 * will lose at a power cut, refused in every mode: zero, flakey while
 * it drops or corrupts writes (a test device), and a transient
 * snapshot, whose map of which chunk holds what lives in RAM alone */
static const struct {
	const char *kind, *name, *which;
} lossy_targets[] = {
	{ "zero", "zero", "throws every write away" },
	{ "flakey:drop_writes", "flakey with drop_writes",
	  "throws writes away while it is down" },
	{ "flakey:corrupt_writes", "flakey corrupting writes",
	  "changes what it writes" },
	{ "snapshot:transient", "snapshot, transient",
	  "keeps its map of the chunks written in host RAM alone" },
};

/* device-mapper targets that complete a write before what it needs is
 * on the device: thin, cache, writecache, vdo, clone and zoned keep the
 * new block's mapping in host RAM until a flush or their commit period;
 * integrity, in journal mode (integritysetup's default), completes a
 * write once it is in its in-memory journal */
static const char *const ram_metadata_targets[] = {
	"thin", "thin-pool", "cache", "writecache", "vdo", "clone", "zoned",
	"integrity",
};

/* The first of @kinds (space-separated target kinds) that keeps what a
 * write needs in host RAM until a flush, or NULL */
static const char *ram_metadata_target(const char *kinds)
{
	for (size_t i = 0; i < sizeof(ram_metadata_targets) /
			       sizeof(ram_metadata_targets[0]); i++)
		if (has_word(kinds, ram_metadata_targets[i]))
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

/* Is @name (a sysfs block device name) @prefix followed by a digit? */
static bool named(const char *name, const char *prefix)
{
	size_t n = strlen(prefix);

	return !strncmp(name, prefix, n) && name[n] >= '0' && name[n] <= '9';
}

/* What a walk down the layers (walk_layers) does at each device @dev,
 * named @name, its sysfs directory @sys, under @above at @depth (0: the
 * device the walk began at): nonzero ends the walk with that value. */
typedef int layer_fn(void *arg, dev_t dev, const char *sys, const char *name,
		     const char *above, int depth);

/* Is the device of sysfs directory @sys a partition?  Then its disk's
 * device number into *@dev and its name into @name (@len bytes): a
 * partition has no slaves/ of its own (md0p1's layers are md0's). */
static bool partition_of(const char *sys, dev_t *dev, char *name,
			 size_t len)
{
	char p[PATH_MAX + 16], real[PATH_MAX], num[32] = "";
	unsigned int ma, mi;
	FILE *f;

	snprintf(p, sizeof(p), "%s/partition", sys);
	if (access(p, F_OK))
		return false;
	snprintf(p, sizeof(p), "%s/../dev", sys);
	if (!(f = fopen(p, "re")))
		return false;
	if (!fgets(num, sizeof(num), f))
		num[0] = '\0';
	fclose(f);
	snprintf(p, sizeof(p), "%s/..", sys);
	if (sscanf(num, "%u:%u", &ma, &mi) != 2 || !realpath(p, real) ||
	    !strrchr(real, '/'))
		return false;
	*dev = makedev(ma, mi);
	snprintf(name, len, "%s", strrchr(real, '/') + 1);
	return true;
}

/* @fn at @dev (as layer_fn), then at each device under it that @root's
 * sysfs lists in slaves/ (device-mapper, md, bcache; a partition's
 * disk's, @fn visiting the disk too, at the partition's depth), depth
 * first, down to depth 9, where @fn is called and nothing under it
 * visited: the first nonzero return of @fn, or 0. */
static int walk_layers(const char *root, dev_t dev, const char *name,
		       const char *above, int depth, layer_fn *fn, void *arg)
{
	char sys[PATH_MAX], p[2 * PATH_MAX], num[32];
	unsigned int ma, mi;
	struct dirent *e;
	int found;
	FILE *f;
	DIR *d;

	snprintf(sys, sizeof(sys), "%s/dev/block/%u:%u", root, major(dev),
		 minor(dev));
	if ((found = fn(arg, dev, sys, name, above, depth)) || depth > 8)
		return found;
	if (partition_of(sys, &dev, p, sizeof(p)))	/* its disk's layers */
		return walk_layers(root, dev, p, above, depth, fn, arg);
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
			found = walk_layers(root, makedev(ma, mi), e->d_name,
					    name, depth + 1, fn, arg);
		fclose(f);
	}
	closedir(d);
	return found;
}

/* One walk of syncguard_layer_refused: where to read the layers,
 * whether plp's rules apply, the finding. */
struct layer_walk {
	const struct syncguard_layers *l;
	bool plp;
	char *what;
	size_t len;
	bool found_only;	/* a table that cannot be read is no finding */
};

/* Was a device-mapper table asked for, but its answer not read whole
 * (syncguard_dm_table_kinds' and syncguard_dm_targets' own errors)? */
static bool dm_answer_unread(int ret)
{
	return ret == -ENOBUFS || ret == -ENOSPC || ret == -EIO ||
	       ret == -ENOMEM;
}

/* The rules of a device-mapper layer (@dev, named @name), at open and
 * (w->found_only) on a live LUN.  In every mode: a target that loses
 * writes (lossy_targets) is SYNCGUARD_LAYER_UNSAFE, and so, at open, is
 * a table asked for but not read whole (longer than 1 MiB, or
 * malformed), which could hide one.  For plp: a target that keeps a
 * write's metadata in host RAM until a flush is SYNCGUARD_LAYER_RAM,
 * and so, at open, is a table that cannot be asked for at all (no
 * /dev/mapper/control, no permission).  The other modes pass over such
 * a table: they send the flushes every RAM-keeping target needs, and
 * what they look for in it are test devices and a transient snapshot,
 * where refusing every LUN on LVM for a control node not there would
 * refuse the many for the few.  A live LUN is not failed for a read
 * that failed.  The reason in w->what, or 0. */
static int dm_rules(struct layer_walk *w, dev_t dev, const char *name)
{
	char kinds[256];
	const char *t;
	int ret;

	if ((ret = w->l->dm_targets(dev, kinds, sizeof(kinds))) != 0) {
		bool unread = dm_answer_unread(ret);

		if (w->found_only || (!w->plp && !unread))
			return 0;
		snprintf(w->what, w->len, "device-mapper %s (dm %u:%u), whose "
			 "table cannot be read%s (%s), so whether it %s cannot "
			 "be told", name, major(dev), minor(dev),
			 unread ? " whole" : "", strerror(-ret),
			 w->plp ? "keeps writes in host RAM or loses them" :
			 "loses writes");
		return unread ? SYNCGUARD_LAYER_UNSAFE : SYNCGUARD_LAYER_RAM;
	}
	for (size_t i = 0; i < sizeof(lossy_targets) /
			       sizeof(lossy_targets[0]); i++) {
		if (!has_word(kinds, lossy_targets[i].kind))
			continue;
		snprintf(w->what, w->len, "device-mapper %s (dm %u:%u), which "
			 "%s", lossy_targets[i].name, major(dev), minor(dev),
			 lossy_targets[i].which);
		return SYNCGUARD_LAYER_UNSAFE;
	}
	if (w->plp && (t = ram_metadata_target(kinds))) {
		snprintf(w->what, w->len, "device-mapper %s (dm %u:%u), which "
			 "keeps a first write's metadata in host RAM until a "
			 "flush", t, major(dev), minor(dev));
		return SYNCGUARD_LAYER_RAM;
	}
	return 0;
}

/* plp's rule of a bcache layer (@dev, its sysfs directory @sys): in
 * write-back, SYNCGUARD_LAYER_RAM with the reason in w->what; or 0. */
static int bcache_rules(struct layer_walk *w, dev_t dev, const char *sys)
{
	char p[PATH_MAX + 32], text[256] = "";
	FILE *f;

	snprintf(p, sizeof(p), "%s/bcache/cache_mode", sys);
	if (!(f = fopen(p, "re")))
		return 0;
	if (!fgets(text, sizeof(text), f))
		text[0] = '\0';
	fclose(f);
	if (!bracketed(text, "writeback"))
		return 0;
	snprintf(w->what, w->len, "bcache in write-back (%u:%u), which keeps "
		 "a first write's metadata in host RAM until a flush",
		 major(dev), minor(dev));
	return SYNCGUARD_LAYER_RAM;
}

/* The rules of one layer (a layer_fn; @arg the struct layer_walk):
 * SYNCGUARD_LAYER_UNSAFE or (dm_rules, bcache_rules)
 * SYNCGUARD_LAYER_RAM with the reason in w->what, or 0. */
static int layer_rules(void *arg, dev_t dev, const char *sys,
		       const char *name, const char *above, int depth)
{
	struct layer_walk *w = arg;
	bool zvol = named(name, "zd");
	char p[PATH_MAX + 16];
	int ret;

	if (depth > 8) {
		if (w->found_only)	/* not checked, as a table not read */
			return 0;
		snprintf(w->what, w->len, "more than 8 layers of block devices "
			 "(%s), not checked that deep", name);
		return SYNCGUARD_LAYER_UNSAFE;
	}

	if (syncguard_ram_device_name(name)) {
		snprintf(w->what, w->len, "a RAM block device (%s%s%s), where "
			 "nothing survives a power cut: put the LUN on a disk",
			 name, depth ? " under " : "", depth ? above : "");
		return SYNCGUARD_LAYER_UNSAFE;
	}
	/* right under the LUN or its file system, core/loopdev.c and the
	 * zvol check follow them; through a layer, nothing does */
	if (depth && (zvol || named(name, "loop"))) {
		snprintf(w->what, w->len, "%s %s under %s, which these checks "
			 "do not follow through that layer (%s): export the "
			 "%s itself, or a file system right on it",
			 zvol ? "the ZFS zvol" : "the loop device", name, above,
			 zvol ? "its dataset's sync property is not read" :
			 "its backing file is not checked",
			 zvol ? "zvol" : "loop device");
		return SYNCGUARD_LAYER_UNSAFE;
	}
	snprintf(p, sizeof(p), "%s/dm", sys);
	if (!access(p, F_OK) && (ret = dm_rules(w, dev, name)) != 0)
		return ret;
	return w->plp ? bcache_rules(w, dev, sys) : 0;
}

/* syncguard_layer_refused; with @found_only, a device-mapper table that
 * cannot be read is passed over rather than refused */
static int layers_refused(const struct syncguard_layers *l, dev_t dev,
			  bool plp, bool found_only, char *what, size_t len)
{
	struct layer_walk w = { l, plp, what, len, found_only };
	char sys[PATH_MAX], real[PATH_MAX];
	const char *name = "";

	if (strlen(l->sysfs) > 256)
		return 0;

	/* the device's own name: its sysfs link's target */
	snprintf(sys, sizeof(sys), "%s/dev/block/%u:%u", l->sysfs, major(dev),
		 minor(dev));
	if (realpath(sys, real) && strrchr(real, '/'))
		name = strrchr(real, '/') + 1;
	return walk_layers(l->sysfs, dev, name, "", 0, layer_rules, &w);
}

int syncguard_layer_refused(const struct syncguard_layers *l, dev_t dev,
			    bool plp, char *what, size_t len)
{
	return layers_refused(l, dev, plp, false, what, len);
}

const struct syncguard_layers syncguard_host_layers = {
	.sysfs = "/sys", .dm_targets = syncguard_dm_targets,
};

/* ---- at open, and while the LUN lives ---- */

/* What syncguard_zfs_get's -errno @ret means, for a message. */
static const char *zfs_failure(int ret)
{
	switch (ret) {
	case -ENOENT:
		return "no zfs";
	case -ETIMEDOUT:
		return "zfs get did not answer in 5 s";
	case -EBUSY:
		return "an earlier zfs get for its pool was killed and has not "
		       "ended: is the pool suspended?";
	default:
		return strerror(-ret);
	}
}

/* Dataset @ds under @lun, the LUN's own zvol if @own, the zvol @dev (0:
 * a file system's dataset): its sync property as the policy wants it
 * (its volblocksize, for its own zvol, as the LUN's physical block),
 * kept for the watch.  0 or -EINVAL. */
static int check_dataset(struct syncguard_lun *lun, const char *path,
			 const char *ds, dev_t dev, bool own, char *err,
			 size_t errlen)
{
	struct syncguard_zfs_props p;
	const char *why;
	int i, ret;

	for (i = 0; i < SYNCGUARD_ZFS_DEPTH && lun->zfs[i][0]; i++)
		if (!strcmp(lun->zfs[i], ds))
			return 0;	/* checked already */
	if ((ret = syncguard_zfs_get(ds, &p)) != 0) {
		syncguard_seterr(err, errlen, "%s: on ZFS dataset %s, whose sync "
			"property cannot be read (%s, from /usr/sbin/zfs or "
			"/sbin/zfs), so whether its flushes reach the disk cannot "
			"be told", path, ds, zfs_failure(ret));
		return -EINVAL;
	}
	if ((why = syncguard_policy_zvol(lun->opts.mode, p.sync))) {
		syncguard_seterr(err, errlen, "%s: ZFS dataset %s has sync=%s, "
			"and mode=%s: %s", path, ds, p.sync,
			syncguard_mode_name(lun->opts.mode), why);
		return -EINVAL;
	}
	if (i == SYNCGUARD_ZFS_DEPTH) {
		syncguard_seterr(err, errlen, "%s: on more than %d ZFS datasets: "
			"not checked that deep, so not exported", path,
			SYNCGUARD_ZFS_DEPTH);
		return -EINVAL;
	}
	snprintf(lun->zfs[i], sizeof(lun->zfs[i]), "%s", ds);
	snprintf(lun->zfs_sync[i], sizeof(lun->zfs_sync[i]), "%s", p.sync);
	snprintf(lun->zfs_logbias[i], sizeof(lun->zfs_logbias[i]), "%s",
		 p.logbias);
	lun->zfs_dev[i] = dev;
	/* initiators align to it: READ CAPACITY(16), Block Limits */
	if (own && p.volblocksize && !(p.volblocksize & (p.volblocksize - 1)) &&
	    p.volblocksize >= (1u << lun->block_shift))
		lun->phys_block_size = p.volblocksize;
	return 0;
}

/* Is @dev a zvol (the LUN's own, @path, if @own)?  Its dataset checked
 * (check_dataset).  0, or -EINVAL (also a zdN no /dev/zvol link names:
 * its dataset cannot be read). */
static int check_zvol(struct syncguard_lun *lun, const char *path,
		      const char *opened_as, dev_t dev, bool own, char *err,
		      size_t errlen)
{
	char ds[256];
	int ret = syncguard_zvol_dataset("/dev/zvol", opened_as, dev, ds,
					 sizeof(ds));

	if (ret < 0) {
		syncguard_seterr(err, errlen, "%s: on a ZFS zvol whose dataset "
			"no /dev/zvol link names, so its sync property cannot be "
			"read: give the LUN its /dev/zvol/POOL/VOLUME path", path);
		return -EINVAL;
	}
	return ret ? check_dataset(lun, path, ds, dev, own, err, errlen) : 0;
}

/* Is the open file @fd on a ZFS file system?  Its dataset (the mount's
 * source) checked.  0 or -EINVAL. */
static int check_zfs_file(struct syncguard_lun *lun, const char *path, int fd,
			  const char *table, char *err, size_t errlen)
{
	char type[32], ds[256];

	if (syncguard_mount_source(fd, table, type, sizeof(type), ds,
				   sizeof(ds)) || strcmp(type, "zfs"))
		return 0;
	return check_dataset(lun, path, ds, 0, false, err, errlen);
}

/* Every ZFS dataset under @lun: its own zvol, the zvols its data devices
 * are (the file system's, a loop's backing), the ZFS file systems its
 * files are on (its own, a loop's backing files).  0 or -EINVAL. */
static int check_zfs(struct syncguard_lun *lun, const char *path,
		     const dev_t *devs, int n, char *err, size_t errlen)
{
	int files[2 + SYNCGUARD_LOOP_DEPTH], nf = 0, ret = 0;
	char *table = NULL;

	if (lun->blockdev)
		ret = check_zvol(lun, path, path, devs[0], true, err, errlen);
	for (int i = lun->blockdev; !ret && i < n; i++)
		ret = check_zvol(lun, path, "", devs[i], false, err, errlen);
	if (!lun->blockdev)
		files[nf++] = lun->fd;
	files[nf++] = lun->loop_fd;
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		files[nf++] = lun->under_fd[i];
	for (int i = 0; !ret && i < nf; i++) {
		if (files[i] < 0)
			continue;
		/* a file's dataset is its mount's source: no table, no
		 * check, no LUN */
		if (!table && !(table = syncguard_mounts_read_for(path, err,
								  errlen)))
			ret = -EINVAL;
		else
			ret = check_zfs_file(lun, path, files[i], table, err,
					     errlen);
	}
	free(table);
	return ret;
}

/* A layer that a table reload can change under a live LUN (a layer_fn):
 * a device-mapper, md or bcache device, or one under another */
static int layered(void *arg, dev_t dev, const char *sys, const char *name,
		   const char *above, int depth)
{
	static const char *const kinds[] = { "dm", "md", "bcache" };
	char p[PATH_MAX + 16];

	(void)arg;
	(void)dev;
	(void)name;
	(void)above;
	for (size_t i = 0; !depth && i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", sys, kinds[i]);
		if (!access(p, F_OK))
			return 1;
	}
	return depth > 0;
}

/* The write cache of a device under a LUN (a layer_fn; @arg a struct
 * cache_walk).  One Linux sends flushes to ("write back") is kept in
 * lun->cached_dev, at open and when the watch finds it under the LUN
 * later (a pvmove onto it).  One kept so that says "write through" now
 * was set so by hand, and Linux drops every flush to it: 1, the reason
 * in why (the watch; at open why is NULL).  A "write back" one that
 * finds lun->cached_dev full sets w->full; each one met is marked in
 * w->seen, and then, the table being full, those not met in the whole
 * walk (no longer under the LUN: a pvmove off them, a path that came
 * back as another sdX) are dropped (cache_prune). */
_Static_assert(SYNCGUARD_CACHED_DEVS <= 64, "cache_walk.seen: a bit each");

struct cache_walk {
	struct syncguard_lun *lun;
	char *why;
	size_t len;
	bool full;		/* a device found no room */
	uint64_t seen;		/* bit i: lun->cached_dev[i] met */
};

static int cache_rules(void *arg, dev_t dev, const char *sys,
		       const char *name, const char *above, int depth)
{
	struct cache_walk *w = arg;
	struct syncguard_lun *lun = w->lun;
	char dev_name[32];
	unsigned int i = 0;
	int wc;

	(void)sys;
	(void)name;
	(void)above;
	if (depth > 8)
		return 0;
	while (i < lun->n_cached_dev && lun->cached_dev[i] != dev)
		i++;
	if (i < lun->n_cached_dev)	/* still under it, if unreadable now */
		w->seen |= 1ull << i;
	if ((wc = syncguard_dev_write_cache(dev, dev_name,
					    sizeof(dev_name))) < 0)
		return 0;
	if (wc == 1 && i == SYNCGUARD_CACHED_DEVS)
		w->full = true;
	else if (wc == 1 && i == lun->n_cached_dev) {
		lun->cached_dev[lun->n_cached_dev++] = dev;
		w->seen |= 1ull << i;
	}
	if (wc == 1 || i == lun->n_cached_dev || !w->why)
		return 0;
	snprintf(w->why, w->len, "the write cache of %s was set to \"write "
		 "through\": Linux now drops every flush it would get",
		 dev_name);
	return 1;
}

/* After a whole walk @w that found lun->cached_dev full (w->full): the
 * devices it did not meet dropped.  Is it still too full?  Only then:
 * a walk that could not read a slaves/ directory meets less than is
 * under the LUN, and a device dropped so, set to "write through" before
 * the next round, would not be followed. */
static bool cache_prune(struct cache_walk *w)
{
	struct syncguard_lun *lun = w->lun;
	unsigned int n = 0;

	if (!w->full)
		return false;
	for (unsigned int i = 0; i < lun->n_cached_dev; i++)
		if (w->seen & (1ull << i))
			lun->cached_dev[n++] = lun->cached_dev[i];
	lun->n_cached_dev = n;
	return n == SYNCGUARD_CACHED_DEVS;
}

/* The devices under @lun into @devs (room for SYNCGUARD_LAYER_DEVS):
 * those of its own device or file system, then of each loop's backing
 * file below (syncguard_data_devs).  How many, or -EINVAL with the reason
 * in @err. */
static int lun_data_devs(struct syncguard_lun *lun, const char *path,
			 dev_t *devs, char *err, size_t errlen)
{
	int fds[2 + SYNCGUARD_LOOP_DEPTH], nf = 0, n = 0, ret = 0;
	char *table = NULL;

	fds[nf++] = lun->fd;
	if (lun->loop_fd >= 0)
		fds[nf++] = lun->loop_fd;
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		if (lun->under_fd[i] >= 0)
			fds[nf++] = lun->under_fd[i];
	if ((!lun->blockdev || nf > 1) &&
	    !(table = syncguard_mounts_read_for(path, err, errlen)))
		return -EINVAL;
	for (int i = 0; ret >= 0 && i < nf; i++) {
		ret = syncguard_data_devs(fds[i], table, devs + n,
					  SYNCGUARD_LAYER_DEVS - n);
		n += ret > 0 ? ret : 0;
	}
	free(table);
	if (ret == -ENOBUFS)
		syncguard_seterr(err, errlen, "%s: more than %d block devices "
			"under it (its file system's, a btrfs's, loops'): what "
			"it survives is not checked that wide, so it is not "
			"exported", path, SYNCGUARD_LAYER_DEVS);
	else if (ret < 0 && ret != -ENOENT)
		syncguard_seterr(err, errlen, "%s: the block devices under its "
			"file system cannot be listed (%s), so what it survives "
			"cannot be checked: not exported", path, strerror(-ret));
	/* an overlay whose upper layer cannot be found (-ENOENT) was
	 * refused by syncguard_check_fs already */
	return ret < 0 && ret != -ENOENT ? -EINVAL : n;
}

int syncguard_check_beneath(struct syncguard_lun *lun, const char *path,
			    char *err, size_t errlen)
{
	dev_t devs[SYNCGUARD_LAYER_DEVS] = { 0 };
	char what[384];
	int ret, n;
	bool plp;

	if ((n = lun_data_devs(lun, path, devs, err, errlen)) < 0)
		return n;
	if ((ret = check_zfs(lun, path, devs, n, err, errlen)) != 0)
		return ret;
	lun->n_layer_dev = 0;
	lun->stacked = false;
	for (int i = 0; i < n; i++) {
		if (!devs[i])
			continue;
		lun->layer_dev[lun->n_layer_dev++] = devs[i];
		if (walk_layers("/sys", devs[i], "", "", 0, layered, NULL))
			lun->stacked = true;
	}
	if (lun->opts.mode != SYNCGUARD_MODE_PLP) {	/* plp sends none */
		struct cache_walk w = { lun, NULL, 0, false, 0 };

		for (int i = 0; i < n; i++)	/* and under each loop */
			walk_layers("/sys", devs[i], "", "", 0, cache_rules,
				    &w);
		if (cache_prune(&w)) {
			syncguard_seterr(err, errlen, "%s: more than %d devices "
				"with a write cache under it: a change of their "
				"settings would not be seen, so it is not "
				"exported", path, SYNCGUARD_CACHED_DEVS);
			return -EINVAL;
		}
	}
	plp = !syncguard_policy_ram_metadata_ok(lun->opts.mode);
	for (int i = 0; i < n; i++) {
		int found = devs[i] ? syncguard_layer_refused(
			&syncguard_host_layers, devs[i], plp, what,
			sizeof(what)) : 0;

		if (found == SYNCGUARD_LAYER_UNSAFE)
			syncguard_seterr(err, errlen, "%s: it stands on %s", path,
					 what);
		else if (found)
			syncguard_seterr(err, errlen, "%s: mode=plp, but it "
				"stands on %s, and plp sends no flush: use "
				"write-through or write-back", path, what);
		if (found)
			return -EINVAL;
	}
	return 0;
}

bool syncguard_lun_layers_lost(const struct syncguard_lun *lun,
			       const struct syncguard_layers *l, char *why,
			       size_t len)
{
	bool plp = !syncguard_policy_ram_metadata_ok(lun->opts.mode);
	char what[384];

	for (unsigned int i = 0; i < lun->n_layer_dev; i++) {
		int found = layers_refused(l, lun->layer_dev[i], plp, true,
					   what, sizeof(what));

		if (!found)
			continue;
		snprintf(why, len, "a layer under it changed: it now stands on "
			 "%s%s", what, found == SYNCGUARD_LAYER_RAM ?
			 ", and plp sends no flush" : "");
		return true;
	}
	return false;
}

bool syncguard_lun_beneath_lost(struct syncguard_lun *lun, char *why,
				size_t len)
{
	struct cache_walk w = { lun, why, len, false, 0 };
	bool plp = lun->opts.mode == SYNCGUARD_MODE_PLP;

	/* Linux drops every flush to a device whose write_cache says
	 * "write through"; one under the LUN that said "write back" (at
	 * open, or in an earlier round) was set so by hand since */
	for (unsigned int i = 0; !plp && i < lun->n_layer_dev; i++)
		if (walk_layers("/sys", lun->layer_dev[i], "", "", 0,
				cache_rules, &w))
			return true;
	if (!plp && cache_prune(&w)) {
		snprintf(why, len, "more than %d devices with a write cache "
			 "are under it now: a change of their settings would "
			 "not be seen", SYNCGUARD_CACHED_DEVS);
		return true;
	}
	return syncguard_lun_layers_lost(lun, &syncguard_host_layers, why,
					 len);
}

/* ---- the file systems under a LUN, while it lives ---- */

/* The descriptor of the file whose file system carries @lun's flushes
 * (its file, or a loop device's backing file); -1 for a block device
 * that is no loop device (its flushes go to it) and for plp (whose
 * durability rests on no device cache flush: syncguard_lun_flushes_lost). */
static int flushes_via(const struct syncguard_lun *lun)
{
	if (lun->opts.mode == SYNCGUARD_MODE_PLP)
		return -1;
	return lun->loop_fd >= 0 ? lun->loop_fd : lun->blockdev ? -1 : lun->fd;
}

bool syncguard_lun_needs_watch(const struct syncguard_lun *lun)
{
	return flushes_via(lun) >= 0 || lun->loop_dio_attr[0][0] ||
	       lun->zfs[0][0] || lun->n_cached_dev || lun->stacked;
}

/* Has the file system of @fd lost its flushes (remounted nobarrier),
 * or, for an overlay, its upper layer's, down to @depth 4? */
static bool fd_flushes_lost(int fd, const char *table, int depth)
{
	char upper[PATH_MAX];
	bool lost;
	int dfd;

	if (syncguard_fs_barriers(fd, table) == 0)
		return true;
	if (depth >= 4 || (dfd = syncguard_overlay_upper_open(fd, table,
				upper, sizeof(upper))) < 0)
		return false;
	lost = fd_flushes_lost(dfd, table, depth + 1);
	close(dfd);
	return lost;
}

bool syncguard_lun_flushes_lost(struct syncguard_lun *lun, const char *table)
{
	int fd = flushes_via(lun);

	if (fd < 0)
		return false;
	if (fd_flushes_lost(fd, table, 0))
		return true;
	/* every file below, each through its overlay too (an overlay
	 * under a loop's backing file looked through only at creation
	 * would hide a remount nobarrier of its upper layer's file system:
	 * test_blockdev_remount_under_overlay_in_stack) */
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		if (lun->under_fd[i] >= 0 &&
		    fd_flushes_lost(lun->under_fd[i], table, 0))
			return true;
	return false;
}
