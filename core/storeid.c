/*
 * A store's identity, by which its latch records are kept
 * (core/poison.c).
 *
 * Layer: near the leaves of the core (it uses core/zvolname.c, and
 * core/mounts.c for overlays); core/lun.c calls it at open, and
 * syncguard-stat to find a store's record.
 *
 * The identity survives re-creation and reboots but not the store's
 * reuse: a regular file is its file system (the superblock's UUID,
 * FS_IOC_GETFSUUID; else statfs f_fsid, which ext4 derives from it),
 * its inode number and the inode's generation (FS_IOC_GETVERSION, new
 * for every inode a file system hands out again); on a file system that
 * has neither (FUSE: its device number is handed out afresh at every
 * mount, and another FUSE file system may get this one's) the file's
 * path (path_id); a file on an overlay, its copy in the upper layer
 * (overlay_id); a block device is its device-mapper UUID, its WWID or
 * serial (a partition: its disk's, and its number), an md array its
 * UUID (the same for a partition of it), a loop device its
 * backing file's identity (the file and the loops over it are one
 * store, as core/loopdev.c takes them; a partition of it, that and its
 * number), and only where none is known
 * its device number; a ZFS zvol, which has none of those names and
 * whose device number ZFS hands out afresh at every import, its
 * /dev/zvol name (its dataset).  tests/unit check_exec.c,
 * test_poison_store_id, test_poison_fuse_identity, test_poison_path_ids,
 * test_poison_zvol_identity, test_poison_md_identity.
 *
 * An identity earlier builds or kernels gave the same store (Linux
 * before 6.9 has no FS_IOC_GETFSUUID, so a file system's id changes
 * form when the kernel is upgraded; earlier builds named a zvol, an md
 * array and a loop partition by its device number, and an overlay file
 * by the overlay's inode) is a "former" one, and a store may have
 * several: a record found under one is the store's
 * (syncguard_poison_adopt, test_poison_former_identity), except under
 * a device number, which may have been another store's then: that one
 * latches the LUN where it lies (syncguard_poison_held,
 * test_poison_device_number_held).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Is @name one of the '\n'-separated names of @list? */
static bool listed(const char *list, const char *name)
{
	size_t k = strlen(name);

	for (const char *p = list; *p; p += strcspn(p, "\n"), p += *p == '\n')
		if (!strncmp(p, name, k) && (p[k] == '\n' || !p[k]))
			return true;
	return false;
}

/* @name (a former identity, @plen bytes of it when it stands in a list)
 * added to the '\n'-separated list @former (@len bytes, at least
 * SYNCGUARD_FORMER_LEN): an empty name, one listed already or one with
 * no room left is not */
static void add_former(char *former, size_t len, const char *prefix,
		       const char *name, size_t plen)
{
	char one[300];
	size_t n = strlen(former), k;

	if (!plen || snprintf(one, sizeof(one), "%s%.*s", prefix, (int)plen,
			      name) >= (int)sizeof(one))
		return;
	k = strlen(one);
	if (listed(former, one) || n + k + 2 > len)
		return;
	if (n)
		former[n++] = '\n';
	memcpy(former + n, one, k + 1);
}

/* Every name of the list @names added to @former, @prefix before each */
static void add_formers(char *former, size_t len, const char *prefix,
			const char *names)
{
	for (const char *p = names; *p; p += strcspn(p, "\n"),
	     p += *p == '\n')
		add_former(former, len, prefix, p, strcspn(p, "\n"));
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

/* Linux 6.9's FS_IOC_GETFSUUID (linux/fs.h), for older headers */
struct fsuuid2_arg {
	uint8_t len;
	uint8_t uuid[16];
};
#define GETFSUUID _IOR(0x15, 0, struct fsuuid2_arg)

/* The identity of @fd's file system into @out: "uuid" and its UUID, or
 * "fsid" and statfs f_fsid; "" when it has neither.  Into @former (when
 * the UUID was had) the "fsid" form, which a kernel without
 * FS_IOC_GETFSUUID gives the same file system, or "". */
static void fs_id(int fd, char *out, size_t len, char *former,
		  size_t former_len)
{
	struct fsuuid2_arg u = { .len = sizeof(u.uuid) };
	unsigned long long fsid = 0;
	struct statfs sfs;
	bool uuid = false;
	int n;

	out[0] = former[0] = '\0';
	if (!ioctl(fd, GETFSUUID, &u) && u.len && u.len <= sizeof(u.uuid)) {
		n = snprintf(out, len, "uuid");
		for (int i = 0; i < u.len && n > 0 && (size_t)n < len; i++)
			n += snprintf(out + n, len - (size_t)n, "%02x", u.uuid[i]);
		uuid = true;
	}
	if (!fstatfs(fd, &sfs))
		memcpy(&fsid, &sfs.f_fsid, sizeof(fsid) < sizeof(sfs.f_fsid) ?
		       sizeof(fsid) : sizeof(sfs.f_fsid));
	if (fsid)
		snprintf(uuid ? former : out, uuid ? former_len : len,
			 "fsid%llx", fsid);
}

/* FNV-1a, 64 bits, of the string @s */
static unsigned long long fnv1a(const char *s)
{
	unsigned long long h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* @kind, the last 180 characters of the name @p with every character
 * that is not [A-Za-z0-9._-] made '_' (for the administrator to read),
 * then "-h" and a hash of the whole name: two names that read the same
 * so ("/m 1", "/m_1") or end alike are two stores, and no name is too
 * long for a record's (at most 202 characters, within NAME_MAX with the
 * names record_path and syncguard_flush_marker make of it).
 * test_poison_path_ids. */
#define NAME_ID_TAIL	180
static int name_id(const char *kind, const char *p, char *id, size_t len)
{
	size_t n = strlen(p);
	const char *tail = n > NAME_ID_TAIL ? p + n - NAME_ID_TAIL : p;

	if (snprintf(id, len, "%s%s-h%016llx", kind, tail, fnv1a(p)) >=
	    (int)len)
		return -ENAMETOOLONG;
	name_chars(id);
	return 0;
}

/* "path" and @fd's canonical path, as name_id makes it */
static int path_id(int fd, char *id, size_t len)
{
	char link[32], p[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if ((n = readlink(link, p, sizeof(p) - 1)) <= 0)
		return n < 0 ? -errno : -ENOENT;
	p[n] = '\0';
	return name_id("path", p, id, len);
}

/* "file-" the file system's identity, the inode's number and
 * generation; the same with the file system's former identity into
 * @former, or "" */
static int inode_id(int fd, const struct stat *st, char *id, size_t len,
		    char *former, size_t former_len)
{
	char fs[48], old[48], tail[64] = "";
	int gen = 0;

	fs_id(fd, fs, sizeof(fs), old, sizeof(old));
	former[0] = '\0';
	if (!fs[0])
		return path_id(fd, id, len);
	if (!ioctl(fd, FS_IOC_GETVERSION, &gen))
		snprintf(tail, sizeof(tail), "-gen%u", (unsigned int)gen);
	snprintf(id, len, "file-%s-ino%llu%s", fs,
		 (unsigned long long)st->st_ino, tail);
	if (old[0])
		snprintf(former, former_len, "file-%s-ino%llu%s", old,
			 (unsigned long long)st->st_ino, tail);
	return 0;
}

/* A file on an overlay is named by its copy in the upper layer (one
 * store under two names, as syncguard_overlay_hold locks it), its former
 * identities that file's and the overlay's own (what earlier builds
 * named it by): 0, or -1
 * if @fd is on no overlay or that copy cannot be found (then the
 * overlay's own names it; a LUN refuses such a file) */
static int overlay_id(int fd, const struct stat *st, char *id, size_t len,
		      char *former, size_t former_len)
{
	char *table, own[256], upper_old[256], own_old[256];
	struct statfs sfs;
	struct stat rst;
	int rfd, ret = -1;

	if (fstatfs(fd, &sfs) || (unsigned long)sfs.f_type != OVERLAYFS_MAGIC ||
	    !(table = syncguard_mounts_read("/proc/self/mountinfo")))
		return -1;
	rfd = syncguard_overlay_file_open(fd, table, 0);
	free(table);
	if (rfd < 0)
		return -1;
	if (!fstat(rfd, &rst))
		ret = inode_id(rfd, &rst, id, len, upper_old,
			       sizeof(upper_old));
	close(rfd);
	if (ret)
		return ret;
	/* the upper file's own former name (a kernel before 6.9), then
	 * the overlay inode's names, current and former */
	former[0] = '\0';
	add_formers(former, former_len, "", upper_old);
	if (!inode_id(fd, st, own, sizeof(own), own_old, sizeof(own_old))) {
		add_formers(former, former_len, "", own);
		add_formers(former, former_len, "", own_old);
	}
	return 0;
}

/* A regular file's identity (inode_id, or overlay_id on an overlay) */
static int file_id(int fd, const struct stat *st, char *id, size_t len,
		   char *former, size_t former_len)
{
	return overlay_id(fd, st, id, len, former, former_len) ?
	       inode_id(fd, st, id, len, former, former_len) : 0;
}

static int block_id(const char *sysfs, const char *zvol_root, dev_t rdev,
		    char *id, size_t len, char *former, size_t former_len,
		    int depth);

/* A loop device's identity: its backing file's (or the device's behind
 * it), as core/loopdev.c takes them for one store; -1 if @sys is no
 * attached loop device. */
static int loop_id(const char *sysfs, const char *zvol_root,
		   const char *sys, char *id, size_t len, char *former,
		   size_t former_len, int depth)
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
		      block_id(sysfs, zvol_root, st.st_rdev, id, len, former,
			       former_len, depth + 1) :
		      file_id(fd, &st, id, len, former, former_len);
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

/* An md array's UUID (sysfs @sys/md/uuid) into @word (@len bytes): 0,
 * or -1 for none.  Only an array whose superblock holds its UUID
 * (md/metadata_version 0.90 or 1.x) has one that lasts: the kernel makes
 * one up at random for an array without a superblock ("none", mdadm
 * --build), and leaves it zeros for external metadata (IMSM, DDF:
 * "external:..."), which mdadm alone knows. */
static int md_word(const char *sys, char *word, size_t len)
{
	char v[64];

	if (sysfs_word(sys, "md/metadata_version", v, sizeof(v)) ||
	    (strcmp(v, "0.90") && strncmp(v, "1.", 2)) ||
	    sysfs_word(sys, "md/uuid", word, len))
		return -1;
	return word[strspn(word, "0-")] ? 0 : -1;
}

static int block_id(const char *sysfs, const char *zvol_root, dev_t rdev,
		    char *id, size_t len, char *former, size_t former_len,
		    int depth)
{
	char sys[320], word[200], part[16], ds[256];	/* @sysfs: 256 at most */
	char old[SYNCGUARD_FORMER_LEN];
	int n = 0;

	former[0] = '\0';
	if (strlen(sysfs) > 256)
		return -ENAMETOOLONG;
	snprintf(sys, sizeof(sys), "%s/dev/block/%u:%u", sysfs, major(rdev),
		 minor(rdev));
	if (depth < 4 && !loop_id(sysfs, zvol_root, sys, id, len, former,
				  former_len, depth))
		return 0;
	if (!sysfs_word(sys, "dm/uuid", word, sizeof(word))) {
		snprintf(id, len, "dm-%s", word);
		return 0;
	}
	if (!sysfs_word(sys, "partition", part, sizeof(part))) {
		/* a partition: its disk's identity, and its number */
		strncat(sys, "/..", sizeof(sys) - strlen(sys) - 1);
		n = snprintf(id, len, "part%s-", part);
		/* a loop device's: its backing file's (the partitions are
		 * as much that file's as the loop is); its former
		 * identities the file's with its number (a kernel before
		 * 6.9), and the device number earlier builds named it by,
		 * which loop hands out anew at each losetup -P */
		if (n >= 0 && (size_t)n < len && depth < 4 &&
		    !loop_id(sysfs, zvol_root, sys, id + n, len - (size_t)n,
			     old, sizeof(old), depth)) {
			snprintf(word, sizeof(word), "part%s-", part);
			add_formers(former, former_len, word, old);
			snprintf(ds, sizeof(ds), "blk-%u.%u", major(rdev),
				 minor(rdev));
			add_formers(former, former_len, "", ds);
			return 0;
		}
	}
	if (n >= 0 && (size_t)n < len && !disk_word(sys, word, sizeof(word))) {
		snprintf(id + n, len - (size_t)n, "disk-%s", word);
		return 0;
	}
	if (n >= 0 && (size_t)n < len && !md_word(sys, word, sizeof(word))) {
		/* md hands out its numbers by name or at assembly: earlier
		 * builds named an array by its device number */
		snprintf(id + n, len - (size_t)n, "md-%s", word);
		snprintf(former, former_len, "blk-%u.%u", major(rdev),
			 minor(rdev));
		return 0;
	}
	if (syncguard_zvol_name(zvol_root, rdev, ds, sizeof(ds))) {
		snprintf(former, former_len, "blk-%u.%u", major(rdev),
			 minor(rdev));
		return name_id("zvol-", ds, id, len);
	}
	snprintf(id, len, "blk-%u.%u", major(rdev), minor(rdev));
	return 0;
}

int syncguard_store_ids(int fd, char *id, size_t len, char *former,
			size_t former_len)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode))
		return block_id("/sys", "/dev/zvol", st.st_rdev, id, len,
				former, former_len, 0);
	return file_id(fd, &st, id, len, former, former_len);
}

int syncguard_store_id(int fd, char *id, size_t len)
{
	char former[SYNCGUARD_FORMER_LEN];

	return syncguard_store_ids(fd, id, len, former, sizeof(former));
}

int syncguard_block_store_id(const char *sysfs, const char *zvol_root,
			     dev_t rdev, char *id, size_t len, char *former,
			     size_t former_len)
{
	return block_id(sysfs, zvol_root, rdev, id, len, former, former_len,
			0);
}
