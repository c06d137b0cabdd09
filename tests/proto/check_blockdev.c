/*
 * Block-device LUNs on loop devices with 512- and 4096-byte logical
 * blocks: capacity and block size as READ CAPACITY(16) reports them,
 * data round trips, FUA and SYNCHRONIZE CACHE, and the data reaching
 * the device for the modes that promise it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "proto.h"

#define DEV_BYTES (32u << 20)

static struct {
	int lun;
	unsigned int bs;
	const char *bsopts;
	char file[700];
	char dev[64];
} devs[] = {
	{ 1, 512, "mode=write-back", "", "" },
	{ 2, 4096, "mode=write-through", "", "" },
	{ 3, 4096, "mode=plp", "", "" },
	{ 4, 512, "mode=write-back;direct=yes", "", "" },
};
#define NDEVS (int)(sizeof(devs) / sizeof(devs[0]))

/* Loop device over @file with @bs-byte sectors into @dev; direct I/O
 * off (loop's default) or, with @dio, on (plp needs it: core/loopdev.c,
 * plp_over_loop).  0 or -1. */
static int attach_as(const char *file, unsigned int bs, bool dio, char *dev,
		     size_t len)
{
	char cmd[900];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd), "losetup --find --show --sector-size %u "
		 "%s '%s' 2>/dev/null", bs, dio ? "--direct-io=on" : "", file);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	ok = fgets(dev, (int)len, p) != NULL;
	pclose(p);
	dev[strcspn(dev, "\n")] = '\0';
	return ok && dev[0] == '/' ? 0 : -1;
}

static int attach(const char *file, unsigned int bs, char *dev, size_t len)
{
	return attach_as(file, bs, false, dev, len);
}

static void teardown(void)
{
	for (int i = 0; i < NDEVS; i++) {
		if (devs[i].dev[0]) {
			proto_del_lun(devs[i].lun);
			proto_sh("losetup -d '%s'", devs[i].dev);
			devs[i].dev[0] = '\0';
		}
	}
	/* and any a failed test left attached (tests run in children):
	 * those over files in the scratch directory, before
	 * proto_tgtd_stop removes it (after, the filter would be "/", and
	 * this would detach every loop device of the host) */
	proto_sh("for l in $(losetup -nO NAME,BACK-FILE | awk -v d='%s/' "
		 "'index($2, d) == 1 { print $1 }'); do partx -d $l; "
		 "losetup -d $l; done 2>/dev/null", proto_dir());
	proto_tgtd_stop();
}

static void setup(void)
{
	proto_tgtd_start();
	for (int i = 0; i < NDEVS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "loop%d.img", i);
		snprintf(devs[i].file, sizeof(devs[i].file), "%s",
			 proto_file(name, DEV_BYTES, false));
		if (attach_as(devs[i].file, devs[i].bs,
			      strstr(devs[i].bsopts, "plp") != NULL,
			      devs[i].dev, sizeof(devs[i].dev)) ||
		    proto_add_lun(devs[i].lun, devs[i].dev, devs[i].bsopts,
				  devs[i].bs)) {
			fprintf(stderr, "blockdev: cannot set up LUN %d\n",
				devs[i].lun);
			teardown();
			exit(EXIT_FAILURE);
		}
	}
}

/* before each test: what a failed one left (its LUN numbered above the
 * set-up's) does not fail the tests after it */
static void left_luns_deleted(void)
{
	ck_assert_int_eq(proto_del_left_luns(NDEVS), 0);
}

START_TEST(test_blockdev_capacity)
{
	struct iscsi_context *iscsi = proto_connect(devs[_i].lun);
	struct scsi_task *t = iscsi_readcapacity16_sync(iscsi, devs[_i].lun);
	struct scsi_readcapacity16 *rc;

	proto_assert_good(t, "READ CAPACITY(16)", true);
	rc = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(rc);
	ck_assert_uint_eq(rc->block_length, devs[_i].bs);
	ck_assert_uint_eq(rc->returned_lba + 1, DEV_BYTES / devs[_i].bs);
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
}
END_TEST

static void assert_on_device(int i, uint64_t lba, const unsigned char *buf,
			     size_t len)
{
	unsigned char got[16384];
	int fd = open(devs[i].dev, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, got, len, (off_t)(lba * devs[i].bs)),
			 (ssize_t)len);
	close(fd);
	ck_assert_mem_eq(got, buf, len);
}

START_TEST(test_blockdev_round_trip)
{
	int lun = devs[_i].lun;
	unsigned int bs = devs[_i].bs;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char out[16384];
	struct scsi_task *t;

	for (size_t k = 0; k < sizeof(out); k++)
		out[k] = (unsigned char)(k * 13 + (unsigned int)_i);
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 3, out, sizeof(out),
		(int)bs, 0, 0, 0, 0, 0), "WRITE(16)", false);
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 100, out, bs,
		(int)bs, 0, 0, 1, 0, 0), "WRITE(16) FUA", false);
	t = iscsi_read16_sync(iscsi, lun, 3, sizeof(out), (int)bs, 0, 0, 0, 0, 0);
	proto_assert_good(t, "READ(16)", true);
	ck_assert_mem_eq(t->datain.data, out, sizeof(out));
	scsi_free_scsi_task(t);
	proto_assert_good(iscsi_synchronizecache16_sync(iscsi, lun, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(16)", false);
	/* the blocks landed at LBA x block size of the device (read back
	 * through the host; durability is the power-cut test's job) */
	assert_on_device(_i, 3, out, sizeof(out));
	assert_on_device(_i, 100, out, bs);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* A READ whose Data-In (the initiator's expected length) ends inside a
 * block returns that much of the data: on the LUNs that read O_DIRECT,
 * the whole sectors through a copy (core/lun.c). */
START_TEST(test_blockdev_short_data_in)
{
	int lun = devs[_i].lun;
	unsigned int bs = devs[_i].bs;
	struct iscsi_context *iscsi = proto_connect(lun);
	unsigned char out[8192], cdb[16] = { 0x88 };
	uint32_t want = bs + 100;
	struct scsi_task *t;

	for (size_t k = 0; k < sizeof(out); k++)
		out[k] = (unsigned char)(k * 11 + (unsigned int)_i + 5);
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 20, out, 2 * bs,
		(int)bs, 0, 0, 0, 0, 0), "WRITE(16)", false);
	cdb[9] = 20;	/* LBA 20, two blocks */
	cdb[13] = 2;
	t = scsi_create_task(16, cdb, SCSI_XFER_READ, (int)want);
	ck_assert_ptr_nonnull(t);
	t = iscsi_scsi_command_sync(iscsi, lun, t, NULL);
	proto_assert_good(t, "READ(16), short Data-In", true);
	ck_assert_int_eq(t->datain.size, (int)want);
	ck_assert_mem_eq(t->datain.data, out, want);
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* Pages of @dev's page cache resident in [@off, @off + @len). */
static size_t resident(const char *dev, off_t off, size_t len)
{
	int fd = open(dev, O_RDONLY);
	size_t pages = len / 4096, n = 0;
	unsigned char vec[256];
	void *p;

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_le(pages, sizeof(vec));
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, off);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(mincore(p, len, vec), 0);
	for (size_t i = 0; i < pages; i++)
		n += vec[i] & 1;
	munmap(p, len);
	close(fd);
	return n;
}

/* PRE-FETCH fills the host page cache only where reads use it: on a
 * LUN that reads O_DIRECT nothing would read those pages, and beside
 * io_uring's O_DIRECT writes they can keep old data (core/exec.c). */
START_TEST(test_blockdev_pre_fetch)
{
	const off_t off = 8 << 20;
	const size_t len = 1 << 20;
	int lun = devs[_i].lun;
	unsigned int bs = devs[_i].bs;
	bool direct = strstr(devs[_i].bsopts, "write-back") == NULL ||
		      strstr(devs[_i].bsopts, "direct=yes") != NULL;
	struct iscsi_context *iscsi = proto_connect(lun);
	int fd = open(devs[_i].dev, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(posix_fadvise(fd, off, (off_t)len,
				       POSIX_FADV_DONTNEED), 0);
	close(fd);
	ck_assert_uint_eq(resident(devs[_i].dev, off, len), 0);
	proto_assert_good(iscsi_prefetch16_sync(iscsi, lun, off / bs,
		(int)(len / bs), 0, 0), "PRE-FETCH(16)", false);
	if (direct)
		ck_assert_uint_eq(resident(devs[_i].dev, off, len), 0);
	else	/* WILLNEED reads ahead asynchronously: some of it by now */
		for (int t = 0; t < 100 && !resident(devs[_i].dev, off, len); t++)
			usleep(10000);
	if (!direct)
		ck_assert_uint_gt(resident(devs[_i].dev, off, len), 0);
	iscsi_destroy_context(iscsi);
}
END_TEST

/* direct=yes on a device whose sectors are larger than the LUN's blocks
 * is refused with a reason; direct=auto takes the page cache there. */
START_TEST(test_blockdev_direct_needs_alignment)
{
	char dev[64];
	const char *file = proto_file("loop4k.img", DEV_BYTES, false);

	ck_assert_int_eq(attach(file, 4096, dev, sizeof(dev)), 0);
	ck_assert_int_ne(proto_add_lun(9, dev, "mode=write-back;direct=yes", 0), 0);
	ck_assert(proto_log_has("direct=yes, but 512-byte logical blocks are "
				"not aligned for O_DIRECT here (4096 bytes)"));
	ck_assert_int_eq(proto_add_lun(9, dev, "mode=write-back", 0), 0);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'", dev);
}
END_TEST

/* UNMAP on a LUN with 512-byte blocks over a 4 KiB-sector device: the
 * device deallocates whole sectors only (fallocate: EINVAL), so the
 * blocks that share a sector with others are written with zeroes; every
 * unmapped block reads back as zeroes, the rest as written (taking the
 * EINVAL for a failure, UNMAP would end with MEDIUM ERROR after the
 * first descriptor).
 * Block Limits says the sector as OPTIMAL UNMAP GRANULARITY. */
START_TEST(test_blockdev_unmap_within_sectors)
{
	char dev[64];
	const char *file = proto_file("unmap4k.img", DEV_BYTES, false);
	unsigned char out[64 * 512], zero[64 * 512] = { 0 };
	unsigned char list[8 + 2 * 16] = { 0, 38, 0, 32 };
	struct unmap_list one = { 40, 4 };
	struct scsi_inquiry_block_limits *bl;
	struct iscsi_context *iscsi;
	struct scsi_task *t;

	for (size_t k = 0; k < sizeof(out); k++)
		out[k] = (unsigned char)(k * 7 + 1);
	ck_assert_int_eq(attach(file, 4096, dev, sizeof(dev)), 0);
	ck_assert_int_eq(proto_add_lun(9, dev, "mode=write-through", 0), 0);
	ck_assert_int_eq(proto_update_lun(9, "thin_provisioning=1"), 0);
	iscsi = proto_connect(9);
	t = iscsi_inquiry_sync(iscsi, 9, 1, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS, 255);
	proto_assert_good(t, "INQUIRY Block Limits", true);
	bl = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(bl);
	ck_assert_uint_eq(bl->opt_unmap_gran, 8);	/* 4096 / 512 */
	scsi_free_scsi_task(t);
	proto_assert_good(iscsi_write16_sync(iscsi, 9, 0, out, sizeof(out), 512,
		0, 0, 0, 0, 0), "WRITE(16)", false);
	list[8 + 7] = 1, list[8 + 11] = 1;	/* LBA 1: inside sector 0 */
	list[24 + 7] = 9, list[24 + 11] = 20;	/* 9-28: part, whole, part */
	t = scsi_create_task(10, (unsigned char[10]){ 0x42, 0, 0, 0, 0, 0, 0,
			     0, sizeof(list), 0 }, SCSI_XFER_WRITE, sizeof(list));
	ck_assert_ptr_nonnull(t);
	proto_assert_good(iscsi_scsi_command_sync(iscsi, 9, t, &(struct iscsi_data)
		{ sizeof(list), list }), "UNMAP of partial sectors", false);
	proto_assert_good(iscsi_unmap_sync(iscsi, 9, 0, 0, &one, 1),
			  "UNMAP of half a sector", false);
	t = iscsi_read16_sync(iscsi, 9, 0, sizeof(out), 512, 0, 0, 0, 0, 0);
	proto_assert_good(t, "READ(16)", true);
	for (unsigned int b = 0; b < 64; b++) {
		bool gone = b == 1 || (b >= 9 && b < 29) || (b >= 40 && b < 44);

		ck_assert_msg(!memcmp(t->datain.data + b * 512, gone ? zero :
				      out + b * 512, 512), "LBA %u", b);
	}
	scsi_free_scsi_task(t);
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'", dev);
}
END_TEST

/* plp on a loop device refuses thin provisioning as on the file under
 * it: the loop driver turns UNMAP's discard into a hole in that file,
 * and a plp write into the hole allocates a block nothing flushes
 * (with thin_provisioning=1 taken, UNMAP would punch such holes). */
START_TEST(test_blockdev_plp_loop_refuses_thin)
{
	ck_assert_int_ne(proto_update_lun(3, "thin_provisioning=1"), 0);
	ck_assert(proto_log_has("thin_provisioning refused: mode=plp on a "
				"regular file (or a loop device over one)"));
}
END_TEST

/* A block device that is in use is refused, whoever holds it: here the
 * test holds it as a mount would (O_EXCL), and then the LUN itself holds
 * it against a second LUN on another device node of the same device
 * (which the per-file lock alone would not see). */
START_TEST(test_blockdev_held_device_refused)
{
	char dev[64], node[800];
	const char *file = proto_file("held.img", DEV_BYTES, false);
	struct stat st;
	int holder;

	ck_assert_int_eq(attach(file, 512, dev, sizeof(dev)), 0);
	holder = open(dev, O_RDONLY | O_EXCL);
	ck_assert_int_ge(holder, 0);
	ck_assert_int_ne(proto_add_lun(9, dev, "mode=write-back", 0), 0);
	ck_assert(proto_log_has(": in use (mounted, swap, held by md or "
				"device-mapper, or exported by another "
				"syncguard LUN): not exported"));
	close(holder);
	ck_assert_int_eq(proto_add_lun(9, dev, "mode=write-back", 0), 0);
	ck_assert_int_eq(stat(dev, &st), 0);
	snprintf(node, sizeof(node), "%s/held-node", proto_dir());
	unlink(node);
	ck_assert_int_eq(mknod(node, S_IFBLK | 0600, st.st_rdev), 0);
	ck_assert_int_ne(proto_add_lun(10, node, "mode=write-through", 0), 0);
	proto_del_lun(9);
	ck_assert_int_eq(proto_add_lun(10, node, "mode=write-through", 0), 0);
	proto_del_lun(10);
	unlink(node);
	proto_sh("losetup -d '%s'", dev);
}
END_TEST

/* A loop device and its backing file are one store (core/loopdev.c): the
 * file of an exported loop device, or a second loop device over it, is
 * refused; so is the file of a loop device someone holds (as a mount
 * does). */
START_TEST(test_blockdev_loop_and_its_file)
{
	char dev2[64], held[64], line[900];
	const char *file = proto_file("backs-held.img", DEV_BYTES, false);
	int holder;

	ck_assert_int_ne(proto_add_lun(9, devs[0].file, "mode=write-back", 0), 0);
	ck_assert(proto_log_has("already exported by another syncguard LUN"));
	ck_assert_int_eq(attach(devs[0].file, 512, dev2, sizeof(dev2)), 0);
	ck_assert_int_ne(proto_add_lun(9, dev2, "mode=write-through", 0), 0);
	proto_sh("losetup -d '%s'", dev2);
	snprintf(line, sizeof(line), "%s (the backing file of %s): already "
		 "exported by another syncguard LUN", devs[0].file, dev2);
	ck_assert_msg(proto_log_has(line), "tgtd.log lacks \"%s\"", line);
	ck_assert_int_eq(attach(file, 512, held, sizeof(held)), 0);
	holder = open(held, O_RDONLY | O_EXCL);
	ck_assert_int_ge(holder, 0);
	ck_assert_int_ne(proto_add_lun(9, file, "mode=write-back", 0), 0);
	close(holder);
	proto_sh("losetup -d '%s'", held);
	ck_assert(proto_log_has("which is in use (mounted, swap, held by md "
				"or device-mapper, or exported): not exported"));
}
END_TEST

/* The same when the loop device was set up through a bind mount of the
 * file's directory: sysfs names the file by the alias, and the file
 * under its own name is still refused (core/loopdev.c compares where both
 * paths lie, by the mount table). */
START_TEST(test_blockdev_loop_file_through_bind_alias)
{
	const char *d = proto_dir();
	char dev[64] = "", file[800];
	FILE *f;
	int holder, bound, added;

	snprintf(file, sizeof(file), "%s/src/a.img", d);
	ck_assert_int_eq(proto_sh("mkdir -p '%s/src' '%s/alias' && dd "
		"if=/dev/zero of='%s' bs=1M count=4 status=none", d, d, file), 0);
	bound = proto_sh_in_tgtd("mount --bind '%s/src' '%s/alias' && "
		"losetup -f --show '%s/alias/a.img' >'%s/alias.dev'", d, d, d, d);
	snprintf(file, sizeof(file), "%s/alias.dev", d);
	if ((f = fopen(file, "r"))) {
		if (!fgets(dev, sizeof(dev), f))
			dev[0] = '\0';
		fclose(f);
	}
	dev[strcspn(dev, "\n")] = '\0';
	holder = dev[0] ? open(dev, O_RDONLY | O_EXCL) : -1;
	snprintf(file, sizeof(file), "%s/src/a.img", d);
	added = proto_add_lun(9, file, "mode=write-back", 0);
	if (holder >= 0)
		close(holder);
	if (!added)
		proto_del_lun(9);
	if (dev[0])
		proto_sh("losetup -d '%s'", dev);
	proto_sh_in_tgtd("umount '%s/alias'", d);
	ck_assert_int_eq(bound, 0);
	ck_assert_int_ge(holder, 0);
	ck_assert_int_ne(added, 0);
	snprintf(file, sizeof(file), "%s/src/a.img: backs %s, which is in use",
		 d, dev);
	ck_assert_msg(proto_log_has(file), "tgtd.log lacks \"%s\"", file);
}
END_TEST

/* Is /dev/shm a tmpfs (where the RAM cases below put their file)? */
static bool shm_is_tmpfs(void)
{
	return proto_sh("[ \"$(stat -f -c %%T /dev/shm 2>/dev/null)\" = tmpfs ]")
	       == 0;
}

/* A loop device over a tmpfs file is refused as the file would be, and
 * so is a file on an ext4 that sits on such a loop device (mounted in
 * tgtd's mount name space): nothing under them survives a power cut. */
START_TEST(test_blockdev_loop_on_tmpfs)
{
	char shm[96], dev[64], mnt[800], line[300];
	int as_dev, as_file;

	snprintf(shm, sizeof(shm), "/dev/shm/syncguard-proto-%d.img",
		 (int)getpid());
	snprintf(mnt, sizeof(mnt), "%s/on-shm", proto_dir());
	ck_assert_int_eq(proto_sh("truncate -s 32M %s", shm), 0);
	if (attach(shm, 512, dev, sizeof(dev))) {
		unlink(shm);
		ck_abort_msg("cannot attach a loop device to %s", shm);
	}
	as_dev = proto_add_lun(9, dev, "mode=write-back", 0);
	proto_sh("mkdir -p '%s' && mkfs.ext4 -q '%s'", mnt, dev);
	proto_sh_in_tgtd("mount '%s' '%s' && dd if=/dev/zero of='%s/lun.img' "
			 "bs=1M count=4 conv=fsync status=none", dev, mnt, mnt);
	snprintf(mnt + strlen(mnt), sizeof(mnt) - strlen(mnt), "/lun.img");
	as_file = proto_add_lun(10, mnt, "mode=write-through", 0);
	if (!as_dev)
		proto_del_lun(9);
	if (!as_file)
		proto_del_lun(10);
	*strrchr(mnt, '/') = '\0';
	proto_sh_in_tgtd("umount '%s'", mnt);
	proto_sh("losetup -d '%s'; rm -f %s", dev, shm);
	ck_assert_int_ne(as_dev, 0);
	ck_assert_int_ne(as_file, 0);
	snprintf(line, sizeof(line), "%s (the backing file of %s): file is "
		 "on a RAM file system", shm, dev);
	ck_assert_msg(proto_log_has(line), "tgtd.log lacks \"%s\"", line);
	snprintf(line, sizeof(line), "(its file system is on a loop device "
		 "over %s): file is on a RAM file system", shm);
	ck_assert_msg(proto_log_has(line), "tgtd.log lacks \"%s\"", line);
}
END_TEST

/* An MS-DOS partition table on @file: two 8 MiB partitions. */
static void write_two_partitions(const char *file)
{
	unsigned char mbr[512] = { 0 };
	const uint32_t start[2] = { 2048, 2048 + 16384 }, len = 16384;
	int fd = open(file, O_WRONLY);

	for (int i = 0; i < 2; i++) {
		unsigned char *e = mbr + 446 + 16 * i;

		e[4] = 0x83;				/* Linux */
		for (int b = 0; b < 4; b++) {
			e[8 + b] = (unsigned char)(start[i] >> (8 * b));
			e[12 + b] = (unsigned char)(len >> (8 * b));
		}
	}
	mbr[510] = 0x55;
	mbr[511] = 0xaa;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, mbr, sizeof(mbr), 0), sizeof(mbr));
	close(fd);
}

/* Partitions of a loop device share their file's lock: both can be
 * exported, but not beside the file or the whole device, in either
 * order (the file first, then a partition, is refused too). */
START_TEST(test_blockdev_loop_partitions)
{
	char dev[64], p1[80], p2[80];
	const char *file = proto_file("parts.img", DEV_BYTES, false);

	write_two_partitions(file);
	ck_assert_int_eq(attach(file, 512, dev, sizeof(dev)), 0);
	/* partitions added by hand outlive a detach: a loop device may
	 * come with some from its last user */
	ck_assert_int_eq(proto_sh("partx -d '%s' 2>/dev/null; partx -a '%s'",
				  dev, dev), 0);
	snprintf(p1, sizeof(p1), "%sp1", dev);
	snprintf(p2, sizeof(p2), "%sp2", dev);
	ck_assert_int_eq(proto_add_lun(9, file, "mode=write-back", 0), 0);
	ck_assert_int_ne(proto_add_lun(10, p1, "mode=write-back", 0), 0);
	proto_del_lun(9);
	ck_assert_int_eq(proto_add_lun(10, p1, "mode=write-back", 0), 0);
	ck_assert_int_eq(proto_add_lun(11, p2, "mode=write-through", 0), 0);
	ck_assert_int_ne(proto_add_lun(9, file, "mode=write-back", 0), 0);
	ck_assert_int_ne(proto_add_lun(12, dev, "mode=write-back", 0), 0);
	proto_del_lun(10);
	proto_del_lun(11);
	proto_sh("partx -d '%s'; losetup -d '%s'", dev, dev);
}
END_TEST

/* The remount tests' LUN: one no other test uses, so that a failed one,
 * which leaves it behind, fails no other */
#define REMOUNT_LUN 19

/* A fresh ext4 on a loop device over @img, set up and mounted at @mnt
 * from tgtd's mount name space (so @img may be on a mount only tgtd
 * sees); the device into @dev.  0, or nonzero. */
/* A loop device over @file (a path in tgtd's mount name space), direct
 * I/O on with @dio, its name into @dev: 0, or nonzero. */
static int attach_in_tgtd(const char *file, bool dio, char *dev, size_t len)
{
	char tmp[900];
	FILE *f;
	int ret;

	snprintf(tmp, sizeof(tmp), "%s/dev.tmp", proto_dir());
	ret = proto_sh_in_tgtd("losetup -f --show %s '%s' >'%s'",
			       dio ? "--direct-io=on" : "", file, tmp);
	dev[0] = '\0';
	if ((f = fopen(tmp, "r"))) {
		if (!fgets(dev, (int)len, f))
			dev[0] = '\0';
		fclose(f);
	}
	dev[strcspn(dev, "\n")] = '\0';
	return ret || !dev[0];
}

/* An ext4 made on a loop device over @img, mounted with options @opts
 * ("" for none) at @mnt in tgtd's mount name space; the loop into @dev.
 * 0, or nonzero. */
static int ext4_in_tgtd_as(const char *img, const char *mnt, const char *opts,
			   char *dev, size_t len)
{
	if (attach_in_tgtd(img, false, dev, len))
		return -1;
	return proto_sh_in_tgtd("mkfs.ext4 -q '%s' && mkdir -p '%s' && mount "
				"%s%s '%s' '%s'", dev, mnt, opts[0] ? "-o " : "",
				opts, dev, mnt);
}

static int ext4_in_tgtd(const char *img, const char *mnt, char *dev,
			size_t len)
{
	return ext4_in_tgtd_as(img, mnt, "", dev, len);
}

/* An ext4 at proto_dir()/remount-mnt (@mnt), on loop device @dev,
 * mounted in tgtd's mount name space; with @inner another ext4 at
 * @inner_mnt on loop device @inner_dev over a file in the first, and
 * the LUN's file on that.  Write-back LUN REMOUNT_LUN on a 4 MiB file there; a
 * FUA write is GOOD. */
struct remount_fs {
	char dev[64], mnt[800];
	char inner_dev[64], inner_mnt[800];
	bool inner;
};

static struct iscsi_context *remount_setup(struct remount_fs *fs)
{
	const char *img = proto_file("remount.img", DEV_BYTES, false);
	unsigned char out[512] = { 0x42 };
	struct iscsi_context *iscsi;
	char lun_img[900], inner_img[900];
	const char *top = fs->mnt;

	snprintf(fs->mnt, sizeof(fs->mnt), "%s/remount-mnt", proto_dir());
	ck_assert_int_eq(ext4_in_tgtd(img, fs->mnt, fs->dev, sizeof(fs->dev)),
			 0);
	if (fs->inner) {
		snprintf(inner_img, sizeof(inner_img), "%s/inner.img", fs->mnt);
		snprintf(fs->inner_mnt, sizeof(fs->inner_mnt), "%s/inner-mnt",
			 proto_dir());
		ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' "
			"bs=1M count=16 status=none", inner_img), 0);
		ck_assert_int_eq(ext4_in_tgtd(inner_img, fs->inner_mnt,
			fs->inner_dev, sizeof(fs->inner_dev)), 0);
		top = fs->inner_mnt;
	}
	snprintf(lun_img, sizeof(lun_img), "%s/lun.img", top);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 status=none", lun_img), 0);
	ck_assert_int_eq(proto_add_lun(REMOUNT_LUN, lun_img, "mode=write-back", 0), 0);
	iscsi = proto_connect(REMOUNT_LUN);
	proto_assert_good(iscsi_write16_sync(iscsi, REMOUNT_LUN, 1, out, 512, 512, 0, 0,
		1, 0, 0), "WRITE(16) FUA before", false);
	return iscsi;
}

/* After a remount nobarrier: the next FUA writes fail (MEDIUM ERROR,
 * WRITE ERROR) within @seconds instead of being answered GOOD without a
 * flush, and plain writes go on. */
static void remount_wait_latched_within(struct iscsi_context *iscsi,
					int seconds)
{
	unsigned char out[512] = { 0x42 };
	struct scsi_task *t = NULL;

	for (int i = 0; i < seconds * 50; i++) {	/* every 20 ms */
		if (t)
			scsi_free_scsi_task(t);
		t = iscsi_write16_sync(iscsi, REMOUNT_LUN, 1, out, 512, 512, 0, 0, 1, 0, 0);
		if (!t || t->status != SCSI_STATUS_GOOD)
			break;
		usleep(20000);
	}
	proto_assert_sense(t, SCSI_SENSE_MEDIUM_ERROR, 0x0c00,
			   "WRITE(16) FUA after the remount");
	proto_assert_good(iscsi_write16_sync(iscsi, REMOUNT_LUN, 2, out, 512, 512, 0, 0,
		0, 0, 0), "WRITE(16) without FUA", false);
}

/* the same when Linux signals the remount: tgtd's event loop, soon */
static void remount_wait_latched(struct iscsi_context *iscsi)
{
	remount_wait_latched_within(iscsi, 2);
}

/* The LUN, the mounts and the loop devices go; tgtd.log said why the LUN
 * failed, and that it closed without a final flush. */
static void remount_teardown(struct iscsi_context *iscsi,
			     const struct remount_fs *fs)
{
	iscsi_destroy_context(iscsi);
	proto_del_lun(REMOUNT_LUN);
	if (fs->inner)
		proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", fs->inner_mnt,
				 fs->inner_dev);
	proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", fs->mnt, fs->dev);
	ck_assert(proto_log_has("its file system was remounted nobarrier"));
	ck_assert(proto_log_has("closed with the error latched earlier "
				"(Input/output error): no final flush"));
}

/* A file system remounted nobarrier under a live write-back LUN latches
 * it.  The mount and the remount are made in tgtd's mount name space.
 * _i 1: the LUN's file is on an ext4 on a loop device, and the file
 * system remounted is the one under that loop's backing file (LUN
 * creation checks it, and so must the watch). */
START_TEST(test_blockdev_remount_nobarrier_latches)
{
	struct remount_fs fs = { .inner = _i == 1 };
	struct iscsi_context *iscsi = remount_setup(&fs);

	ck_assert_int_eq(proto_sh_in_tgtd("mount -o remount,nobarrier '%s'",
					  fs.mnt), 0);
	remount_wait_latched(iscsi);
	remount_teardown(iscsi, &fs);
}
END_TEST

/*
 * A sparse LUN file on an ext4 that fills up: a durable write is refused
 * (DATA PROTECT / SPACE ALLOCATION FAILED) and, once space is freed, the
 * next ones and SYNCHRONIZE CACHE are GOOD again.  An ENOSPC latched as
 * a failed flush would (core/lun.c, syncguard_latch) fail every durable
 * command until the LUN is re-created.  _i: write-back FUA
 * writes (O_DIRECT, io_uring), write-through (the same), write-through
 * on worker threads through the page cache.
 */
START_TEST(test_blockdev_full_fs_recovers)
{
	static const char *const opts[] = { "mode=write-back",
		"mode=write-through",
		"mode=write-through;engine=threads;direct=no;write_sync=dsync" };
	const char *img = proto_file("full.img", DEV_BYTES, false);
	static unsigned char out[65536], zero[65536];
	struct iscsi_context *iscsi;
	struct scsi_task *t = NULL;
	char mnt[800], dev[64], lun_img[900];
	const int lun = 20 + _i;	/* a failed run leaves its LUN */
	uint64_t lba = 65536;

	memset(out, 0x5a, sizeof(out));
	snprintf(mnt, sizeof(mnt), "%s/full-mnt%d", proto_dir(), _i);
	ck_assert_int_eq(ext4_in_tgtd(img, mnt, dev, sizeof(dev)), 0);
	snprintf(lun_img, sizeof(lun_img), "%s/lun.img", mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("truncate -s 64M '%s'", lun_img), 0);
	ck_assert_int_eq(proto_add_lun(lun, lun_img, opts[_i], 0), 0);
	iscsi = proto_connect(lun);
	/* one block at 48 MiB written while there is room */
	proto_assert_good(iscsi_write16_sync(iscsi, lun, 98304, out, 4096, 512,
			  0, 0, _i == 0, 0, 0), "WRITE(16) of one block", false);
	/* the LUN (64 MiB) is larger than its file system (32 MiB): fill
	 * that, then write until ext4's last reserves are gone too (1-2 MiB
	 * here), at most 16 MiB */
	proto_sh_in_tgtd("dd if=/dev/zero of='%s/filler' bs=1M status=none "
			 "2>/dev/null; sync", mnt);
	for (int i = 0; i < 256; i++, lba += sizeof(out) / 512) {
		if (t)
			scsi_free_scsi_task(t);
		t = iscsi_write16_sync(iscsi, lun, lba, out, sizeof(out), 512,
				       0, 0, _i == 0, 0, 0);
		if (!t || t->status != SCSI_STATUS_GOOD)
			break;
	}
	proto_assert_sense(t, SCSI_SENSE_DATA_PROTECTION, 0x2707,
			   "WRITE(16) on a full file system");
	ck_assert_int_eq(proto_counter(lun, "latched.errno"), ENOSPC);
	/* refused too, and they change nothing below (reading the first
	 * block back must not take them for writes that went in and had
	 * their sync fail, which would latch for good): a write whose first
	 * block is allocated and the rest not, and zeroes into a hole */
	proto_assert_sense(iscsi_write16_sync(iscsi, lun, 98304, out,
			   sizeof(out), 512, 0, 0, _i == 0, 0, 0),
			   SCSI_SENSE_DATA_PROTECTION, 0x2707,
			   "WRITE(16) beyond an allocated block, file system full");
	proto_assert_sense(iscsi_write16_sync(iscsi, lun, 110000, zero,
			   sizeof(zero), 512, 0, 0, _i == 0, 0, 0),
			   SCSI_SENSE_DATA_PROTECTION, 0x2707,
			   "WRITE(16) of zeroes into a hole, file system full");
	ck_assert_int_eq(proto_sh_in_tgtd("rm '%s/filler' && sync", mnt), 0);
	proto_assert_good(iscsi_write16_sync(iscsi, lun, lba, out, sizeof(out),
			  512, 0, 0, _i == 0, 0, 0), "WRITE(16) with space freed",
			  false);
	proto_assert_good(iscsi_synchronizecache10_sync(iscsi, lun, 0, 0, 0, 0),
			  "SYNCHRONIZE CACHE(10) with space freed", false);
	ck_assert_int_eq(proto_counter(lun, "latched"), -1);	/* null */
	iscsi_destroy_context(iscsi);
	proto_del_lun(lun);
	proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", mnt, dev);
}
END_TEST

/* The same when the change of the mount table reaches tgtd's event loop
 * in one batch behind a connection that closes: tgtd drops the rest of
 * a batch when a handler removes an event, and Linux signals a change
 * of /proc/self/mountinfo once, so a watch on it in tgtd's loop would
 * lose this remount.  tgtd is stopped while both happen, so both are in its
 * next batch, the closed connection first. */
START_TEST(test_blockdev_remount_beside_closing_connection)
{
	struct remount_fs fs = { .inner = false };
	struct iscsi_context *iscsi = remount_setup(&fs);
	struct iscsi_context *other = proto_connect(REMOUNT_LUN);
	int remounted;

	ck_assert_int_eq(proto_tgtd_signal("STOP"), 0);
	iscsi_destroy_context(other);
	remounted = proto_sh_in_tgtd("mount -o remount,nobarrier '%s'",
				     fs.mnt);
	ck_assert_int_eq(proto_tgtd_signal("CONT"), 0);
	ck_assert_int_eq(remounted, 0);
	remount_wait_latched(iscsi);
	remount_teardown(iscsi, &fs);
}
END_TEST

/* The same when the remount is made in another mount name space (a
 * new one, where the same ext4 is mounted too): nobarrier belongs to
 * the file system, so tgtd's LUN loses its flushes as well, but Linux
 * signals the change only where it was made; the watch's periodic check
 * (every 2 s) finds it (without it, FUA writes go on GOOD). */
START_TEST(test_blockdev_remount_elsewhere_latches)
{
	struct remount_fs fs = { .inner = false };
	struct iscsi_context *iscsi = remount_setup(&fs);
	char here[900];
	int remounted;

	snprintf(here, sizeof(here), "%s/remount-here", proto_dir());
	/* a name space of its own, whose changes tgtd's never sees */
	remounted = proto_sh("mkdir -p '%s' && unshare -m --propagation private "
		"sh -c \"mount '%s' '%s' && mount -o remount,nobarrier '%s'\"",
		here, fs.dev, here, here);
	ck_assert_int_eq(remounted, 0);
	remount_wait_latched_within(iscsi, 10);
	remount_teardown(iscsi, &fs);
}
END_TEST

/* The same when tgtd has no descriptor free as the table changes (a
 * watch that opened the table anew would lose the change; it reads
 * through the descriptor it polls, and a table it cannot read is tried
 * again a second later) */
START_TEST(test_blockdev_remount_out_of_descriptors)
{
	struct remount_fs fs = { .inner = false };
	struct iscsi_context *iscsi = remount_setup(&fs);
	int limited, remounted, restored;

	limited = proto_nofile_limit();
	remounted = proto_sh_in_tgtd("mount -o remount,nobarrier '%s'",
				     fs.mnt);
	usleep(300000);		/* the change is handled meanwhile */
	restored = proto_nofile_restore();
	ck_assert_int_eq(limited, 0);
	ck_assert_int_eq(remounted, 0);
	ck_assert_int_eq(restored, 0);
	remount_wait_latched(iscsi);
	remount_teardown(iscsi, &fs);
}
END_TEST

/* Does this machine have an unused zram0 (a RAM block device)? */
static bool zram_unused(void)
{
	return proto_sh("[ \"$(cat /sys/block/zram0/disksize 2>/dev/null)\" "
			"= 0 ]") == 0;
}

/* A RAM block device (zram) is refused as tmpfs is (zram0 is set to 16
 * MiB for the test and reset after). */
START_TEST(test_blockdev_ram_device_refused)
{
	const char *zram = "/sys/block/zram0";
	int ret;

	ck_assert_int_eq(proto_sh("echo 16M >%s/disksize", zram), 0);
	ret = proto_add_lun(9, "/dev/zram0", "mode=write-through", 0);
	if (!ret)
		proto_del_lun(9);
	proto_sh("echo 1 >%s/reset", zram);
	ck_assert_int_ne(ret, 0);
	ck_assert(proto_log_has("/dev/zram0: on a RAM block device (zram0): "
				"nothing on it survives a power cut"));
}
END_TEST

static int overlay_in_tgtd(const char *base, const char *opts,
			   const char *ov);

/* A RAM block device under a file system whose files carry a device
 * number no block device has: btrfs (0:N; its devices are listed in
 * sysfs under its UUID), and an overlay (its upper layer's file system
 * holds the data).  A LUN on a file there is refused in every mode, as
 * on the zram itself; taken, its FUA writes and SYNCHRONIZE CACHEs
 * would be answered GOOD into RAM.  Loop 0: btrfs on zram0; 1: an
 * overlay whose layers are on an ext4 on zram0 (set to 128 MiB for the
 * test, as mkfs.btrfs needs, and reset after). */
START_TEST(test_blockdev_ram_device_under_btrfs_and_overlay)
{
	static const char *const modes[] = { "mode=write-through",
		"mode=write-back", "mode=plp" };
	const char *why = "a RAM block device (zram0)";
	char mnt[800], ov[800], file[900];
	int before = proto_log_count(why), refused = 0, failed;

	snprintf(mnt, sizeof(mnt), "%s/zram-mnt", proto_dir());
	snprintf(ov, sizeof(ov), "%s/zram-ov", proto_dir());
	ck_assert_int_eq(proto_sh("echo 128M >/sys/block/zram0/disksize"), 0);
	failed = proto_sh_in_tgtd("mkfs.%s -q /dev/zram0 >/dev/null && "
		"mkdir -p '%s' && mount /dev/zram0 '%s'",
		_i ? "ext4" : "btrfs", mnt, mnt);
	if (!failed && _i)
		failed = overlay_in_tgtd(mnt, "", ov);
	snprintf(file, sizeof(file), "%s/lun.img", _i ? ov : mnt);
	if (!failed)
		failed = proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M count=4 "
					"conv=fsync status=none", file);
	for (int i = 0; !failed && i < 3; i++) {
		refused += proto_add_lun(9, file, modes[i], 0) != 0;
		proto_del_lun(9);
	}
	proto_sh_in_tgtd("umount '%s' 2>/dev/null; umount '%s'", ov, mnt);
	proto_sh("echo 1 >/sys/block/zram0/reset");
	ck_assert_int_eq(failed, 0);
	ck_assert_int_eq(refused, 3);
	/* btrfs in plp is refused first as copy-on-write */
	ck_assert_int_eq(proto_log_count(why), before + (_i ? 3 : 2));
}
END_TEST

/* tgtd.log says what Linux believes of the device's write cache, and
 * warns where it sends no flushes (queue/write_cache "write through") */
START_TEST(test_blockdev_device_cache_logged)
{
	char dev[64], wc[96], line[300];
	const char *file = proto_file("cache.img", DEV_BYTES, false);
	const char *name;
	int added;

	ck_assert_int_eq(attach(file, 512, dev, sizeof(dev)), 0);
	name = strrchr(dev, '/') + 1;
	snprintf(wc, sizeof(wc), "/sys/block/%s/queue/write_cache", name);
	ck_assert_int_eq(proto_sh("echo 'write through' >%s", wc), 0);
	added = proto_add_lun(9, dev, "mode=write-through", 0);
	proto_del_lun(9);
	/* back at once: the setting outlives a detach, and a loop device
	 * left "write through" drops flushes for its next user */
	proto_sh("echo 'write back' >%s", wc);
	ck_assert_int_eq(added, 0);
	ck_assert_int_eq(proto_sh("losetup --direct-io=on '%s'", dev), 0);
	ck_assert_int_eq(proto_add_lun(9, dev, "mode=plp", 0), 0);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'", dev);
	snprintf(line, sizeof(line), "device %s reports no volatile write "
		 "cache, so Linux sends it no flushes: if it has one "
		 "(write_cache set by hand), writes are not durable", name);
	ck_assert_msg(proto_log_has(line), "tgtd.log lacks \"%s\"", line);
	snprintf(line, sizeof(line), "device %s has a volatile write cache, "
		 "which plp never flushes: it must be power-loss protected",
		 name);
	ck_assert_msg(proto_log_has(line), "tgtd.log lacks \"%s\"", line);
}
END_TEST

/*
 * A loop device with direct I/O off (loop's default) over a file with
 * holes: tgtd.log warns.  RWF_DSYNC writes straight to such a device
 * can read back lost, hundreds of acknowledged ones, once the file's
 * file system fills up (core/loopdev.c); nothing above the loop
 * driver can see it.  Not with direct I/O on.
 */
START_TEST(test_blockdev_loop_holes_warned)
{
	const char *line = "this loop device has direct I/O off and its "
			   "backing file has holes";
	char dev[64];
	int before = proto_log_count(line), added, added_dio, warned, dio;

	ck_assert_int_eq(attach(proto_file("holes.img", DEV_BYTES, true), 4096,
				dev, sizeof(dev)), 0);
	added = proto_add_lun(9, dev, "mode=write-through", 4096);
	proto_del_lun(9);
	warned = proto_log_count(line);
	dio = proto_sh("losetup --direct-io=on '%s'", dev);
	added_dio = proto_add_lun(9, dev, "mode=write-through", 4096);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'", dev);
	ck_assert_int_eq(added, 0);
	ck_assert_int_eq(warned, before + 1);
	ck_assert_int_eq(dio, 0);
	ck_assert_int_eq(added_dio, 0);
	ck_assert_int_eq(proto_log_count(line), before + 1);
}
END_TEST

/* write-back with direct=auto keeps every write of a block device in
 * the page cache (its asynchronous O_DIRECT writes do not drop pages a
 * read cached meanwhile: core/mix.c); direct=yes is O_DIRECT throughout */
START_TEST(test_blockdev_write_back_page_cache)
{
	static const char *const engines[] = { "io_uring", "threads" };
	char line[256];
	bool found = false;

	for (int e = 0; e < 2; e++) {
		snprintf(line, sizeof(line), "%s, mode=write-back, %u bytes, "
			 "512-byte blocks, engine %s, 32 workers, writes through "
			 "the page cache\n", devs[0].dev, DEV_BYTES, engines[e]);
		found = found || proto_log_has(line);
	}
	ck_assert_msg(found, "no page-cache line for %s", devs[0].dev);
	found = false;
	for (int e = 0; e < 2; e++) {
		snprintf(line, sizeof(line), "%s, mode=write-back, %u bytes, "
			 "512-byte blocks, engine %s, 32 workers, writes O_DIRECT",
			 devs[3].dev, DEV_BYTES, engines[e]);
		found = found || proto_log_has(line);
	}
	ck_assert_msg(found, "no O_DIRECT line for %s", devs[3].dev);
}
END_TEST

/*
 * A write answered GOOD is what the next read returns, while two other
 * sessions keep reading the block.  On a block device whose writes go
 * O_DIRECT through io_uring, a page-cache read that overlaps one keeps
 * the old data cached after it (block/fops.c drops such pages only for
 * synchronous writes), and the next read returns it: 9-164 stale reads
 * in 3,000 writes, so reads there go O_DIRECT too (core/lun.c).  A file
 * on the build directory's file system (ext4 here: iomap drops the pages
 * when the write completes) keeps its page-cache reads, and is checked
 * the same way, with write-through's O_DIRECT writes and write-back's
 * FUA ones (core/mix.c).
 */
START_TEST(test_blockdev_read_after_write)
{
	static const char *const cases[] = { "write-through, loop device",
		"plp, loop device", "write-through, file",
		"write-back, file, FUA writes" };
	int lun = _i == 0 ? devs[1].lun : _i == 1 ? devs[2].lun : 9;
	uint32_t stale, first;

	if (_i >= 2)
		ck_assert_int_eq(proto_add_lun(lun, proto_file("raw.img",
			DEV_BYTES, false), _i == 2 ? "mode=write-through" :
			"mode=write-back", 4096), 0);
	stale = proto_stale_reads(lun, 4096, 7, 3000, _i == 3, &first);
	if (_i >= 2)
		proto_del_lun(lun);
	ck_assert_msg(stale == 0, "%s: %u reads returned the data before the "
		      "write just answered (first after write %u)", cases[_i],
		      stale, first);
}
END_TEST

/* A tgtd with no LUN yet, so that the next one starts the mount watch */
static void watch_setup(void)
{
	proto_tgtd_start();
}

/* Where the pids controller is: cgroup version 1's own hierarchy, or
 * version 2's root (with pids enabled for its children); NULL if none.
 * A test cgroup, its child, caps tgtd's threads. */
static const char *pids_base(void)
{
	if (access("/sys/fs/cgroup/pids/cgroup.procs", W_OK) == 0)
		return "/sys/fs/cgroup/pids";
	if (proto_sh("grep -qw pids /sys/fs/cgroup/cgroup.controllers && "
		     "echo +pids >/sys/fs/cgroup/cgroup.subtree_control "
		     "2>/dev/null") == 0)
		return "/sys/fs/cgroup";
	return NULL;
}

static void watch_teardown(void)
{
	const char *base = pids_base();

	if (base)
		proto_sh("echo $(cat '%s/tgtd/pid') >%s/cgroup.procs; "
			 "rmdir %s/syncguard-proto-%d 2>/dev/null", proto_dir(),
			 base, base, (int)getpid());
	proto_tgtd_stop();
}

/* Turn loop device @loop's direct I/O off under plp LUN 9 (@bs-byte
 * blocks, on @iscsi): within 4 s its FUA writes fail, MEDIUM ERROR /
 * WRITE ERROR (the mount watch latched it), instead of GOOD while they
 * sit in the page cache of the loop's backing file. */
static void dio_off_latches(struct iscsi_context *iscsi, const char *loop,
			    unsigned int bs, const char *what)
{
	unsigned char out[4096] = { 0x42 };
	struct scsi_task *t = NULL;

	ck_assert_int_eq(proto_sh("losetup --direct-io=off '%s'", loop), 0);
	for (int i = 0; i < 4 * 50; i++) {	/* 4 s, every 20 ms */
		if (t)
			scsi_free_scsi_task(t);
		t = iscsi_write16_sync(iscsi, 9, 1, out, bs, bs, 0, 0, 1, 0, 0);
		if (!t || t->status != SCSI_STATUS_GOOD)
			break;
		usleep(20000);
	}
	proto_assert_sense(t, SCSI_SENSE_MEDIUM_ERROR, 0x0c00, what);
}

/*
 * plp on a loop device needs the loop's direct I/O on (core/loopdev.c,
 * plp_over_loop): with it off (loop's default), FUA writes are
 * answered GOOD from the page cache of the loop's backing file,
 * which plp never flushes.  Refused then; taken with it on; and when it
 * is turned off under the live LUN, the mount watch (every 2 s without
 * a signal) latches the LUN, so a FUA write fails.
 */
START_TEST(test_blockdev_plp_loop_needs_direct_io)
{
	const char *refused = "has direct I/O off, so its writes end in the "
			      "page cache of its backing file";
	const char *lost = "its loop device's direct I/O was turned off";
	unsigned char out[4096] = { 0x42 };
	struct iscsi_context *iscsi;
	char dev[64];
	int before = proto_log_count(refused), added, taken;

	ck_assert_int_eq(attach(proto_file("plp-dio.img", DEV_BYTES, false),
				4096, dev, sizeof(dev)), 0);
	added = proto_add_lun(9, dev, "mode=plp", 4096);
	ck_assert_int_eq(proto_sh("losetup --direct-io=on '%s'", dev), 0);
	taken = proto_add_lun(9, dev, "mode=plp", 4096);
	ck_assert_int_ne(added, 0);
	ck_assert_int_eq(proto_log_count(refused), before + 1);
	ck_assert_int_eq(taken, 0);
	iscsi = proto_connect(9);
	proto_assert_good(iscsi_write16_sync(iscsi, 9, 1, out, 4096, 4096, 0,
			  0, 1, 0, 0), "WRITE(16) FUA, direct I/O on", false);
	dio_off_latches(iscsi, dev, 4096, "WRITE(16) FUA after direct I/O "
			"was turned off");
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'", dev);
	ck_assert(proto_log_has(lost));
}
END_TEST

/* plp LUN 9 on @path: refused with @why in tgtd.log while loop device
 * @loop (somewhere under it) has direct I/O off, taken once it is on
 * (then deleted). */
static void plp_until_dio_on(const char *path, const char *loop,
			     const char *why, bool *refused, bool *taken)
{
	*refused = proto_add_lun(9, path, "mode=plp", 0) != 0 &&
		   proto_log_has(why);
	proto_sh("losetup --direct-io=on '%s'", loop);
	*taken = proto_add_lun(9, path, "mode=plp", 0) == 0;
	proto_del_lun(9);
}

/* The same for a plp file in an ext4 on a loop device: refused while
 * that loop's direct I/O is off, taken once it is on. */
START_TEST(test_blockdev_plp_file_over_buffered_loop)
{
	const char *img = proto_file("plp-under.img", DEV_BYTES, false);
	char mnt[800], dev[64], lun_img[900];
	bool refused, taken;

	snprintf(mnt, sizeof(mnt), "%s/plp-under-mnt", proto_dir());
	ck_assert_int_eq(ext4_in_tgtd(img, mnt, dev, sizeof(dev)), 0);
	snprintf(lun_img, sizeof(lun_img), "%s/lun.img", mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 conv=fsync status=none", lun_img), 0);
	plp_until_dio_on(lun_img, dev, "mode=plp: the loop device under",
			 &refused, &taken);
	proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", mnt, dev);
	ck_assert(refused);
	ck_assert(taken);
}
END_TEST

/* Loop devices stacked: plp on loop device A (direct I/O on) over a
 * file in an ext4 on loop device B.  Refused while B's direct I/O is
 * off (A's writes end in B's backing file's page cache, which a check
 * of A alone misses: FUA writes leave tens of MiB dirty there), taken
 * once it is on, and latched by the mount watch when it is turned off
 * again. */
START_TEST(test_blockdev_plp_stacked_loops_need_direct_io)
{
	const char *img = proto_file("stack.img", DEV_BYTES, false);
	unsigned char out[4096] = { 0x42 };
	char mnt[800], low[64], top[64], file[900];
	struct iscsi_context *iscsi;
	int refused, taken;

	snprintf(mnt, sizeof(mnt), "%s/stack-mnt", proto_dir());
	ck_assert_int_eq(ext4_in_tgtd(img, mnt, low, sizeof(low)), 0);
	snprintf(file, sizeof(file), "%s/top.img", mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=8 conv=fsync status=none", file), 0);
	ck_assert_int_eq(attach_in_tgtd(file, true, top, sizeof(top)), 0);
	refused = proto_add_lun(9, top, "mode=plp", 0) != 0 &&
		  proto_log_has("mode=plp: the loop device under");
	proto_sh("losetup --direct-io=on '%s'", low);
	taken = proto_add_lun(9, top, "mode=plp", 0) == 0;
	iscsi = proto_connect(9);
	proto_assert_good(iscsi_write16_sync(iscsi, 9, 1, out, 512, 512, 0,
		0, 1, 0, 0), "WRITE(16) FUA, direct I/O on below", false);
	dio_off_latches(iscsi, low, 512, "WRITE(16) FUA after direct I/O was "
			"turned off below");
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	proto_sh_in_tgtd("losetup -d '%s'; umount '%s'; losetup -d '%s'", top,
			 mnt, low);
	ck_assert(refused);
	ck_assert(taken);
}
END_TEST

/*
 * A file that cannot do direct I/O: encrypted by fscrypt on an ext4
 * without inline crypto, which turns its O_DIRECT writes into buffered
 * ones silently (statx: dio_offset_align 0).  A plp LUN on it takes the
 * page cache and writes each write out: 8 MiB of FUA writes leave no
 * dirty page (with 0 read as "unknown, use 4096", they would leave
 * 2,048, GOOD and WCE=0 all the same).  direct=yes is refused, and so is plp on
 * a loop device with direct I/O on over such a file (the loop's dio
 * attribute says 1 and its writes are buffered just the same).
 */
START_TEST(test_blockdev_fscrypt)
{
	const char *img = proto_file("fscrypt.img", 64u << 20, false);
	const char *top = getenv("SYNCGUARD_TOP");
	static unsigned char out[1 << 20];
	char mnt[800], dev[64], file[900], loop[64];
	struct iscsi_context *iscsi;
	int direct_yes, on_loop;
	long long dirty;

	if (!top)
		top = ".";
	snprintf(mnt, sizeof(mnt), "%s/fscrypt-mnt", proto_dir());
	snprintf(file, sizeof(file), "%s/enc/lun.img", mnt);
	/* direct I/O on below it: plp needs that of the loop under it */
	ck_assert_int_eq(attach_in_tgtd(img, true, dev, sizeof(dev)), 0);
	if (proto_sh_in_tgtd("mkfs.ext4 -q -O encrypt '%s' && mkdir -p '%s' && "
			     "mount '%s' '%s' && mkdir '%s/enc' && '%s/build/fsprobe' "
			     "encrypt '%s' '%s/enc'", dev, mnt, dev, mnt, mnt, top,
			     mnt, mnt)) {
		/* a kernel without CONFIG_FS_ENCRYPTION: said, not faked */
		test_left_out("test_blockdev_fscrypt", false, "no fscrypt "
			      "here (a kernel without CONFIG_FS_ENCRYPTION)");
		proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", mnt, dev);
		return;
	}
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=16 conv=fsync status=none", file), 0);
	direct_yes = proto_add_lun(9, file, "mode=plp;direct=yes", 0);
	ck_assert_int_eq(proto_add_lun(9, file, "mode=plp", 0), 0);
	ck_assert(proto_log_has("written out (the file cannot do direct I/O)"));
	iscsi = proto_connect(9);
	memset(out, 0x5a, sizeof(out));
	for (int i = 0; i < 8; i++)
		proto_assert_good(iscsi_write10_sync(iscsi, 9, (uint32_t)i * 2048,
			out, sizeof(out), 512, 0, 0, 1, 0, 0), "WRITE(10) FUA, "
			"1 MiB", false);
	ck_assert_int_eq(proto_sh_in_tgtd("'%s/build/fsprobe' dirty '%s' "
		">'%s/dirty.out'", top, file, proto_dir()), 0);
	dirty = proto_sh_number("cat '%s/dirty.out'", proto_dir());
	ck_assert_int_ge(proto_counter(9, "writeouts"), 8);
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	ck_assert_int_eq(attach_in_tgtd(file, true, loop, sizeof(loop)), 0);
	on_loop = proto_add_lun(9, loop, "mode=plp", 0);
	proto_del_lun(9);
	proto_sh_in_tgtd("losetup -d '%s'; umount '%s'; losetup -d '%s'", loop,
			 mnt, dev);
	ck_assert_int_ne(direct_yes, 0);
	ck_assert_msg(dirty == 0, "%lld pages dirty after FUA writes on plp",
		      dirty);
	ck_assert_int_ne(on_loop, 0);
	ck_assert(proto_log_has("cannot do direct I/O (fscrypt without inline "
				"encryption"));
}
END_TEST

/*
 * ZFS zvols.  This machine has no ZFS: a stand-in zfs command, overlaid
 * on /usr/sbin in tgtd's mount name space only (where the module runs
 * /usr/sbin/zfs), answers "zfs get" for dataset tank/vol1 from a file
 * the test writes, and a loop device stands in for the zvol under its
 * udev name /dev/zvol/tank/vol1 (a tmpfs over /dev/zvol, in tgtd's name
 * space too).  sync=disabled is refused in every mode, plp needs
 * sync=always, volblocksize is the physical block initiators are told
 * (READ CAPACITY(16), Block Limits), and a LUN whose dataset is set to
 * sync=disabled while it lives latches.  The same holds for a zvol under
 * a loop device and under a file system the LUN stands on.  A zfs that
 * stops answering (a suspended pool; here the stand-in sleeps 10 s, and
 * is killed after 5) holds up neither the LUN's commands nor the watch's
 * later reads (glue/zvolwatch.c): every FUA write in 6 s of it is
 * answered within 2.5 s, where on tgtd's event thread each round of the
 * watch stopped it for 5 s.
 */
/* FUA writes to LUN @lun every 0.1 s until one fails (the watch latched
 * the LUN), for @tenths of a second at most: whether one did */
static bool fua_writes_fail(struct iscsi_context *iscsi, int lun,
			    unsigned char *out, int tenths)
{
	struct scsi_task *t;
	bool latched = false;

	for (int i = 0; i < tenths && !latched; i++) {
		usleep(100000);
		t = iscsi_write10_sync(iscsi, lun, 0, out, 512, 512, 0, 0, 1, 0,
				       0);
		ck_assert_ptr_nonnull(t);
		latched = t->status == SCSI_STATUS_CHECK_CONDITION;
		scsi_free_scsi_task(t);
	}
	return latched;
}

static double seconds(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* FUA writes to LUN 9 every 0.1 s for 6 s, each answered GOOD: the
 * longest one took, in seconds */
static double slowest_fua_write(struct iscsi_context *iscsi,
				unsigned char *out)
{
	double slowest = 0, start = seconds();

	while (seconds() < start + 6) {
		double a;

		usleep(100000);
		a = seconds();
		proto_assert_good(iscsi_write10_sync(iscsi, 9, 0, out, 512, 512,
				  0, 0, 1, 0, 0), "FUA WRITE(10), zfs silent",
				  false);
		if (seconds() - a > slowest)
			slowest = seconds() - a;
	}
	return slowest;
}

/* The stand-in's answer for a dataset, replaced whole (a zvol watch's
 * zfs get reading it meanwhile sees the old one or the new one) */
static void zfs_props(const char *file, const char *sync)
{
	char tmp[1000];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", file);
	ck_assert_ptr_nonnull(f = fopen(tmp, "w"));
	fprintf(f, "sync\t%s\nvolblocksize\t16384\nlogbias\tlatency\n", sync);
	fclose(f);
	ck_assert_int_eq(rename(tmp, file), 0);
}

static void clear_latch(const char *dev)
{
	proto_sh("'%s/tools/syncguard-stat' --clear-latch '%s' --state-dir "
		 "'%s' >/dev/null 2>&1", getenv("SYNCGUARD_TOP") ?
		 getenv("SYNCGUARD_TOP") : ".", dev, proto_state_dir());
}

/* The stand-ins: zfs get answers for tank/vol1 and pool2/vol2 (two
 * pools) from props[0] and props[1], sync=disabled until told otherwise,
 * and once the file renamed exists (zfs rename tank/vol1 tank/renamed)
 * for tank/renamed from props[0], no longer for tank/vol1;
 * for tank/vol1 it sleeps 10 s while the file hang exists, closes its
 * output and sleeps 30 s while stuck does (a zfs that stops answering),
 * and while dstate names a block device, reads it O_DIRECT (a zfs that
 * SIGKILL cannot end while that read waits); its pid in pid.  Two loop
 * devices are the zvols, dev[0] and dev[1]. */
struct zvol_fx {
	char d[800], props[2][900], hang[900], stuck[900], pid[900];
	char dstate[900];
	char dev[2][64];
	bool made_dev_zvol;
};

static void zvol_setup(struct zvol_fx *fx)
{
	char script[900];
	FILE *f;

	snprintf(fx->d, sizeof(fx->d), "%s/zfs", proto_dir());
	ck_assert_int_eq(proto_sh("mkdir -p '%s/up' '%s/wk'", fx->d, fx->d),
			 0);
	for (int i = 0; i < 2; i++) {
		snprintf(fx->props[i], sizeof(fx->props[i]), "%s/props%d",
			 fx->d, i + 1);
		zfs_props(fx->props[i], "disabled");
	}
	snprintf(fx->hang, sizeof(fx->hang), "%s/hang", fx->d);
	snprintf(fx->stuck, sizeof(fx->stuck), "%s/stuck", fx->d);
	snprintf(fx->pid, sizeof(fx->pid), "%s/pid", fx->d);
	snprintf(fx->dstate, sizeof(fx->dstate), "%s/dstate", fx->d);
	snprintf(script, sizeof(script), "%s/renamed", fx->d);
	unlink(script);			/* tank/vol1 as it was */
	snprintf(script, sizeof(script), "%s/up/zfs", fx->d);
	ck_assert_ptr_nonnull(f = fopen(script, "w"));
	fprintf(f, "#!/bin/sh\n# stands in for ZFS's zfs command (tests/proto "
		"check_blockdev.c): zfs get ... tank/volN\n[ \"$1\" = get ] || "
		"exit 2\nfor a; do ds=$a; done\ncase $ds in\ntank/vol1) "
		"[ -e '%s/renamed' ] && exit 1\n\t"
		"p='%s'\n\t[ -e '%s' ] && echo $$ >'%s' && exec sleep 10\n\t"
		"[ -e '%s' ] && echo $$ >'%s' && exec sleep 30 >&-\n\t"
		"[ -e '%s' ] && echo $$ >'%s' && exec dd if=\"$(cat '%s')\" "
		"of=/dev/null iflag=direct bs=4096 count=1 skip=3000 2>&-\n\t;;\n"
		"pool2/vol2) p='%s' ;;\ntank/renamed) [ -e '%s/renamed' ] || "
		"exit 1\n\tp='%s' ;;\n*) exit 1 ;;\nesac\ncat \"$p\"\n", fx->d,
		fx->props[0], fx->hang, fx->pid, fx->stuck, fx->pid,
		fx->dstate, fx->pid, fx->dstate, fx->props[1], fx->d,
		fx->props[0]);
	fclose(f);
	ck_assert_int_eq(chmod(script, 0755), 0);
	for (int i = 0; i < 2; i++) {
		char name[32];

		snprintf(name, sizeof(name), "zvol%d.img", i + 1);
		ck_assert_int_eq(attach_as(proto_file(name, DEV_BYTES, false),
					   512, true, fx->dev[i],
					   sizeof(fx->dev[i])), 0);
	}
	fx->made_dev_zvol = access("/dev/zvol", F_OK) != 0;
	ck_assert_int_eq(proto_sh_in_tgtd("mount -t overlay -o lowerdir=/usr/sbin,"
		"upperdir='%s/up',workdir='%s/wk' overlay /usr/sbin && mkdir -p "
		"/dev/zvol && mount -t tmpfs tmpfs /dev/zvol && mkdir /dev/zvol/"
		"tank /dev/zvol/pool2 && ln -s '%s' /dev/zvol/tank/vol1 && ln -s "
		"'%s' /dev/zvol/pool2/vol2", fx->d, fx->d, fx->dev[0],
		fx->dev[1]), 0);
}

static void zvol_teardown(struct zvol_fx *fx)
{
	/* a stand-in still asleep holds /usr/sbin */
	proto_sh("p=$(cat '%s' 2>/dev/null) && [ \"$(cat /proc/$p/comm "
		 "2>/dev/null)\" = sleep ] && kill -9 $p; sleep 0.1", fx->pid);
	proto_sh_in_tgtd("umount /dev/zvol; umount /usr/sbin");
	if (fx->made_dev_zvol)
		rmdir("/dev/zvol");
	for (int i = 0; i < 2; i++)
		proto_sh("losetup -d '%s'", fx->dev[i]);
}

START_TEST(test_blockdev_zvol)
{
	unsigned char out[512] = { 0x7a };
	const char *props;
	double slowest;
	struct scsi_readcapacity16 *rc;
	struct scsi_inquiry_block_limits *bl;
	struct iscsi_context *iscsi;
	struct scsi_task *t;
	struct zvol_fx fx;
	int disabled, standard_plp, latched = 0;
	int under_loop, under_fs, under_fs_plp;
	char loop2[64], mnt[900], file[1000];

	zvol_setup(&fx);
	props = fx.props[0];
	disabled = proto_add_lun(9, "/dev/zvol/tank/vol1", "mode=write-back", 0);
	zfs_props(props, "standard");
	standard_plp = proto_add_lun(9, "/dev/zvol/tank/vol1", "mode=plp", 0);
	ck_assert_int_eq(proto_add_lun(9, "/dev/zvol/tank/vol1",
				       "mode=write-back", 0), 0);
	ck_assert(proto_log_has("on ZFS dataset tank/vol1: sync=standard, "
				"logbias=latency (a zvol"));
	iscsi = proto_connect(9);
	t = iscsi_readcapacity16_sync(iscsi, 9);
	proto_assert_good(t, "READ CAPACITY(16)", true);
	rc = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(rc);
	ck_assert_uint_eq(rc->lbppbe, 5);	/* 16384 = 2^5 x 512 */
	scsi_free_scsi_task(t);
	t = iscsi_inquiry_sync(iscsi, 9, 1, SCSI_INQUIRY_PAGECODE_BLOCK_LIMITS,
			       64);
	proto_assert_good(t, "INQUIRY Block Limits", true);
	bl = scsi_datain_unmarshall(t);
	ck_assert_ptr_nonnull(bl);
	ck_assert_uint_eq(bl->opt_gran, 32);
	scsi_free_scsi_task(t);
	proto_assert_good(iscsi_write10_sync(iscsi, 9, 0, out, 512, 512, 0, 0, 1,
			  0, 0), "FUA WRITE(10) at sync=standard", false);
	ck_assert_int_eq(proto_sh("touch '%s'", fx.hang), 0);	/* zfs silent */
	slowest = slowest_fua_write(iscsi, out);
	unlink(fx.hang);
	zfs_props(props, "disabled");		/* zfs set sync=disabled */
	latched = fua_writes_fail(iscsi, 9, out, 100);
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	clear_latch(fx.dev[0]);
	zfs_props(props, "always");
	ck_assert_int_eq(proto_add_lun(9, "/dev/zvol/tank/vol1", "mode=plp", 0),
			 0);
	proto_del_lun(9);
	/* a loop device over the zvol, and a file in an ext4 on it */
	zfs_props(props, "disabled");
	ck_assert_int_eq(attach_in_tgtd("/dev/zvol/tank/vol1", true, loop2,
					sizeof(loop2)), 0);
	under_loop = proto_add_lun(9, loop2, "mode=write-back", 0);
	proto_del_lun(9);
	proto_sh_in_tgtd("losetup -d '%s'", loop2);
	snprintf(mnt, sizeof(mnt), "%s/zmnt", fx.d);
	snprintf(file, sizeof(file), "%s/lun.img", mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("mkfs.ext4 -q /dev/zvol/tank/vol1 && "
		"mkdir -p '%s' && mount /dev/zvol/tank/vol1 '%s' && dd "
		"if=/dev/zero of='%s' bs=1M count=4 conv=fsync status=none", mnt,
		mnt, file), 0);
	under_fs = proto_add_lun(9, file, "mode=write-back", 0);
	zfs_props(props, "standard");
	under_fs_plp = proto_add_lun(9, file, "mode=plp", 0);
	proto_del_lun(9);
	proto_sh_in_tgtd("umount '%s'", mnt);
	zvol_teardown(&fx);
	ck_assert_int_ne(disabled, 0);
	ck_assert(proto_log_has("ZFS dataset tank/vol1 has sync=disabled, and "
				"mode=write-back: every flush is a no-op"));
	ck_assert_int_ne(standard_plp, 0);
	ck_assert(proto_log_has("plp sends no flush, and ZFS keeps writes"));
	ck_assert_msg(slowest < 2.5, "a FUA write took %.1f s while zfs get "
		      "did not answer", slowest);
	ck_assert_msg(latched, "FUA writes still GOOD 10 s after sync=disabled");
	ck_assert(proto_log_has("its ZFS dataset tank/vol1 now has sync=disabled"));
	ck_assert_int_ne(under_loop, 0);
	ck_assert_int_ne(under_fs, 0);
	ck_assert_int_ne(under_fs_plp, 0);
	ck_assert(proto_log_has("ZFS dataset tank/vol1 has sync=standard, and "
				"mode=plp"));
}
END_TEST

/* One pool's zfs that stops answering (tank/vol1's closes its output and
 * sleeps 30 s, killed after 5) hides no other pool's change: set once
 * one such zfs get has begun, pool2/vol2's sync=disabled latches its LUN
 * within 4 s (its own reads come every 2 s), where one reader for every
 * LUN read it 5 s later at the earliest.  And the silent dataset is
 * logged once it has not answered for 30 s. */
START_TEST(test_blockdev_zvol_silent_pool)
{
	unsigned char out[512] = { 0x7b };
	struct iscsi_context *iscsi;
	struct zvol_fx fx;
	bool latched, told;
	double t0;

	zvol_setup(&fx);
	zfs_props(fx.props[0], "standard");
	zfs_props(fx.props[1], "standard");
	ck_assert_int_eq(proto_add_lun(9, "/dev/zvol/tank/vol1",
				       "mode=write-back", 0), 0);
	ck_assert_int_eq(proto_add_lun(10, "/dev/zvol/pool2/vol2",
				       "mode=write-back", 0), 0);
	iscsi = proto_connect(10);
	proto_assert_good(iscsi_write10_sync(iscsi, 10, 0, out, 512, 512, 0, 0,
			  1, 0, 0), "FUA WRITE(10) at sync=standard", false);
	unlink(fx.pid);
	t0 = seconds();
	ck_assert_int_eq(proto_sh("touch '%s'", fx.stuck), 0);
	while (access(fx.pid, F_OK) && seconds() < t0 + 5)
		usleep(20000);		/* a silent zfs get of tank/vol1 began */
	ck_assert_msg(!access(fx.pid, F_OK), "no zfs get of tank/vol1 began "
		      "within 5 s");
	zfs_props(fx.props[1], "disabled");
	latched = fua_writes_fail(iscsi, 10, out, 40);
	while (!(told = proto_log_has("zfs get tank/vol1 has not answered for "
				       "30 s")) && seconds() < t0 + 36)
		usleep(500000);
	unlink(fx.stuck);
	iscsi_destroy_context(iscsi);
	proto_del_lun(10);
	proto_del_lun(9);
	clear_latch(fx.dev[1]);
	zvol_teardown(&fx);
	ck_assert_msg(latched, "LUN 10's FUA writes still GOOD 4 s after its "
		      "dataset's sync=disabled, while LUN 9's zfs get did not "
		      "answer");
	ck_assert_msg(told, "tgtd.log did not say that tank/vol1's zfs get "
		      "had not answered for 30 s");
}
END_TEST

/* zfs rename tank/vol1 tank/renamed under a live LUN (its /dev/zvol link
 * moves; zfs get tank/vol1 then fails): the watch finds the dataset
 * again by the zvol's device and goes on under the new name, so a
 * sync=disabled set there latches the LUN; before, every later read
 * failed, and FUA writes stayed GOOD over a dataset that dropped every
 * flush.  A dataset zfs get no longer finds and no link names (zfs
 * destroy) latches the LUN after three rounds. */
START_TEST(test_blockdev_zvol_renamed)
{
	unsigned char out[512] = { 0x7d };
	struct iscsi_context *iscsi;
	struct zvol_fx fx;
	bool renamed_good, latched, gone;

	zvol_setup(&fx);
	zfs_props(fx.props[0], "standard");
	ck_assert_int_eq(proto_add_lun(9, "/dev/zvol/tank/vol1",
				       "mode=write-back", 0), 0);
	iscsi = proto_connect(9);
	ck_assert_int_eq(proto_sh_in_tgtd("mv /dev/zvol/tank/vol1 "
					  "/dev/zvol/tank/renamed && touch "
					  "'%s/renamed'", fx.d), 0);
	renamed_good = !fua_writes_fail(iscsi, 9, out, 50);
	zfs_props(fx.props[0], "disabled");	/* zfs set sync=disabled */
	latched = fua_writes_fail(iscsi, 9, out, 100);
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	clear_latch(fx.dev[0]);
	zfs_props(fx.props[0], "standard");
	ck_assert_int_eq(proto_add_lun(9, "/dev/zvol/tank/renamed",
				       "mode=write-back", 0), 0);
	iscsi = proto_connect(9);
	/* zfs destroy: no dataset, no link */
	ck_assert_int_eq(proto_sh_in_tgtd("rm /dev/zvol/tank/renamed"), 0);
	ck_assert_int_eq(unlink(fx.props[0]), 0);
	gone = fua_writes_fail(iscsi, 9, out, 150);
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	clear_latch(fx.dev[0]);
	zvol_teardown(&fx);
	ck_assert_msg(renamed_good, "FUA writes failed after the rename alone");
	ck_assert(proto_log_has("zvol watch: dataset tank/vol1 is now "
				"tank/renamed"));
	ck_assert_msg(latched, "FUA writes still GOOD 10 s after the renamed "
		      "dataset's sync=disabled");
	ck_assert(proto_log_has("its ZFS dataset tank/renamed now has "
				"sync=disabled"));
	ck_assert_msg(gone, "FUA writes still GOOD 15 s after the dataset's "
		      "link was removed");
	ck_assert(proto_log_has("its ZFS dataset tank/renamed is gone"));
}
END_TEST

/* A zfs that SIGKILL cannot end (its read of a loop device over a FUSE
 * model whose daemon is stopped waits in the kernel) is left, and no
 * other zfs get for its pool starts while it lives: after 17 s, two
 * rounds and more, one such process, where one more was left each round
 * before (core/stack.c, zfs_left).  LUN 9 answers meanwhile.  Once the
 * daemon goes on, the process ends, is reaped (no zombie), and the
 * watch reads again: sync=disabled latches. */
START_TEST(test_blockdev_zvol_stuck_zfs)
{
	const char *top = getenv("SYNCGUARD_TOP");
	unsigned char out[512] = { 0x7c };
	char m[900], mpid[900];
	struct iscsi_context *iscsi;
	struct zvol_fx fx;
	long long stuck, zombies;
	bool latched;

	zvol_setup(&fx);
	zfs_props(fx.props[0], "standard");
	snprintf(m, sizeof(m), "%s/zm", fx.d);
	snprintf(mpid, sizeof(mpid), "%s/zm.pid", fx.d);
	ck_assert_int_eq(proto_sh("mkdir -p '%s' && truncate -s 16M '%s.img' && "
		"{ setsid '%s/tools/syncguard-devmodel' --image '%s.img' '%s' -f "
		">/dev/null 2>&1 </dev/null & echo $! >'%s'; }; for i in "
		"$(seq 100); do [ -e '%s/disk.img' ] && break; sleep 0.02; done; "
		"losetup -f --show '%s/disk.img' | tr -d '\\n' >'%s.tmp'", m, m,
		top ? top : ".", m, m, mpid, m, m, fx.dstate), 0);
	ck_assert_int_eq(proto_add_lun(9, "/dev/zvol/tank/vol1",
				       "mode=write-back", 0), 0);
	iscsi = proto_connect(9);
	ck_assert_int_eq(proto_sh("kill -STOP $(cat '%s') && cp '%s.tmp' '%s'",
				  mpid, fx.dstate, fx.dstate), 0);
	sleep(17);
	stuck = proto_sh_number("ps -eo args | grep -c '^dd if=/dev/loop.* "
				"skip=3000'");
	proto_assert_good(iscsi_write10_sync(iscsi, 9, 0, out, 512, 512, 0, 0,
			  1, 0, 0), "FUA WRITE(10) with a zfs stuck", false);
	unlink(fx.dstate);
	proto_sh("kill -CONT $(cat '%s')", mpid);
	zfs_props(fx.props[0], "disabled");
	latched = fua_writes_fail(iscsi, 9, out, 100);
	zombies = proto_sh_number("ps -eo stat,args | grep -c '^Z.*\\[dd\\]'");
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	clear_latch(fx.dev[0]);
	proto_sh("losetup -d $(cat '%s.tmp'); fusermount3 -u -z '%s'; kill "
		 "$(cat '%s') 2>/dev/null; true", fx.dstate, m, mpid);
	zvol_teardown(&fx);
	ck_assert_msg(stuck == 1, "%lld zfs gets stuck in the kernel after "
		      "17 s (one is left; no other for its pool starts)", stuck);
	ck_assert_msg(latched, "FUA writes still GOOD 10 s after sync=disabled, "
		      "once the stuck zfs had ended");
	ck_assert_msg(zombies == 0, "%lld stuck zfs gets left as zombies",
		      zombies);
}
END_TEST

/* LUN 9, write-back, on @dev, with the write cache of the device @cdev
 * (a sysfs name) "write back": a FUA write is GOOD; then set to "write
 * through", does a FUA write fail (the LUN latched) within 6 s? */
static bool write_through_latches(const char *dev, const char *cdev)
{
	unsigned char out[512] = { 0x5c };
	struct iscsi_context *iscsi;
	char wc[128];
	bool latched;

	snprintf(wc, sizeof(wc), "/sys/block/%s/queue/write_cache", cdev);
	ck_assert_int_eq(proto_sh("echo 'write back' >'%s'", wc), 0);
	ck_assert_int_eq(proto_add_lun(9, dev, "mode=write-back", 0), 0);
	iscsi = proto_connect(9);
	proto_assert_good(iscsi_write10_sync(iscsi, 9, 0, out, 512, 512, 0, 0, 1,
			  0, 0), "FUA WRITE(10)", false);
	ck_assert_int_eq(proto_sh("echo 'write through' >'%s'", wc), 0);
	latched = fua_writes_fail(iscsi, 9, out, 60);
	iscsi_destroy_context(iscsi);
	proto_del_lun(9);
	proto_sh("echo 'write back' >'%s'", wc);
	return latched;
}

/*
 * A device whose write cache is set to "write through" by hand while a
 * LUN stands on it: Linux then strips every flush and FUA it would send,
 * so the LUN's durable writes are no longer durable.  The watch latches
 * it (a loop device, write-back), as for a remount nobarrier.
 */
START_TEST(test_blockdev_write_cache_changed)
{
	const char *img = proto_file("wcache.img", DEV_BYTES, false);
	char dev[64];
	bool latched;

	ck_assert_int_eq(attach(img, 512, dev, sizeof(dev)), 0);
	latched = write_through_latches(dev, dev + 5);
	proto_sh("losetup -d '%s'", dev);
	ck_assert_msg(latched, "FUA writes still GOOD 6 s after write through");
	ck_assert(proto_log_has("was set to \"write through\": Linux now "
				"drops every flush"));
}
END_TEST

/* The same a layer down: a LUN on loop device A, whose backing file is
 * in an ext4 on loop device B.  A's flushes become fsyncs of that file,
 * which reach B; B's write cache set to "write through" latches the LUN.
 * Before, only A (and the devices sysfs lists under it: none for a
 * loop) was watched, and FUA writes stayed GOOD. */
START_TEST(test_blockdev_write_cache_under_loop)
{
	const char *img = proto_file("wcache-low.img", DEV_BYTES, false);
	char low[64], top[64], mnt[800], file[900];
	bool latched;

	snprintf(mnt, sizeof(mnt), "%s/wcache-mnt", proto_dir());
	snprintf(file, sizeof(file), "%s/lun.img", mnt);
	ck_assert_int_eq(ext4_in_tgtd(img, mnt, low, sizeof(low)), 0);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
					  "count=4 conv=fsync status=none", file),
			 0);
	ck_assert_int_eq(attach_in_tgtd(file, false, top, sizeof(top)), 0);
	latched = write_through_latches(top, low + 5);
	proto_sh_in_tgtd("losetup -d '%s'; umount '%s'; losetup -d '%s'", top,
			 mnt, low);
	ck_assert_msg(latched, "FUA writes still GOOD 6 s after write through "
		      "on the loop device under the backing file");
	snprintf(file, sizeof(file), "the write cache of %s was set to \"write "
		 "through\"", low + 5);
	ck_assert_msg(proto_log_has(file), "tgtd.log lacks: %s", file);
}
END_TEST

/* An overlay at @ov in tgtd's mount name space, its layers in @base
 * (lo, up, wk), with more mount options @opts ("" or ",volatile"). */
static int overlay_in_tgtd(const char *base, const char *opts, const char *ov)
{
	return proto_sh_in_tgtd("mkdir -p '%s/lo' '%s/up' '%s/wk' '%s' && "
		"mount -t overlay -o lowerdir='%s/lo',upperdir='%s/up',"
		"workdir='%s/wk'%s overlay '%s'", base, base, base, ov, base,
		base, base, opts, ov);
}

/* A plp file on an overlay whose upper layer is an ext4 on a loop
 * device with direct I/O off: refused (the overlay's own device is no
 * loop, so a check of it alone takes the file, and then FUA writes
 * leave their data dirty in the page cache), taken once that loop's
 * direct I/O is on. */
START_TEST(test_blockdev_plp_overlay_over_buffered_loop)
{
	const char *img = proto_file("ovl.img", DEV_BYTES, false);
	char mnt[800], ov[800], low[64], file[900];
	bool refused, taken;

	snprintf(mnt, sizeof(mnt), "%s/ovl-mnt", proto_dir());
	snprintf(ov, sizeof(ov), "%s/ovl", proto_dir());
	ck_assert_int_eq(ext4_in_tgtd(img, mnt, low, sizeof(low)), 0);
	ck_assert_int_eq(overlay_in_tgtd(mnt, "", ov), 0);
	snprintf(file, sizeof(file), "%s/lun.img", ov);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 conv=fsync status=none", file), 0);
	plp_until_dio_on(file, low, "has direct I/O off", &refused, &taken);
	proto_sh_in_tgtd("umount '%s'; umount '%s'; losetup -d '%s'", ov, mnt,
			 low);
	ck_assert(refused);
	ck_assert(taken);
}
END_TEST

/* A file on an overlay and the same file in the overlay's upper layer
 * are one store: while a LUN stands on either name, one on the other is
 * refused (taken, two LUNs would keep two caches for the same blocks);
 * once it is deleted, the other name is taken.  Both names have one
 * store identity, so a latch recorded under one is found under the
 * other (syncguard-stat --clear-latch names the store it looked for). */
START_TEST(test_blockdev_overlay_and_upper_one_store)
{
	const char *why = "(under its name in the overlay's upper layer)";
	char base[800], ov[800], file[900], up[900];
	int first, second, third, fourth, same, before = proto_log_count(why);

	snprintf(base, sizeof(base), "%s/one", proto_dir());
	snprintf(ov, sizeof(ov), "%s/one-ov", proto_dir());
	snprintf(file, sizeof(file), "%s/lun.img", ov);
	snprintf(up, sizeof(up), "%s/up/lun.img", base);
	ck_assert_int_eq(overlay_in_tgtd(base, "", ov), 0);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 conv=fsync status=none", file), 0);
	first = proto_add_lun(9, file, "mode=write-back", 0);
	second = proto_add_lun(10, up, "mode=write-back", 0);
	proto_del_lun(10);
	proto_del_lun(9);
	third = proto_add_lun(10, up, "mode=write-back", 0);
	fourth = proto_add_lun(9, file, "mode=write-back", 0);
	proto_del_lun(9);
	proto_del_lun(10);
	same = proto_sh_in_tgtd("sid() { '%s/tools/syncguard-stat' --clear-latch "
		"\"$1\" --state-dir '%s' 2>&1 | sed -n 's/.*(store \\(.*\\))$/"
		"\\1/p'; }; a=$(sid '%s'); b=$(sid '%s'); echo \"$a\"; "
		"[ -n \"$a\" ] && [ \"$a\" = \"$b\" ]",
		getenv("SYNCGUARD_TOP") ? getenv("SYNCGUARD_TOP") : ".",
		proto_state_dir(), file, up);
	proto_sh_in_tgtd("umount '%s'", ov);
	ck_assert_int_eq(same, 0);
	ck_assert_int_eq(first, 0);
	ck_assert_int_ne(second, 0);
	ck_assert_int_eq(third, 0);
	ck_assert_int_ne(fourth, 0);
	ck_assert_int_eq(proto_log_count(why), before + 1);
}
END_TEST

/* An overlay mounted volatile ignores fsync and drops O_DSYNC:
 * refused in every mode (write-back and write-through too: there,
 * WRITEs and SYNCHRONIZE CACHEs answered GOOD would leave all their
 * data dirty); the same overlay without volatile is taken. */
START_TEST(test_blockdev_volatile_overlay_refused)
{
	static const char *const modes[] = { "mode=write-back",
		"mode=write-through", "mode=plp" };
	const char *why = "on an overlay mounted volatile";
	int before = proto_log_count(why), refused[2] = { 0, 0 };

	for (int v = 0; v < 2; v++) {	/* volatile, then not */
		char base[800], ov[800], file[900];

		snprintf(base, sizeof(base), "%s/vol%d", proto_dir(), v);
		snprintf(ov, sizeof(ov), "%s/vol%d-ov", proto_dir(), v);
		ck_assert_int_eq(overlay_in_tgtd(base, v ? "" : ",volatile",
						 ov), 0);
		snprintf(file, sizeof(file), "%s/lun.img", ov);
		ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' "
			"bs=1M count=4 conv=fsync status=none", file), 0);
		for (int i = 0; i < 3; i++) {
			refused[v] += proto_add_lun(9, file, modes[i], 0) != 0;
			proto_del_lun(9);
		}
		proto_sh_in_tgtd("umount '%s'", ov);
	}
	ck_assert_int_eq(refused[0], 3);
	ck_assert_int_eq(proto_log_count(why), before + 3);
	ck_assert_int_eq(refused[1], 0);
}
END_TEST

/* A remount nobarrier of the file system under an overlay that holds a
 * loop's backing file, under the LUN's own file system (ext4 on loop A
 * over a file on an overlay whose upper layer is an ext4 on loop B):
 * the watch latches the write-back LUN (a watch that looks through an
 * overlay only for the LUN's own file misses it, and FUA writes go on
 * GOOD; the creation check refuses the same stack). */
START_TEST(test_blockdev_remount_under_overlay_in_stack)
{
	const char *img = proto_file("ostack.img", DEV_BYTES, false);
	char mnt[800], ov[800], top_mnt[800], low[64], top[64];
	char file[900], lun_img[900];
	unsigned char out[512] = { 0x42 };
	struct iscsi_context *iscsi;

	snprintf(mnt, sizeof(mnt), "%s/ostack-mnt", proto_dir());
	snprintf(ov, sizeof(ov), "%s/ostack-ov", proto_dir());
	snprintf(top_mnt, sizeof(top_mnt), "%s/ostack-top", proto_dir());
	ck_assert_int_eq(ext4_in_tgtd(img, mnt, low, sizeof(low)), 0);
	ck_assert_int_eq(overlay_in_tgtd(mnt, "", ov), 0);
	snprintf(file, sizeof(file), "%s/top.img", ov);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=16 status=none", file), 0);
	ck_assert_int_eq(ext4_in_tgtd(file, top_mnt, top, sizeof(top)), 0);
	snprintf(lun_img, sizeof(lun_img), "%s/lun.img", top_mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 status=none", lun_img), 0);
	ck_assert_int_eq(proto_add_lun(REMOUNT_LUN, lun_img, "mode=write-back",
				       0), 0);
	iscsi = proto_connect(REMOUNT_LUN);
	proto_assert_good(iscsi_write16_sync(iscsi, REMOUNT_LUN, 1, out, 512,
		512, 0, 0, 1, 0, 0), "WRITE(16) FUA before", false);
	ck_assert_int_eq(proto_sh_in_tgtd("mount -o remount,nobarrier '%s'",
					  mnt), 0);
	remount_wait_latched_within(iscsi, 4);
	iscsi_destroy_context(iscsi);
	proto_del_lun(REMOUNT_LUN);
	proto_sh_in_tgtd("umount '%s'; losetup -d '%s'; umount '%s'; "
		"umount '%s'; losetup -d '%s'", top_mnt, top, ov, mnt, low);
	ck_assert(proto_log_has("its file system was remounted nobarrier"));
}
END_TEST

/* A loop device whose backing file was deleted: what is under it cannot
 * be checked, so it is refused in every mode (else a plp LUN on one
 * over a file on a loop with direct I/O off would be taken, and its
 * writes left dirty). */
START_TEST(test_blockdev_loop_over_deleted_file_refused)
{
	const char *file = proto_file("deleted.img", 4u << 20, false);
	const char *why = "cannot be opened (No such file or directory: "
			  "deleted";
	int before = proto_log_count(why), wb, plp;
	char dev[64];

	ck_assert_int_eq(attach_as(file, 512, true, dev, sizeof(dev)), 0);
	ck_assert_int_eq(unlink(file), 0);
	wb = proto_add_lun(9, dev, "mode=write-back", 0);
	plp = proto_add_lun(9, dev, "mode=plp", 0);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'", dev);
	ck_assert_int_ne(wb, 0);
	ck_assert_int_ne(plp, 0);
	ck_assert_int_eq(proto_log_count(why), before + 2);
}
END_TEST

/* A loop device over a block device (another loop here): its backing
 * is a device node on devtmpfs, which is not taken for a RAM file
 * system: the LUN is taken, and for plp the loop under it must have
 * direct I/O on too. */
START_TEST(test_blockdev_loop_over_block_device)
{
	const char *file = proto_file("over-dev.img", 8u << 20, false);
	char low[64], top[64];
	int wb, plp_refused, plp;

	ck_assert_int_eq(attach_as(file, 512, false, low, sizeof(low)), 0);
	ck_assert_int_eq(attach_as(low, 512, true, top, sizeof(top)), 0);
	wb = proto_add_lun(9, top, "mode=write-back", 0);
	proto_del_lun(9);
	plp_refused = proto_add_lun(9, top, "mode=plp", 0) != 0 &&
		      proto_log_has("has direct I/O off");
	proto_sh("losetup --direct-io=on '%s'", low);
	plp = proto_add_lun(9, top, "mode=plp", 0);
	proto_del_lun(9);
	proto_sh("losetup -d '%s'; losetup -d '%s'", top, low);
	ck_assert_int_eq(wb, 0);
	ck_assert(plp_refused);
	ck_assert_int_eq(plp, 0);
}
END_TEST

/* plp on a file whose data ext4 journals (mounted data=journal, the
 * loop under it with direct I/O on): refused for the file, for a loop
 * device over it with direct I/O on (its O_DIRECT writes are buffered
 * all the same: 48 MiB dirty after 48 such writes of 1 MiB, measured
 * here), and for a file flagged chattr +j on an ordered ext4; the file
 * is taken by write-back (a flush commits the journal). */
START_TEST(test_blockdev_plp_journalled_data_refused)
{
	const char *img = proto_file("journal.img", DEV_BYTES, false);
	const char *why = "goes through the ext4 journal";
	char mnt[800], low[64], top[64], file[900], flagged[900];
	int before = proto_log_count(why), file_refused, loop_refused;
	bool flagged_ok, flag_refused, wb, default_refused;

	snprintf(mnt, sizeof(mnt), "%s/journal-mnt", proto_dir());
	ck_assert_int_eq(ext4_in_tgtd_as(img, mnt, "data=journal", low,
					 sizeof(low)), 0);
	proto_sh("losetup --direct-io=on '%s'", low);
	snprintf(file, sizeof(file), "%s/lun.img", mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 conv=fsync status=none", file), 0);
	ck_assert_int_eq(attach_in_tgtd(file, true, top, sizeof(top)), 0);
	file_refused = proto_add_lun(9, file, "mode=plp", 0) != 0;
	loop_refused = proto_add_lun(9, top, "mode=plp", 0) != 0;
	proto_sh_in_tgtd("losetup -d '%s'", top);
	wb = proto_add_lun(9, file, "mode=write-back", 0) == 0;
	proto_del_lun(9);
	/* the same file system remounted in ordered mode, the file flagged */
	proto_sh_in_tgtd("umount '%s' && mount -o nodelalloc '%s' '%s'", mnt,
			 low, mnt);
	snprintf(flagged, sizeof(flagged), "%s/flagged.img", mnt);
	ck_assert_int_eq(proto_sh_in_tgtd("dd if=/dev/zero of='%s' bs=1M "
		"count=4 conv=fsync status=none", flagged), 0);
	/* chattr +j takes CAP_SYS_RESOURCE, which a sandbox may withhold */
	flagged_ok = proto_sh_in_tgtd("chattr +j '%s' 2>/dev/null",
				      flagged) == 0;
	flag_refused = flagged_ok &&
		       proto_add_lun(9, flagged, "mode=plp", 0) != 0;
	proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", mnt, low);
	/* data=journal as the superblock's default (tune2fs -o
	 * journal_data), which mountinfo does not show */
	ck_assert_int_eq(attach_in_tgtd(img, true, low, sizeof(low)), 0);
	ck_assert_int_eq(proto_sh_in_tgtd("tune2fs -o journal_data '%s' "
		">/dev/null && mount '%s' '%s'", low, low, mnt), 0);
	default_refused = proto_add_lun(9, file, "mode=plp", 0) != 0;
	proto_sh_in_tgtd("umount '%s'; losetup -d '%s'", mnt, low);
	ck_assert(file_refused);
	ck_assert(loop_refused);
	ck_assert(wb);
	ck_assert(default_refused);
	if (!flagged_ok) {
		test_left_out("test_blockdev_plp_journalled_data_refused "
			      "(its chattr +j part)", false,
			      "no CAP_SYS_RESOURCE");
		ck_assert_int_eq(proto_log_count(why), before + 3);
		return;
	}
	ck_assert(flag_refused);
	ck_assert_int_eq(proto_log_count(why), before + 4);
}
END_TEST

/* A LUN that needs the mount watch (write-back on a file) is refused
 * when the watch cannot start, here because tgtd may create no thread
 * beyond the LUN's 4 workers (workers=4), which start before the
 * LUN opens (rather than exported unwatched); a plp LUN, which needs no
 * watch on a file system that is not on device-mapper, md or bcache (as
 * the test directory's here), is taken; one with more workers than tgtd
 * may start is refused with a line saying so; and the write-back one
 * once the watch can run. */
START_TEST(test_blockdev_unwatched_lun_refused)
{
	const char *file = proto_file("unwatched.img", 4u << 20, false);
	const char *base = pids_base();
	int capped, refused, plp, taken, too_many;

	ck_assert_ptr_nonnull(base);
	capped = proto_sh("G=%s/syncguard-proto-%d; mkdir -p $G && "
		"echo $(cat '%s/tgtd/pid') >$G/cgroup.procs && "
		"echo $(($(cat $G/pids.current) + 4)) >$G/pids.max", base,
		(int)getppid(), proto_dir());
	if (capped) {		/* e.g. a cgroup v2 that will not move it */
		proto_sh("echo $(cat '%s/tgtd/pid') >%s/cgroup.procs",
			 proto_dir(), base);
		test_left_out("test_blockdev_unwatched_lun_refused", false,
			      "cannot cap tgtd's threads in %s", base);
		return;
	}
	refused = proto_add_lun(9, file, "mode=write-back;workers=4", 0) != 0;
	plp = proto_add_lun(10, file, "mode=plp;workers=4", 0) == 0;
	if (plp)
		proto_del_lun(10);
	too_many = proto_add_lun(10, file, "mode=plp;workers=8", 0) != 0;
	proto_sh("echo $(cat '%s/tgtd/pid') >%s/cgroup.procs", proto_dir(),
		 base);
	taken = proto_add_lun(9, file, "mode=write-back", 0) == 0;
	if (taken)
		proto_del_lun(9);
	ck_assert(refused);
	ck_assert(plp);
	ck_assert(too_many);
	ck_assert(proto_log_has("lun 10: cannot start 8 worker threads: "
				"refused"));
	ck_assert(proto_log_has("cannot watch /proc/self/mountinfo"));
	ck_assert(proto_log_has("unwatched.img: the mount table cannot be "
				"watched, so a remount nobarrier or a change of "
				"what lies beneath it would go unnoticed: not "
				"exported"));
	ck_assert(taken);
}
END_TEST

/* Can this machine attach a loop device with 4096-byte sectors? */
static bool loop_available(void)
{
	const char *probe = "build/.loop-probe";
	char dev[64];
	bool ok;

	if (proto_sh("truncate -s 1M %s", probe))
		return false;
	ok = attach(probe, 4096, dev, sizeof(dev)) == 0;
	if (ok)
		proto_sh("losetup -d '%s'", dev);
	unlink(probe);
	return ok;
}

Suite *blockdev_suite(void)
{
	Suite *s = suite_create("blockdev");
	TCase *tc = tcase_create("loop");

	if (!loop_available()) {
		test_left_out("tests/proto/check_blockdev.c:loop", false,
			      "cannot attach a loop device with 4096-byte "
			      "sectors (needs root and /dev/loop-control)");
		return s;
	}
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_checked_fixture(tc, left_luns_deleted, NULL);
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_blockdev_capacity, 0, NDEVS);
	tcase_add_loop_test(tc, test_blockdev_round_trip, 0, NDEVS);
	tcase_add_loop_test(tc, test_blockdev_short_data_in, 0, NDEVS);
	tcase_add_loop_test(tc, test_blockdev_pre_fetch, 0, NDEVS);
	tcase_add_test(tc, test_blockdev_direct_needs_alignment);
	tcase_add_test(tc, test_blockdev_unmap_within_sectors);
	tcase_add_test(tc, test_blockdev_plp_loop_refuses_thin);
	tcase_add_test(tc, test_blockdev_held_device_refused);
	tcase_add_test(tc, test_blockdev_device_cache_logged);
	tcase_add_test(tc, test_blockdev_loop_holes_warned);
	tcase_add_test(tc, test_blockdev_plp_loop_needs_direct_io);
	tcase_add_test(tc, test_blockdev_plp_file_over_buffered_loop);
	tcase_add_test(tc, test_blockdev_plp_stacked_loops_need_direct_io);
	tcase_add_test(tc, test_blockdev_plp_journalled_data_refused);
	tcase_add_test(tc, test_blockdev_fscrypt);
	tcase_add_test(tc, test_blockdev_zvol);
	tcase_add_test(tc, test_blockdev_zvol_renamed);
	tcase_add_test(tc, test_blockdev_zvol_silent_pool);
	tcase_add_test(tc, test_blockdev_zvol_stuck_zfs);
	tcase_add_test(tc, test_blockdev_write_cache_changed);
	tcase_add_test(tc, test_blockdev_write_cache_under_loop);
	tcase_add_test(tc, test_blockdev_plp_overlay_over_buffered_loop);
	tcase_add_test(tc, test_blockdev_loop_over_deleted_file_refused);
	tcase_add_test(tc, test_blockdev_volatile_overlay_refused);
	tcase_add_test(tc, test_blockdev_overlay_and_upper_one_store);
	tcase_add_test(tc, test_blockdev_remount_under_overlay_in_stack);
	tcase_add_test(tc, test_blockdev_loop_over_block_device);
	tcase_add_test(tc, test_blockdev_loop_and_its_file);
	tcase_add_test(tc, test_blockdev_loop_file_through_bind_alias);
	tcase_add_test(tc, test_blockdev_loop_partitions);
	if (shm_is_tmpfs())
		tcase_add_test(tc, test_blockdev_loop_on_tmpfs);
	else
		fprintf(stderr, "blockdev: test_blockdev_loop_on_tmpfs left "
			"out: /dev/shm is no tmpfs\n");
	tcase_add_loop_test(tc, test_blockdev_remount_nobarrier_latches, 0, 2);
	tcase_add_test(tc, test_blockdev_remount_beside_closing_connection);
	tcase_add_test(tc, test_blockdev_remount_out_of_descriptors);
	tcase_add_test(tc, test_blockdev_remount_elsewhere_latches);
	if (zram_unused()) {
		tcase_add_test(tc, test_blockdev_ram_device_refused);
		tcase_add_loop_test(tc,
			test_blockdev_ram_device_under_btrfs_and_overlay, 0, 2);
	} else {
		test_left_out("test_blockdev_ram_device_refused", false,
			      "no unused zram0");
		test_left_out("test_blockdev_ram_device_under_btrfs_and_overlay",
			      false, "no unused zram0");
	}
	tcase_add_test(tc, test_blockdev_write_back_page_cache);
	tcase_add_loop_test(tc, test_blockdev_read_after_write, 0, 4);
	tcase_add_loop_test(tc, test_blockdev_full_fs_recovers, 0, 3);
	suite_add_tcase(s, tc);
	if (!pids_base()) {
		test_left_out("tests/proto/check_blockdev.c:watch", false,
			      "no pids cgroup controller to cap tgtd's "
			      "threads");
		return s;
	}
	tc = tcase_create("watch");
	tcase_add_unchecked_fixture(tc, watch_setup, watch_teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_blockdev_unwatched_lun_refused);
	suite_add_tcase(s, tc);
	return s;
}
