/*
 * A store's identity, by which its latch records are kept
 * (core/poison.c).
 *
 * Layer: a leaf of the core (it uses nothing of ours); core/lun.c calls
 * it at open, and syncguard-stat to find a store's record.
 *
 * The identity survives re-creation and reboots but not the store's
 * reuse: a regular file is its file system (the superblock's UUID,
 * FS_IOC_GETFSUUID; else statfs f_fsid, which ext4 derives from it),
 * its inode number and the inode's generation (FS_IOC_GETVERSION, new
 * for every inode a file system hands out again); on a file system that
 * has neither (FUSE: its device number is handed out afresh at every
 * mount, and another FUSE file system may get this one's) the file's
 * path (path_id); a block device is its device-mapper UUID, its WWID or
 * serial (a partition: its disk's, and its number), a loop device its
 * backing file's identity (the file and the loops over it are one
 * store, as core/loopdev.c takes them), and only where none is known
 * its device number.  tests/unit check_exec.c, test_poison_store_id,
 * test_poison_fuse_identity, test_poison_path_ids.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/fs.h>

#include "core.h"
#include "internal.h"

/* Every character of @s that is not [A-Za-z0-9._-] made '_': a word
 * that can stand in a file name. */
static void name_chars(char *s)
{
	for (char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-'))
			*c = '_';
}

/* The first line of sysfs file @dir/@name into @buf (@len bytes), with
 * every character that is not [A-Za-z0-9._-] made '_': 0, or -1. */
static int sysfs_word(const char *dir, const char *name, char *buf,
		      size_t len)
{
	char p[PATH_MAX];
	FILE *f;
	size_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	if (!(f = fopen(p, "re")))
		return -1;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	n = strlen(buf);
	while (n && buf[n - 1] == ' ')
		buf[--n] = '\0';
	name_chars(buf);
	return buf[0] ? 0 : -1;
}

/* Linux 6.5's FS_IOC_GETFSUUID (linux/fs.h), for older headers */
struct fsuuid2_arg {
	uint8_t len;
	uint8_t uuid[16];
};
#define GETFSUUID _IOR(0x15, 0, struct fsuuid2_arg)

/* The identity of @fd's file system into @out: "uuid" and its UUID, or
 * "fsid" and statfs f_fsid; "" when it has neither. */
static void fs_id(int fd, char *out, size_t len)
{
	struct fsuuid2_arg u = { .len = sizeof(u.uuid) };
	unsigned long long fsid = 0;
	struct statfs sfs;
	int n;

	out[0] = '\0';
	if (!ioctl(fd, GETFSUUID, &u) && u.len && u.len <= sizeof(u.uuid)) {
		n = snprintf(out, len, "uuid");
		for (int i = 0; i < u.len && n > 0 && (size_t)n < len; i++)
			n += snprintf(out + n, len - (size_t)n, "%02x", u.uuid[i]);
		return;
	}
	if (!fstatfs(fd, &sfs))
		memcpy(&fsid, &sfs.f_fsid, sizeof(fsid) < sizeof(sfs.f_fsid) ?
		       sizeof(fsid) : sizeof(sfs.f_fsid));
	if (fsid)
		snprintf(out, len, "fsid%llx", fsid);
}

/* FNV-1a, 64 bits, of the string @s */
static unsigned long long fnv1a(const char *s)
{
	unsigned long long h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* "path", the last 180 characters of @fd's canonical path with every
 * character that is not [A-Za-z0-9._-] made '_' (for the administrator
 * to read), then "-h" and a hash of the whole path: two paths that read
 * the same so ("/m 1", "/m_1") or end alike are two stores, and no path
 * is too long for a record's name (at most 202 characters, within
 * NAME_MAX with the names record_path and syncguard_flush_marker make
 * of it).  test_poison_path_ids. */
#define PATH_ID_TAIL	180
static int path_id(int fd, char *id, size_t len)
{
	char link[32], p[PATH_MAX];
	const char *tail;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, p, sizeof(p) - 1)) <= 0)
		return n < 0 ? -errno : -ENOENT;
	p[n] = '\0';
	tail = n > PATH_ID_TAIL ? p + n - PATH_ID_TAIL : p;
	if (snprintf(id, len, "path%s-h%016llx", tail, fnv1a(p)) >= (int)len)
		return -ENAMETOOLONG;
	name_chars(id);
	return 0;
}

static int file_id(int fd, const struct stat *st, char *id, size_t len)
{
	char fs[48];
	int gen = 0;

	fs_id(fd, fs, sizeof(fs));
	if (!fs[0])
		return path_id(fd, id, len);
	snprintf(id, len, "file-%s-ino%llu", fs, (unsigned long long)st->st_ino);
	if (!ioctl(fd, FS_IOC_GETVERSION, &gen))
		snprintf(id + strlen(id), len - strlen(id), "-gen%u",
			 (unsigned int)gen);
	return 0;
}

static int block_id(dev_t rdev, char *id, size_t len, int depth);

/* A loop device's identity: its backing file's (or the device's behind
 * it), as core/loopdev.c takes them for one store; -1 if @sys is no
 * attached loop device. */
static int loop_id(const char *sys, char *id, size_t len, int depth)
{
	char p[PATH_MAX], back[PATH_MAX];
	struct stat st;
	FILE *f;
	int fd, ret = -1;

	snprintf(p, sizeof(p), "%s/loop/backing_file", sys);
	if (!(f = fopen(p, "re")))
		return -1;
	if (!fgets(back, sizeof(back), f))
		back[0] = '\0';
	fclose(f);
	back[strcspn(back, "\n")] = '\0';
	if ((fd = open(back, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (!fstat(fd, &st))	/* one store under two names */
		ret = S_ISBLK(st.st_mode) ?
		      block_id(st.st_rdev, id, len, depth + 1) :
		      file_id(fd, &st, id, len);
	close(fd);
	return ret;
}

/* A disk's own name for itself (sysfs @sys): its WWID, else its serial,
 * into @word (@len bytes): 0, or -1 for none. */
static int disk_word(const char *sys, char *word, size_t len)
{
	static const char *const names[] = { "wwid", "device/wwid",
					     "device/serial", "serial" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!sysfs_word(sys, names[i], word, len))
			return 0;
	return -1;
}

static int block_id(dev_t rdev, char *id, size_t len, int depth)
{
	char sys[96], word[200], part[16];
	int n = 0;

	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(rdev),
		 minor(rdev));
	if (depth < 4 && !loop_id(sys, id, len, depth))
		return 0;
	if (!sysfs_word(sys, "dm/uuid", word, sizeof(word))) {
		snprintf(id, len, "dm-%s", word);
		return 0;
	}
	if (!sysfs_word(sys, "partition", part, sizeof(part))) {
		/* a partition: its disk's identity, and its number */
		strncat(sys, "/..", sizeof(sys) - strlen(sys) - 1);
		n = snprintf(id, len, "part%s-", part);
	}
	if (n >= 0 && (size_t)n < len && !disk_word(sys, word, sizeof(word))) {
		snprintf(id + n, len - (size_t)n, "disk-%s", word);
		return 0;
	}
	snprintf(id, len, "blk-%u.%u", major(rdev), minor(rdev));
	return 0;
}

int syncguard_store_id(int fd, char *id, size_t len)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode))
		return block_id(st.st_rdev, id, len, 0);
	return file_id(fd, &st, id, len);
}
