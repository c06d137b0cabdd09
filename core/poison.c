/*
 * Latches that outlive the LUN.
 *
 * Layer: a primitive of the core (core/latch.c calls it; it uses only
 * sys.c), also linked into syncguard-stat, which clears records.
 *
 * A flush that failed may have dropped writes an earlier GOOD vouched
 * for, and Linux reports that once per open file description (errseq):
 * a LUN created on the same store later (a re-created LUN, a path= move
 * back, the next tgtd after a clean shutdown) opens fresh descriptors
 * that see nothing, and its first SYNCHRONIZE CACHE would answer GOOD
 * over writes that are gone.  So a latch that may stand for lost data
 * (a hard latch: a failed flush, write-out or RWF_DSYNC write, or a
 * failed final flush) is written down in a state directory, keyed by the
 * store's identity, and a LUN created on a store with such a record
 * starts latched, until the administrator has checked the data and
 * removed the record (syncguard-stat --clear-latch PATH).
 *
 * The store's identity is core/storeid.c's.  tests/unit check_exec.c,
 * test_poison_*; tests/proto check_faults.c,
 * test_faults_latch_outlives_lun.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include "core.h"
#include "internal.h"

const char *syncguard_state_dir(const struct syncguard_opts *opts)
{
	const char *env = getenv("SYNCGUARD_STATE_DIR");

	if (opts && opts->state_dir[0])
		return opts->state_dir;
	return env && env[0] == '/' ? env : SYNCGUARD_STATE_DIR_DEFAULT;
}

/* The record's path for store @id under @dir into @buf, and with @tmp
 * the name it is written under first: "." @id ".tmp", a name no store's
 * identity has (none starts with '.'), so that writing one store's record
 * never replaces another's.  0, or -ENAMETOOLONG (never a shortened
 * name: another store's). */
static int record_path(const char *dir, const char *id, bool tmp, char *buf,
		       size_t len)
{
	int n = snprintf(buf, len, tmp ? "%s/latched/.%s.tmp" : "%s/latched/%s",
			 dir, id);

	return n < 0 || (size_t)n >= len || strlen(id) + 5 > NAME_MAX ?
	       -ENAMETOOLONG : 0;
}

/* The directory @p synced (its entries made durable): 0 or -errno */
static int sync_dir(const char *p)
{
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	if (fd < 0)
		return -errno;
	ret = syncguard_fsync(fd);
	close(fd);
	return ret;
}

/* mkdir of @p (mode @mode), and if it made it, its parent synced, so
 * that the new directory survives a power cut with what goes into it:
 * 0 or -errno */
static int make_dir(char *p, mode_t mode)
{
	char *slash = strrchr(p, '/');
	int ret;

	if (mkdir(p, mode))
		return errno == EEXIST ? 0 : -errno;
	if (!slash || slash == p)
		return sync_dir(slash ? "/" : ".");
	*slash = '\0';
	ret = sync_dir(p);
	*slash = '/';
	return ret;
}

/* mkdir -p of @dir/latched (mode 0700), each directory made durable.
 * @dir is synced whether or not this call made latched/: a thread that
 * finds it made (EEXIST) while its maker's sync still runs, or after
 * that sync failed, must not count on it. */
static int make_dirs(const char *dir)
{
	char p[PATH_MAX];
	int ret = 0;

	snprintf(p, sizeof(p), "%s/latched", dir);
	for (char *s = p + 1; !ret && *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		ret = make_dir(p, 0755);
		*s = '/';
	}
	if (!ret)
		ret = make_dir(p, 0700);
	return ret ? ret : sync_dir(dir);
}

static void remember_record(const char *id, const char *dir);
static int other_final_flush(const char *dir, const char *id, bool remove,
			     char *text, size_t len);

/* @len bytes of @buf to @fd, short writes continued: 0, or -errno (a
 * full state directory says ENOSPC, not EIO) */
static int write_all(int fd, const char *buf, size_t len)
{
	ssize_t n;

	while (len) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

int syncguard_poison_write(const char *dir, const char *id, const char *path,
			   int err)
{
	char rec[PATH_MAX], tmp[PATH_MAX], text[PATH_MAX + 200], when[32];
	time_t now = time(NULL);
	struct tm tm;
	int fd, n, ret = record_path(dir, id, false, rec, sizeof(rec));

	if (!ret)
		ret = record_path(dir, id, true, tmp, sizeof(tmp));
	if (!ret)
		ret = make_dirs(dir);
	if (ret)
		return ret;
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(text, sizeof(text), "errno %d (%s)\npath %s\ntime %s\n",
		     err, strerror(err), path ? path : "?", when);
	/* the record must itself survive a power cut: written, synced,
	 * renamed into place, and the directory synced (a process killed
	 * on the way leaves the ".tmp", which latches as well).  A ".tmp"
	 * that syncguard-stat --clear-latch removed meanwhile (it cannot
	 * tell it from one left so) is written again, once. */
	for (int tries = 0; tries < 2; tries++) {
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		ret = write_all(fd, text, (size_t)n);
		if (!ret)
			ret = syncguard_fsync(fd);
		close(fd);
		if (!ret && rename(tmp, rec))
			ret = -errno;
		if (ret != -ENOENT)
			break;
	}
	if (!ret) {
		snprintf(tmp, sizeof(tmp), "%s/latched", dir);
		ret = sync_dir(tmp);	/* the rename made durable */
	} else {
		unlink(tmp);
	}
	if (!ret)
		remember_record(id, dir);
	return ret;
}

/* Is there a ".tmp" of store @id's record in @dir: one being written,
 * or left by a process stopped while it wrote it (a failed flush it was
 * recording)?  One that cannot be looked for counts. */
static bool unfinished(const char *dir, const char *id)
{
	char tmp[PATH_MAX];
	struct stat st;

	return record_path(dir, id, true, tmp, sizeof(tmp)) ||
	       !lstat(tmp, &st) || errno != ENOENT;
}

int syncguard_poison_read(const char *dir, const char *id, char *text,
			  size_t len)
{
	char rec[PATH_MAX];
	int err = 0, fd, ret = record_path(dir, id, false, rec, sizeof(rec));
	struct stat st;
	ssize_t n;

	if (ret || !len)
		return ret ? ret : -EINVAL;
	/* never wait on a FIFO, follow a link, or read a device there */
	fd = open(rec, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && unfinished(dir, id)) {
		snprintf(text, len, "errno %d (an unfinished record: being "
			 "written now, or left by a process that stopped on "
			 "the way)\n", EIO);
		return EIO;
	}
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	n = read(fd, text, len - 1);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	for (char *c = text; *c; c++)	/* a log line's characters only */
		if ((*c < ' ' && *c != '\n') || *c == 0x7f)
			*c = '?';
	if (!text[0])
		snprintf(text, len, "(an empty record)\n");
	if (sscanf(text, "errno %d", &err) != 1 || err <= 0 || err > 4095)
		err = EIO;	/* a record is a latch, whatever its text */
	return err;
}

int syncguard_poison_clear(const char *dir, const char *id)
{
	char rec[PATH_MAX], tmp[PATH_MAX];
	int ret = record_path(dir, id, false, rec, sizeof(rec)), gone;

	if (!ret)
		ret = record_path(dir, id, true, tmp, sizeof(tmp));
	if (ret)
		return ret;
	gone = unlink(tmp) ? (errno == ENOENT ? 0 : -errno) : 1;
	if (gone < 0)
		return gone;
	if (other_final_flush(dir, id, true, tmp, sizeof(tmp)) == EIO)
		gone = 1;	/* a stopped process's final flush */
	if (!unlink(rec))
		return 0;
	return errno == ENOENT && gone ? 0 : -errno;
}

/*
 * Final flushes on their way, and latches whose record could not be
 * written, in this process.  A LUN's final flush runs on a thread of its
 * own after the LUN is closed (bs_syncguard.c), so a LUN created on the
 * same store meanwhile would find no record yet, and on FUSE or a network
 * file system the failure reaches the flush's caller alone: the new
 * LUN's own flush would succeed over what the old one lost.  So the store
 * is marked before the old LUN lets go of it, and a LUN that opens on a
 * marked store waits, before its first durable command, for that flush's
 * outcome (a soft latch: core/latch.c).  A record that cannot be written
 * leaves the mark, with its errno, for the rest of the process.
 *
 * A record that was written leaves the mark with the directory it went
 * to: a LUN created on the store in this process with another state
 * directory (bsopts state_dir) looks there too, so that a change of
 * state_dir between a store's LUNs does not forget a latch while the
 * tgtd that recorded it runs (syncguard_store_record).  Once that record
 * is gone (syncguard-stat --clear-latch), the mark forgets it.
 */
static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t marks_done = PTHREAD_COND_INITIALIZER;
static struct mark {
	char id[256];
	int flushes;	/* final flushes on their way */
	int err;	/* one that failed, unrecorded: its errno */
	char *recorded_in;	/* the state directory of its last record */
} *marks;
static int nr_marks;	/* allocated; it grows, so no store goes unmarked */

/* With marks_lock held: @id's mark, or a free one (@make; -1 when none
 * can be allocated), or -1 */
static int mark_of(const char *id, bool make)
{
	int free_at = -1;
	struct mark *grown;

	for (int i = 0; i < nr_marks; i++) {
		if (!strcmp(marks[i].id, id))
			return i;
		if (free_at < 0 && !marks[i].id[0])
			free_at = i;
	}
	if (!make)
		return -1;
	if (free_at < 0) {
		grown = realloc(marks, (size_t)(nr_marks + 16) * sizeof(*marks));
		if (!grown)
			return -1;
		memset(grown + nr_marks, 0, 16 * sizeof(*marks));
		marks = grown;
		free_at = nr_marks;
		nr_marks += 16;
	}
	snprintf(marks[free_at].id, sizeof(marks[0].id), "%s", id);
	return free_at;
}

/* With marks_lock held: forget mark @i if it holds nothing */
static void unmark(int i)
{
	if (!marks[i].flushes && !marks[i].err && !marks[i].recorded_in)
		marks[i].id[0] = '\0';
}

/* Store @id's latch was recorded in @dir: the mark keeps @dir (where it
 * cannot, for want of memory, the record is still there for a LUN with
 * the same state directory). */
static void remember_record(const char *id, const char *dir)
{
	char *copy;
	int i;

	if (!id[0] || !(copy = strdup(dir)))
		return;
	pthread_mutex_lock(&marks_lock);
	if ((i = mark_of(id, true)) >= 0) {
		free(marks[i].recorded_in);
		marks[i].recorded_in = copy;
		copy = NULL;
	}
	pthread_mutex_unlock(&marks_lock);
	free(copy);
}

/* The state directory other than @dir in which this process last
 * recorded a latch of store @id, into @other (@len bytes): true, or
 * false if none. */
static bool recorded_elsewhere(const char *id, const char *dir, char *other,
			       size_t len)
{
	bool found = false;
	int i;

	pthread_mutex_lock(&marks_lock);
	if ((i = mark_of(id, false)) >= 0 && marks[i].recorded_in &&
	    strcmp(marks[i].recorded_in, dir)) {
		snprintf(other, len, "%s", marks[i].recorded_in);
		found = true;
	}
	pthread_mutex_unlock(&marks_lock);
	return found;
}

/* Store @id's record in @dir is gone (cleared): forget it, unless a
 * newer one went elsewhere meanwhile. */
static void forget_record(const char *id, const char *dir)
{
	int i;

	pthread_mutex_lock(&marks_lock);
	if ((i = mark_of(id, false)) >= 0 && marks[i].recorded_in &&
	    !strcmp(marks[i].recorded_in, dir)) {
		free(marks[i].recorded_in);
		marks[i].recorded_in = NULL;
		unmark(i);
	}
	pthread_mutex_unlock(&marks_lock);
}

/*
 * Final flushes of other processes.  The in-process mark is no help to
 * another tgtd that shares the state directory (as every tgtd that
 * exports a store should): the old LUN's descriptors, and their flock,
 * are closed before its final flush ends, so another tgtd may open the
 * store meanwhile, and its own flush would succeed over what that final
 * flush lost.  So a final flush also leaves a marker in the state
 * directory, ".<id>.flush-<pid>-<start>-<seq>" (the process and its
 * start time, so that a pid used again is not taken for it, and the
 * flush's number in the process: two of a store may overlap, in two
 * state directories), made before the
 * LUN lets go and removed once the outcome is recorded.  A LUN of
 * another process that finds it waits for the outcome while that
 * process lives (a soft latch, as for the in-process mark), and latches
 * (EIO: the outcome is unknown) where that process stopped on the way.
 * A flush that failed and whose record could not be written leaves its
 * marker renamed ".<id>.failed-...", which latches other processes'
 * LUNs until it is cleared.  The marker is not synced: after a power cut
 * the flush it stood for vouched for nothing.
 * test_poison_other_final_flush.
 */

/* The start time of process @pid (/proc/PID/stat field 22, clock
 * ticks since boot), 0 when there is no such process */
static unsigned long long proc_start(long pid)
{
	char p[64], buf[1024], *c;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	if (!(c = strrchr(buf, ')')) || c[1] != ' ' || c[2] == 'Z')
		return 0;	/* (after the command's name) a zombie is gone */
	for (int field = 2; *c && field < 22; c++)
		if (*c == ' ')
			field++;
	return sscanf(c, "%llu", &start) == 1 ? start : 0;
}

/* A marker's kinds: a final flush on its way, and one that failed and
 * whose record could not be written (the marker stays, renamed) */
enum marker_kind { MARKER_NONE, MARKER_FLUSH, MARKER_FAILED };
static const char *const marker_names[] = { "", "flush", "failed" };

/* proc_start of this process, read once (a process short of
 * descriptors cannot read it, and would not find its own markers) */
static unsigned long long self_start(void)
{
	static long pid;			/* whose (a fork's child reads
						 * its own again) */
	static unsigned long long start;
	long me = (long)getpid();
	unsigned long long st;

	if (__atomic_load_n(&pid, __ATOMIC_ACQUIRE) == me &&
	    (st = __atomic_load_n(&start, __ATOMIC_RELAXED)))
		return st;
	if ((st = proc_start(me))) {
		__atomic_store_n(&start, st, __ATOMIC_RELAXED);
		__atomic_store_n(&pid, me, __ATOMIC_RELEASE);
	}
	return st;
}

/* The path of the @kind marker of final flush @seq of store @id by
 * process @pid in @dir into @buf: 0, -ESRCH or -ENAMETOOLONG */
static int marker_path(const char *dir, const char *id,
		       enum marker_kind kind, long pid, unsigned int seq,
		       char *buf, size_t len)
{
	unsigned long long start = pid == (long)getpid() ? self_start() :
				   proc_start(pid);
	int n = snprintf(buf, len, "%s/latched/.%s.%s-%ld-%llu-%u", dir, id,
			 marker_names[kind], pid, start, seq);

	/* the name: '.', the id, ".failed-", at most 7 + 1 + 20 + 1 + 10 */
	return !start ? -ESRCH : n < 0 || (size_t)n >= len ||
	       strlen(id) + 48 > NAME_MAX ? -ENAMETOOLONG : 0;
}

int syncguard_flush_marker(const char *dir, const char *id, long pid,
			   unsigned int seq, char *buf, size_t len)
{
	return marker_path(dir, id, MARKER_FLUSH, pid, seq, buf, len);
}

/* Is @name a marker of store @id: "." @id "." kind "-", then exactly
 * "<pid>-<start>-<seq>"?  Its kind, with its process into *@pid and
 * *@start, or MARKER_NONE. */
static enum marker_kind marker_of(const char *name, const char *id,
				  long *pid, unsigned long long *start)
{
	size_t n = strlen(id);
	unsigned int seq;
	int end = 0;

	if (name[0] != '.' || strncmp(name + 1, id, n) || name[n + 1] != '.')
		return MARKER_NONE;
	name += n + 2;
	for (int k = MARKER_FLUSH; k <= MARKER_FAILED; k++) {
		size_t kl = strlen(marker_names[k]);

		if (!strncmp(name, marker_names[k], kl) && name[kl] == '-' &&
		    sscanf(name + kl + 1, "%ld-%llu-%u%n", pid, start, &seq,
			   &end) == 3 && !name[kl + 1 + (size_t)end])
			return (enum marker_kind)k;
	}
	return MARKER_NONE;
}

int syncguard_record_store(const char *name, char *id, size_t len)
{
	size_t n = strlen(name);
	unsigned long long start;
	long pid;

	if (name[0] != '.')			/* a record */
		return snprintf(id, len, "%s", name) < (int)len ? 0 : -EINVAL;
	if (n > 5 && !strcmp(name + n - 4, ".tmp") && n - 5 < len) {
		snprintf(id, len, "%.*s", (int)(n - 5), name + 1);
		return 0;			/* one being written */
	}
	for (const char *dot = strchr(name + 1, '.'); dot;	/* a marker */
	     dot = strchr(dot + 1, '.')) {
		if ((size_t)(dot - name) > len)
			break;
		snprintf(id, (size_t)(dot - name), "%s", name + 1);
		if (marker_of(name, id, &pid, &start) != MARKER_NONE)
			return 0;
	}
	return -EINVAL;
}

/* Is @name in a state directory store @id's: its record, the record
 * being written (".tmp"), or a final flush's marker? */
static bool entry_of(const char *name, const char *id)
{
	size_t n = strlen(id);
	unsigned long long start;
	long pid;

	return !strcmp(name, id) ||
	       (name[0] == '.' && !strncmp(name + 1, id, n) &&
		!strcmp(name + 1 + n, ".tmp")) ||
	       marker_of(name, id, &pid, &start) != MARKER_NONE;
}

/* Entry @name of store @from in directory @dfd renamed for store @to;
 * where @to has one of that name already, @from's is removed.  1, 0
 * (gone meanwhile), or -errno. */
static int adopt_entry(int dfd, const char *name, const char *from,
		       const char *to)
{
	char new[NAME_MAX + 1];
	int n = !strcmp(name, from) ? snprintf(new, sizeof(new), "%s", to) :
		snprintf(new, sizeof(new), ".%s%s", to,
			 name + 1 + strlen(from));

	if (n < 0 || (size_t)n >= sizeof(new))
		return -ENAMETOOLONG;
	if (!renameat2(dfd, name, dfd, new, RENAME_NOREPLACE))
		return 1;
	if (errno == ENOENT)
		return 0;
	if (errno != EEXIST)
		return -errno;
	return unlinkat(dfd, name, 0) && errno != ENOENT ? -errno : 1;
}

/* syncguard_poison_adopt for one name @from */
static int adopt_one(const char *dir, const char *from, const char *to)
{
	char p[PATH_MAX];
	int moved = 0, err = 0, ret;
	struct dirent *e;
	DIR *d;

	snprintf(p, sizeof(p), "%s/latched", dir);
	if (!(d = opendir(p)))
		return errno == ENOENT ? 0 : -errno;
	for (;;) {
		errno = 0;
		if (!(e = readdir(d))) {	/* the end, or a failure */
			err = err ? err : -errno;
			break;
		}
		if (!entry_of(e->d_name, from))
			continue;
		if ((ret = adopt_entry(dirfd(d), e->d_name, from, to)) < 0)
			err = err ? err : ret;
		else
			moved += ret;
	}
	/* a rename a power cut undoes is taken over again next time */
	if (moved && (ret = syncguard_fsync(dirfd(d))))
		syncguard_logf("syncguard: %s: not synced (%s)\n", p,
			       strerror(-ret));
	closedir(d);
	if (moved)
		syncguard_logf("syncguard: store %s: %d entries of its former "
			"identity %s in %s taken over\n", to, moved, from, p);
	return err;
}

/* Is @name a device number's (blk-M.m, or a partition's partN-blk-M.m:
 * the number may be another store's by now)? */
static bool number_name(const char *name)
{
	if (!strncmp(name, "part", 4)) {
		name += 4 + strspn(name + 4, "0123456789");
		if (*name++ != '-')
			return false;
	}
	return !strncmp(name, "blk-", 4);
}

/* The next name of the list at *@p into @one (NAME_MAX + 1 bytes), *@p
 * moved past it: false at the list's end.  A name too long for a
 * record's comes out "". */
static bool next_name(const char **p, char *one)
{
	size_t k = strcspn(*p, "\n");

	if (!**p)
		return false;
	one[0] = '\0';
	if (k <= NAME_MAX) {
		memcpy(one, *p, k);
		one[k] = '\0';
	}
	*p += k + ((*p)[k] == '\n');
	return true;
}

int syncguard_poison_adopt(const char *dir, const char *from, const char *to,
			   bool numbers)
{
	char one[NAME_MAX + 1];
	int err = 0, ret;

	while (next_name(&from, one)) {
		/* renamed onto itself, a record would be removed */
		if (!one[0] || !strcmp(one, to) ||
		    (!numbers && number_name(one)))
			continue;
		if ((ret = adopt_one(dir, one, to)) && !err)
			err = ret;
	}
	return err;
}

int syncguard_poison_held(const char *dir, const char *from, char *name,
			  size_t len, char *text, size_t text_len)
{
	char one[NAME_MAX + 1];
	int ret;

	while (next_name(&from, one)) {
		if (!one[0] || !number_name(one))
			continue;
		/* the record, or a final flush's marker: one that failed, or
		 * whose process stopped or still runs */
		ret = syncguard_store_record(dir, one, text, text_len, NULL, 0);
		if (ret) {
			snprintf(name, len, "%s", one);
			return ret < 0 ? ret : 1;
		}
	}
	return 0;
}

/* When this machine booted (/proc/stat btime, seconds since the epoch),
 * 0 if unknown */
static long long boot_time(void)
{
	static long long btime;
	char line[128];
	FILE *f;

	if (btime || !(f = fopen("/proc/stat", "re")))
		return btime;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "btime %lld", &btime) == 1)
			break;
	fclose(f);
	return btime;
}

/* Another process's final flush of store @id, by its marker in @dir:
 * EINPROGRESS while that process lives, EIO where it stopped on the way
 * or failed without a record (with @remove: those markers removed), 0 if
 * none; what it is into @text (@len bytes).  A marker older than this
 * boot is a stopped process's, whatever its pid and start time (the
 * clock ticks since boot start again, and so may the pids). */
static int scan_markers(const char *dir, const char *id, bool remove,
			char *text, size_t len)
{
	unsigned long long start;
	enum marker_kind kind;
	char p[PATH_MAX];
	struct dirent *e;
	struct stat st;
	int ret = 0;
	bool stale;
	long pid;
	DIR *d;

	snprintf(p, sizeof(p), "%s/latched", dir);
	if (!(d = opendir(p)))
		return 0;
	while ((e = readdir(d))) {
		if (!(kind = marker_of(e->d_name, id, &pid, &start)))
			continue;
		/* one gone since readdir saw it: its flush ended, and its
		 * record, read after this, tells how */
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		stale = (long long)st.st_mtime < boot_time();
		if (kind == MARKER_FLUSH && !stale &&
		    (pid == (long)getpid() ? self_start() : proc_start(pid)) ==
		    start) {
			if (pid == (long)getpid())
				continue;	/* its in-process mark says more */
			snprintf(text, len, "a final flush of process %ld on "
				 "this store still runs\n", pid);
			ret = EINPROGRESS;
			break;
		}
		if (kind == MARKER_FAILED)
			snprintf(text, len, "errno %d (process %ld's final flush "
				 "of this store failed, and its record could not "
				 "be written)\n", EIO, pid);
		else
			snprintf(text, len, "errno %d (process %ld stopped "
				 "during its final flush of this store: its "
				 "outcome is unknown)\n", EIO, pid);
		if (remove)
			unlinkat(dirfd(d), e->d_name, 0);
		ret = EIO;
	}
	closedir(d);
	return ret;
}

/* scan_markers, twice where the first finds none: readdir need not
 * return an entry renamed during the scan (a ".flush-" marker turning
 * ".failed-" in a directory larger than one getdents buffer) under
 * either name, and that rename is the one step of a marker that no
 * record follows; the second scan starts after it. */
static int other_final_flush(const char *dir, const char *id, bool remove,
			     char *text, size_t len)
{
	int ret = scan_markers(dir, id, remove, text, len);

	return ret ? ret : scan_markers(dir, id, remove, text, len);
}

int syncguard_store_record(const char *dir, const char *id, char *text,
			   size_t len, char *where, size_t where_len)
{
	char other[PATH_MAX], flush[200];
	const char *own = dir;
	int flushing, err;

	/* this process's start time, read while it has descriptors to
	 * spare: its own final flushes' markers are named by it */
	self_start();
	/* the marker before the record: the flush writes its record, then
	 * removes its marker, so one of the two is seen */
	flushing = other_final_flush(dir, id, false, flush, sizeof(flush));
	err = syncguard_poison_read(dir, id, text, len);

	if (!err && recorded_elsewhere(id, dir, other, sizeof(other))) {
		dir = other;
		if (!(err = syncguard_poison_read(other, id, text, len)))
			forget_record(id, other);
	}
	if (!err && flushing) {
		dir = own;
		snprintf(text, len, "%s", flush);
		err = flushing;
	}
	if (where)
		snprintf(where, where_len, "%s", dir);
	return err;
}

int syncguard_final_flush_begin(const char *dir, const char *id,
				unsigned int *seq)
{
	static unsigned int next_seq;
	char marker[PATH_MAX];
	int i, fd, ret;

	*seq = __atomic_add_fetch(&next_seq, 1, __ATOMIC_SEQ_CST);
	if (!id[0])
		return 0;
	pthread_mutex_lock(&marks_lock);
	if ((i = mark_of(id, true)) >= 0)
		marks[i].flushes++;
	pthread_mutex_unlock(&marks_lock);
	if (i < 0)
		return -ENOMEM;
	ret = make_dirs(dir);
	if (!ret)
		ret = syncguard_flush_marker(dir, id, (long)getpid(), *seq,
					     marker, sizeof(marker));
	if (!ret && (fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC,
			       0600)) >= 0)
		close(fd);
	else if (!ret)
		ret = -errno;
	if (ret)
		syncguard_logf("syncguard: store %s: no marker of its final "
			"flush in %s/latched (%s): a LUN of another tgtd on it "
			"would not wait for the flush\n", id, dir,
			strerror(-ret));
	return 0;
}

int syncguard_store_failed(const char *dir, const char *id,
			   const char *path, int err)
{
	int ret = id[0] ? syncguard_poison_write(dir, id, path, err) : 0;

	if (ret)
		syncguard_store_unrecorded(id, err);
	return ret;
}

int syncguard_final_flush_end(const char *dir, const char *id,
			      unsigned int seq, const char *path, int err)
{
	int ret = err ? syncguard_store_failed(dir, id, path, err) : 0;
	char marker[PATH_MAX], failed[PATH_MAX];
	int i;

	if (!id[0])
		return ret;
	/* its outcome is recorded by now; one that could not be is kept
	 * for other processes in the marker, renamed (no new space).  A
	 * marker that cannot be renamed either stays, dated 1970: removed,
	 * it took the failure with it, and another tgtd's LUN on the store
	 * started clean; undated, that LUN would wait for as long as this
	 * process lives; older than this boot, it reads as a flush that
	 * stopped on its way, and latches that LUN at once
	 * (test_poison_marker_kept_unrenamed) */
	if (syncguard_flush_marker(dir, id, (long)getpid(), seq, marker,
				   sizeof(marker))) {
		/* no marker was made */
	} else if (!err || !ret) {
		unlink(marker);
	} else if (marker_path(dir, id, MARKER_FAILED, getpid(), seq, failed,
			       sizeof(failed)) || rename(marker, failed)) {
		static const struct timespec epoch[2] = { { 0, 0 }, { 0, 0 } };

		syncguard_logf("syncguard: store %s: its failed final flush "
			"is neither recorded nor marked failed; its marker %s "
			"stays%s: another tgtd's LUN on the store starts "
			"latched\n", id, marker,
			utimensat(AT_FDCWD, marker, epoch, 0) ?
			" (undated: that LUN waits until this tgtd exits)" : "");
	}
	pthread_mutex_lock(&marks_lock);
	if ((i = mark_of(id, false)) >= 0) {
		if (marks[i].flushes)
			marks[i].flushes--;
		unmark(i);
	}
	pthread_cond_broadcast(&marks_done);
	pthread_mutex_unlock(&marks_lock);
	return ret;
}

void syncguard_store_unrecorded(const char *id, int err)
{
	int i;

	pthread_mutex_lock(&marks_lock);
	if ((i = mark_of(id, true)) >= 0 && !marks[i].err)
		marks[i].err = err;
	pthread_mutex_unlock(&marks_lock);
}

int syncguard_store_outcome(const struct syncguard_lun *lun)
{
	char text[512];
	int err = syncguard_store_marked(lun->store_id, true);

	if (err && err != EINPROGRESS)
		return err;
	/* another tgtd's final flush: its marker goes once the outcome is
	 * recorded (this runs on a worker, as the wait above) */
	while ((err = syncguard_store_record(syncguard_state_dir(&lun->opts),
					     lun->store_id, text, sizeof(text),
					     NULL, 0)) == EINPROGRESS)
		usleep(10000);
	return err < 0 ? EIO : err;
}

int syncguard_store_marked(const char *id, bool wait)
{
	int i, err = 0;

	pthread_mutex_lock(&marks_lock);
	while ((i = mark_of(id, false)) >= 0 && wait && marks[i].flushes)
		pthread_cond_wait(&marks_done, &marks_lock);
	if (i >= 0)
		err = marks[i].err ? marks[i].err :
		      marks[i].flushes ? EINPROGRESS : 0;
	pthread_mutex_unlock(&marks_lock);
	return err;
}
