/*
 * syncguard-devmodel: a disk with a volatile write cache, as a FUSE file
 * system (libfuse3), for power-cut simulation and fault injection.
 *
 * It exports one file, disk.img, whose stable contents live in a host
 * file (--image).  The kernel's FUSE writeback cache plays the host page
 * cache; this daemon plays the device:
 *   - a write lands in the device's volatile cache (per block, every
 *     version since the last flush is kept);
 *   - fsync/fdatasync (FUSE_FSYNC: what fdatasync, O_DSYNC and RWF_DSYNC
 *     writes end in) makes every cached block stable;
 *   - "cut" (written to the control file) is the power cut: each cached
 *     block keeps a random one of its versions or none (real caches write
 *     back in any order), that is written to the image, and from then on
 *     every request fails with EIO, so nothing after the cut reaches the
 *     image and no flush after it can succeed;
 *   - with --plp the cache is power-loss protected: writes are stable on
 *     arrival;
 *   - with --flush-ms MS a flush takes that long (a slow device cache
 *     flush), and flushes that arrive while one runs are merged into the
 *     next single one, as the Linux block layer merges pending flushes.
 * The atomic unit is --block bytes (default 4096): a block is never torn.
 * It sees every I/O the module does, whatever API it uses, because all of
 * it goes through the kernel's FUSE file.
 *
 * Control file .ctl (write one command per write(2)):
 *   cut                       power cut, as above
 *   fail-fsync ERRNO [N]      the next N fsyncs fail (N omitted: all)
 *   fail-write ERRNO [N]      the next N writes fail
 *                             (ERRNO: a name, EIO ENFILE EAGAIN ..., or a number;
 *                             Linux's FUSE writeback drops EINTR: the data is
 *                             lost and no fsync reports it, so fail-write EINTR
 *                             loses data no target can see)
 *   clear                     stop injecting faults
 *   flush-ms MS               flushes take MS milliseconds from now on
 * Reading .ctl gives counters: writes, fsyncs (requests), flushes (device
 * flushes done), cached blocks.
 *
 * usage: syncguard-devmodel --image FILE [--block BYTES] [--plp]
 *                           [--flush-ms MS] [--max-versions N] [--seed N]
 *                           MOUNTPOINT [fuse options]
 * --max-versions N keeps only the newest N versions of a cached block
 * (a cache that merges overwrites; bounds memory in benchmarks).
 */
#define FUSE_USE_VERSION 35
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "toolutil.h"

#define DISK "/disk.img"
#define CTL "/.ctl"

struct version {
	struct version *older;
	uint8_t data[];
};

struct fault {
	int err;	/* errno to return, 0 = none */
	long left;	/* how many more; -1 = all */
};

struct model {
	int stable_fd;
	uint64_t size, nblocks;
	unsigned int block;
	unsigned int max_versions;	/* per cached block; 0 = all */
	bool plp, frozen;
	uint64_t rng;
	pthread_mutex_t lock;
	struct version **cache;	/* per block: newest version first */
	uint64_t *dirty;	/* indices of cached blocks */
	uint64_t ndirty;
	struct fault fail_write, fail_fsync;
	uint64_t writes, fsyncs, cut_kept, cut_dropped;
	/* slow flushes, merged */
	unsigned int flush_us;
	pthread_cond_t flushed;
	uint64_t started, completed, flushes;
	bool flushing;
};

static struct model M = { .block = 4096, .rng = 1,
			  .lock = PTHREAD_MUTEX_INITIALIZER,
			  .flushed = PTHREAD_COND_INITIALIZER };

static uint64_t rnd(void)
{
	return xorshift64(&M.rng);
}

/* Consume one injected fault; returns -errno or 0. */
static int take_fault(struct fault *f)
{
	if (!f->err || !f->left)
		return 0;
	if (f->left > 0)
		f->left--;
	return -f->err;
}

/* Current contents of block @b (cache, else stable image) into @buf. */
static int read_block(uint64_t b, uint8_t *buf)
{
	if (M.cache[b]) {
		memcpy(buf, M.cache[b]->data, M.block);
		return 0;
	}
	return pread(M.stable_fd, buf, M.block, (off_t)(b * M.block)) ==
	       (ssize_t)M.block ? 0 : -EIO;
}

static int write_stable(uint64_t b, const uint8_t *data)
{
	return pwrite(M.stable_fd, data, M.block, (off_t)(b * M.block)) ==
	       (ssize_t)M.block ? 0 : -EIO;
}

static void drop_versions(uint64_t b)
{
	struct version *v = M.cache[b];

	while (v) {
		struct version *o = v->older;

		free(v);
		v = o;
	}
	M.cache[b] = NULL;
}

/* Add @data as the newest version of block @b. */
static int cache_block(uint64_t b, const uint8_t *data)
{
	struct version *v;

	if (M.plp)
		return write_stable(b, data);
	v = malloc(sizeof(*v) + M.block);
	if (!v)
		return -ENOMEM;
	memcpy(v->data, data, M.block);
	v->older = M.cache[b];
	if (!M.cache[b])
		M.dirty[M.ndirty++] = b;
	M.cache[b] = v;
	if (M.max_versions) {		/* a cache may merge overwrites */
		unsigned int n = 1;

		for (; v->older && n < M.max_versions; v = v->older)
			n++;
		while (v->older) {
			struct version *o = v->older;

			v->older = o->older;
			free(o);
		}
	}
	return 0;
}

/* FUSE_FSYNC: everything cached becomes stable. */
static int flush_all(void)
{
	int ret = 0;

	for (uint64_t i = 0; i < M.ndirty; i++) {
		uint64_t b = M.dirty[i];

		if (!ret)
			ret = write_stable(b, M.cache[b]->data);
		drop_versions(b);
	}
	M.ndirty = 0;
	return ret;
}

/* A failed flush: the device lost what it had cached (and says so once). */
static void lose_cache(void)
{
	for (uint64_t i = 0; i < M.ndirty; i++)
		drop_versions(M.dirty[i]);
	M.ndirty = 0;
}

/* The power cut: each cached block keeps a random version, or none. */
static void cut(void)
{
	for (uint64_t i = 0; i < M.ndirty; i++) {
		uint64_t b = M.dirty[i];
		unsigned int n = 0, pick;
		struct version *v;

		for (v = M.cache[b]; v; v = v->older)
			n++;
		pick = (unsigned int)(rnd() % (n + 1));	/* 0: none, k: the
							 * k-th newest */
		for (v = M.cache[b]; v && pick > 1; pick--)
			v = v->older;
		if (pick && v && write_stable(b, v->data) == 0)
			M.cut_kept++;
		else
			M.cut_dropped++;
		drop_versions(b);
	}
	M.ndirty = 0;
	fdatasync(M.stable_fd);
	M.frozen = true;
}

/* Move @len bytes at @off (within the disk) block by block: into the
 * cache from @in, or out of it (newest version, else stable) into @out.
 * With M.lock held; 0 or -errno. */
static int blocks_io(const char *in, char *out, size_t len, uint64_t off)
{
	static uint8_t *blk;
	size_t done = 0;
	int ret = 0;

	if (!blk && !(blk = malloc(M.block)))
		return -ENOMEM;
	while (!ret && done < len) {
		uint64_t pos = off + done, b = pos / M.block;
		size_t at = pos % M.block, n = M.block - at;

		if (n > len - done)
			n = len - done;
		ret = read_block(b, blk);
		if (in) {
			memcpy(blk + at, in + done, n);
			if (!ret)
				ret = cache_block(b, blk);
		} else {
			memcpy(out + done, blk + at, n);
		}
		done += n;
	}
	return ret;
}

static int do_write(const char *buf, size_t len, off_t off)
{
	int ret = take_fault(&M.fail_write);

	if (!ret && (off < 0 || (uint64_t)off + len > M.size))
		ret = -ENOSPC;
	if (!ret)
		ret = blocks_io(buf, NULL, len, (uint64_t)off);
	M.writes++;
	return ret ? ret : (int)len;
}

static int do_read(char *buf, size_t len, off_t off)
{
	int ret;

	if (off < 0 || (uint64_t)off >= M.size)
		len = 0;
	else if ((uint64_t)off + len > M.size)
		len = M.size - (uint64_t)off;
	ret = blocks_io(NULL, buf, len, (uint64_t)off);
	return ret ? ret : (int)len;
}

/* ---- control file ---- */

/* An errno by name (the ones a device, a daemon or a server can hand
 * back from a write or a flush) or by number; 0 if neither. */
static int parse_errno(const char *s)
{
	static const struct {
		const char *name;
		int err;
	} names[] = {
		{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT },
		{ "EROFS", EROFS }, { "EMFILE", EMFILE }, { "ENFILE", ENFILE },
		{ "ENOMEM", ENOMEM }, { "EINTR", EINTR }, { "EAGAIN", EAGAIN },
		{ "ENOSYS", ENOSYS }, { "EPERM", EPERM }, { "ENXIO", ENXIO },
		{ "EOPNOTSUPP", EOPNOTSUPP }, { "ESHUTDOWN", ESHUTDOWN },
	};
	char *end;
	long n = strtol(s, &end, 10);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(s, names[i].name))
			return names[i].err;
	return end != s && !*end && n > 0 && n < 4096 ? (int)n : 0;
}

static int control(const char *cmd)
{
	char verb[32] = "", err[32] = "";
	long n = -1;
	struct fault *f = NULL;

	if (sscanf(cmd, "%31s %31s %ld", verb, err, &n) < 1)
		return -EINVAL;
	if (!strcmp(verb, "cut")) {
		cut();
		return 0;
	}
	if (!strcmp(verb, "clear")) {
		M.fail_write.err = M.fail_fsync.err = 0;
		return 0;
	}
	if (!strcmp(verb, "flush-ms")) {
		char *end;
		double ms = strtod(err, &end);

		if (end == err || *end || ms < 0 || ms > 60000)
			return -EINVAL;
		__atomic_store_n(&M.flush_us, (unsigned int)(ms * 1000),
				 __ATOMIC_RELAXED);
		return 0;
	}
	if (!strcmp(verb, "fail-fsync"))
		f = &M.fail_fsync;
	else if (!strcmp(verb, "fail-write"))
		f = &M.fail_write;
	if (!f || !parse_errno(err))
		return -EINVAL;
	f->err = parse_errno(err);
	f->left = n;
	return 0;
}

/* ---- FUSE operations ---- */

static int m_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (!strcmp(path, "/")) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
	} else if (!strcmp(path, DISK) || !strcmp(path, CTL)) {
		st->st_mode = S_IFREG | 0600;
		st->st_nlink = 1;
		st->st_size = !strcmp(path, DISK) ? (off_t)M.size : 0;
		st->st_blksize = (blksize_t)M.block;
	} else {
		return -ENOENT;
	}
	return 0;
}

static int m_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		     off_t off, struct fuse_file_info *fi,
		     enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/"))
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	fill(buf, DISK + 1, NULL, 0, 0);
	fill(buf, CTL + 1, NULL, 0, 0);
	return 0;
}

static int m_open(const char *path, struct fuse_file_info *fi)
{
	if (!strcmp(path, CTL)) {
		fi->direct_io = 1;	/* no page cache for commands */
		return 0;
	}
	return strcmp(path, DISK) ? -ENOENT : 0;
}

static int m_read(const char *path, char *buf, size_t len, off_t off,
		  struct fuse_file_info *fi)
{
	int ret;

	(void)fi;
	pthread_mutex_lock(&M.lock);
	if (!strcmp(path, CTL)) {
		char text[256];
		int n = snprintf(text, sizeof(text), "writes %" PRIu64 "\nfsyncs %"
			PRIu64 "\nflushes %" PRIu64 "\ncached %" PRIu64 "\nkept %"
			PRIu64 "\ndropped %" PRIu64 "\nfrozen %d\n", M.writes,
			M.fsyncs, M.flushes, M.ndirty, M.cut_kept, M.cut_dropped,
			M.frozen);

		ret = off >= n ? 0 : (int)((size_t)(n - off) < len ?
					   (size_t)(n - off) : len);
		if (ret > 0)
			memcpy(buf, text + off, (size_t)ret);
	} else {
		ret = M.frozen ? -EIO : do_read(buf, len, off);
	}
	pthread_mutex_unlock(&M.lock);
	return ret;
}

static int m_write(const char *path, const char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	char cmd[128];
	int ret;

	(void)fi;
	pthread_mutex_lock(&M.lock);
	if (!strcmp(path, CTL)) {
		snprintf(cmd, sizeof(cmd), "%.*s", (int)(len < 127 ? len : 127),
			 buf);
		ret = control(cmd);
		ret = ret ? ret : (int)len;
	} else {
		ret = M.frozen ? -EIO : do_write(buf, len, off);
	}
	pthread_mutex_unlock(&M.lock);
	return ret;
}

/*
 * A slow flush (with M.lock held): wait for the first flush that starts
 * after now, or start it.  What is cached when it starts becomes stable;
 * it then takes flush_us; requests that arrive meanwhile all wait for
 * the single next one.
 */
static int slow_flush(void)
{
	uint64_t need = M.started + 1;
	int ret = 0;

	while (M.completed < need) {
		if (M.flushing) {
			pthread_cond_wait(&M.flushed, &M.lock);
			continue;
		}
		uint64_t gen = ++M.started;

		M.flushing = true;
		ret = flush_all();
		M.flushes++;
		pthread_mutex_unlock(&M.lock);
		usleep(__atomic_load_n(&M.flush_us, __ATOMIC_RELAXED));
		pthread_mutex_lock(&M.lock);
		M.flushing = false;
		M.completed = gen;
		pthread_cond_broadcast(&M.flushed);
	}
	return M.frozen ? -EIO : ret;	/* the power went meanwhile */
}

static int m_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	int ret = 0;

	(void)datasync;
	(void)fi;
	if (strcmp(path, DISK))
		return 0;
	pthread_mutex_lock(&M.lock);
	M.fsyncs++;
	if (M.frozen)
		ret = -EIO;
	if (!ret)
		ret = take_fault(&M.fail_fsync);
	/* a failed flush loses what it covered; "not now" loses nothing */
	if (ret && !M.frozen && ret != -EINTR && ret != -EAGAIN)
		lose_cache();
	if (!ret && __atomic_load_n(&M.flush_us, __ATOMIC_RELAXED))
		ret = slow_flush();
	else if (!ret) {
		ret = flush_all();
		M.flushes++;
	}
	pthread_mutex_unlock(&M.lock);
	return ret;
}

/* close(2): nothing to do, but ENOSYS would fail the caller's close */
static int m_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	(void)fi;
	return 0;
}

static int m_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	(void)fi;
	if (!strcmp(path, CTL))
		return 0;
	return (uint64_t)size == M.size ? 0 : -EPERM;
}

/* The kernel sets mtime (writeback cache) and clears suid bits: accept. */
static int m_utimens(const char *path, const struct timespec tv[2],
		     struct fuse_file_info *fi)
{
	(void)path;
	(void)tv;
	(void)fi;
	return 0;
}

static int m_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	(void)path;
	(void)mode;
	(void)fi;
	return 0;
}

static void *m_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	if (conn->capable & FUSE_CAP_WRITEBACK_CACHE)
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;	/* the host page cache */
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	return NULL;
}

static const struct fuse_operations ops = {
	.init = m_init,
	.getattr = m_getattr,
	.readdir = m_readdir,
	.open = m_open,
	.read = m_read,
	.write = m_write,
	.fsync = m_fsync,
	.flush = m_flush,
	.truncate = m_truncate,
	.utimens = m_utimens,
	.chmod = m_chmod,
};

static void usage(FILE *f)
{
	fprintf(f, "usage: syncguard-devmodel --image FILE [--block BYTES] "
		"[--plp] [--flush-ms MS] [--max-versions N] [--seed N] "
		"MOUNTPOINT [fuse options]\n"
		"Exports FILE as MOUNTPOINT/disk.img behind a volatile write "
		"cache.\n--block: a power of two from 512 (default 4096); "
		"--flush-ms: 0..60000; commands on MOUNTPOINT/.ctl: see "
		"docs/durability.md\nor this tool's source header.\n");
}

/* Option @opt's value @s as a number in [@lo, @hi] into *@v: 0, or -1
 * after saying why (a --flush-ms of -5 would make every flush take 71
 * minutes, and "abc" would be taken as 0). */
static int number(const char *opt, const char *s, double lo, double hi,
		  double *v)
{
	char *end;

	*v = strtod(s, &end);
	if (end == s || *end || *v < lo || *v > hi) {
		fprintf(stderr, "syncguard-devmodel: %s: '%s' is not a number "
			"in %.0f..%.0f\n", opt, s, lo, hi);
		return -1;
	}
	return 0;
}

/* One of our options with its value @val; -1 after saying why. */
static int set_option(const char *a, const char *val)
{
	double v;

	if (!strcmp(a, "--block")) {
		if (number(a, val, 512, 1 << 20, &v))
			return -1;
		M.block = (unsigned int)v;
		if (M.block != v || (M.block & (M.block - 1))) {
			fprintf(stderr, "syncguard-devmodel: --block: %s is not "
				"a power of two from 512 on\n", val);
			return -1;
		}
	} else if (!strcmp(a, "--seed")) {
		if (number(a, val, 0, 9007199254740992.0, &v))	/* 2^53 */
			return -1;
		M.rng = (uint64_t)v * 2654435761u + 1;
	} else if (!strcmp(a, "--max-versions")) {
		if (number(a, val, 0, 1000000, &v))
			return -1;
		M.max_versions = (unsigned int)v;
	} else {			/* --flush-ms, as the .ctl verb takes it */
		if (number(a, val, 0, 60000, &v))
			return -1;
		M.flush_us = (unsigned int)(v * 1000);
	}
	return 0;
}

/* Take our options out of argv; the rest goes to fuse_main. */
static int parse_args(int *argc, char **argv, const char **image)
{
	int out = 1;

	for (int i = 1; i < *argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--image") && i + 1 < *argc) {
			*image = argv[++i];
		} else if ((!strcmp(a, "--block") || !strcmp(a, "--seed") ||
			    !strcmp(a, "--max-versions") ||
			    !strcmp(a, "--flush-ms")) && i + 1 < *argc) {
			if (set_option(a, argv[++i]))
				return -1;
		} else if (!strcmp(a, "--plp")) {
			M.plp = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else {
			argv[out++] = argv[i];
		}
	}
	*argc = out;
	if (!*image) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/*
 * The mount point among fuse_main's arguments (the last that is neither
 * an option nor an -o value) must be a directory that is not a mount
 * point already: FUSE mounts over a regular file too (over the image
 * itself, which then reads as I/O errors), and over a model still
 * mounted there, whose .ctl then no longer reaches the model under a
 * LUN.  0, or 1 after saying why.
 */
static int check_mount_point(int argc, char **argv)
{
	const char *mnt = NULL;
	char parent[4096];
	struct stat st, up;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o"))
			i++;
		else if (argv[i][0] != '-')
			mnt = argv[i];
	}
	if (!mnt)
		return 0;	/* fuse_main says so */
	snprintf(parent, sizeof(parent), "%s/..", mnt);
	if (stat(mnt, &st)) {
		fprintf(stderr, "syncguard-devmodel: %s: %s\n", mnt,
			strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "syncguard-devmodel: %s: not a directory\n",
			mnt);
		return 1;
	}
	if (!stat(parent, &up) && (up.st_dev != st.st_dev ||
				   up.st_ino == st.st_ino)) {
		fprintf(stderr, "syncguard-devmodel: %s is a mount point "
			"already (fusermount3 -u %s first)\n", mnt, mnt);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *image = NULL;
	struct stat st;
	char **args = calloc((size_t)argc + 3, sizeof(*args));

	if (!args)
		return 1;
	memcpy(args, argv, (size_t)argc * sizeof(*args));
	argv = args;
	if (parse_args(&argc, argv, &image))
		return 2;
	if (check_mount_point(argc, argv))
		return 1;
	M.stable_fd = open(image, O_RDWR);
	if (M.stable_fd < 0 || fstat(M.stable_fd, &st)) {
		perror(image);
		return 1;
	}
	M.size = (uint64_t)st.st_size;
	M.nblocks = M.size / M.block;
	if (!M.nblocks || M.size % M.block) {
		fprintf(stderr, "%s: size is not a multiple of %u\n", image,
			M.block);
		return 1;
	}
	M.cache = calloc(M.nblocks, sizeof(*M.cache));
	M.dirty = calloc(M.nblocks, sizeof(*M.dirty));
	if (!M.cache || !M.dirty)
		return 1;
	/* libfuse 3.14 warns about its own default otherwise */
	argv[argc++] = "-o";
	argv[argc++] = "max_threads=32";
	argv[argc] = NULL;
	return fuse_main(argc, argv, &ops, NULL);
}
