/*
 * fsprobe: what the protocol tests need of a file system that no Debian
 * tool does in one step (tests/proto check_blockdev.c).
 *
 *   fsprobe encrypt MOUNTPOINT DIRECTORY
 *	make the empty DIRECTORY encrypted: an fscrypt v2 policy
 *	(AES-256-XTS) with a random key added to its file system, which
 *	must have been made with "mkfs.ext4 -O encrypt"; root only.  A
 *	file in it cannot do direct I/O (ext4 without inline crypto
 *	buffers its O_DIRECT writes silently).
 *   fsprobe dirty FILE
 *	print how many of FILE's pages are dirty in the page cache
 *	(cachestat(2), Linux 6.5).
 *
 * Exit status 0, or 1 with the reason on stderr.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fscrypt.h>

#define KEY_BYTES 64

static int fail(const char *what)
{
	perror(what);
	return 1;
}

static int encrypt(const char *mount, const char *dir_path)
{
	struct {
		struct fscrypt_add_key_arg arg;
		unsigned char raw[KEY_BYTES];
	} key;
	struct fscrypt_policy_v2 policy = {
		.version = FSCRYPT_POLICY_V2,
		.contents_encryption_mode = FSCRYPT_MODE_AES_256_XTS,
		.filenames_encryption_mode = FSCRYPT_MODE_AES_256_CTS,
		.flags = FSCRYPT_POLICY_FLAGS_PAD_32,
	};
	int mnt, dir;

	memset(&key, 0, sizeof(key));
	key.arg.key_spec.type = FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER;
	key.arg.raw_size = KEY_BYTES;
	if (getrandom(key.raw, KEY_BYTES, 0) != KEY_BYTES)
		return fail("getrandom");
	if ((mnt = open(mount, O_RDONLY | O_DIRECTORY)) < 0)
		return fail(mount);
	if (ioctl(mnt, FS_IOC_ADD_ENCRYPTION_KEY, &key.arg))
		return fail("FS_IOC_ADD_ENCRYPTION_KEY");
	memcpy(policy.master_key_identifier, key.arg.key_spec.u.identifier,
	       FSCRYPT_KEY_IDENTIFIER_SIZE);
	if ((dir = open(dir_path, O_RDONLY | O_DIRECTORY)) < 0)
		return fail(dir_path);
	if (ioctl(dir, FS_IOC_SET_ENCRYPTION_POLICY, &policy))
		return fail("FS_IOC_SET_ENCRYPTION_POLICY");
	close(dir);
	close(mnt);
	return 0;
}

#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif

/* cachestat(2)'s arguments and answer (include/uapi/linux/mman.h) */
struct range {
	unsigned long long off, len;
};
struct cache {
	unsigned long long cache, dirty, writeback, evicted, recently_evicted;
};

static int dirty(const char *path)
{
	struct range r = { 0, 0 };	/* the whole file */
	struct cache c;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return fail(path);
	if (syscall(__NR_cachestat, fd, &r, &c, 0))
		return fail("cachestat");
	printf("%llu\n", c.dirty);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "encrypt"))
		return encrypt(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "dirty"))
		return dirty(argv[2]);
	fprintf(stderr, "usage: fsprobe encrypt MOUNTPOINT DIRECTORY\n"
		"       fsprobe dirty FILE\n");
	return 1;
}
