/*
 * What lies beneath a LUN (core/stack.c), on a sysfs tree, a /dev/zvol
 * tree and device-mapper tables the tests make: this machine has no
 * device-mapper, no bcache and no ZFS, so these stand in for them, built
 * as Linux lays them out (/sys/dev/block/M:m, dm/, slaves/,
 * bcache/cache_mode; /dev/zvol/POOL/VOLUME links).  The protocol test
 * test_blockdev_zvol runs a LUN on a loop device under a /dev/zvol name
 * with a stand-in zfs command.  tests/guest.sh's stack-dm check walks
 * real device-mapper devices in a QEMU guest, whose kernel has it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/dm-ioctl.h>

#include "core.h"
#include "internal.h"
#include "unit.h"

static char dir[] = "build/stack.XXXXXX";
static char root[256];

static void setup(void)
{
	strcpy(dir, "build/stack.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_ptr_nonnull(realpath(dir, root));
}

static void teardown(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

static void sh(const char *fmt, const char *a, const char *b)
{
	char cmd[4096];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
}

/* the device-mapper tables of the made-up devices: 253:0 a linear
 * target over 253:1, which is thin; 253:2 linear only; 253:3 cache;
 * 253:4-6 linear (over a loop device, a zvol, a zram device); 253:7's
 * cannot be read; 253:8 integrity; 253:9 linear and zero; 253:10 flakey
 * dropping writes; 253:11 a transient snapshot; 253:12's is longer than
 * the reader takes */
static int fake_dm_targets(dev_t dev, char *types, size_t len)
{
	static const char *const t[] = { "linear", "thin", "linear", "cache",
					 "linear", "linear", "linear", NULL,
					 "integrity", "linear zero",
					 "flakey:drop_writes",
					 "snapshot:transient" };

	if (major(dev) != 253 || minor(dev) > 12)
		return -ENXIO;
	if (minor(dev) == 12)
		return -ENOBUFS;
	if (!t[minor(dev)])
		return -EACCES;
	snprintf(types, len, "%s", t[minor(dev)]);
	return 0;
}

/* sysfs: devices/NAME/ with its dev file, dm/ for device-mapper
 * devices and slaves/ naming the devices under one (each with its dev
 * file); /dev/block/M:m links to devices/NAME, so a device's name is
 * its link's target, as in sysfs.  9:0 is an md array over loop1, and
 * 259:0 its partition md0p1 (devices/md0/md0p1, with no slaves/). */
static void make_sysfs(void)
{
	sh("cd '%s' && mkdir -p sys/dev/block sys/devices && cd sys && "
	   "for d in 253:0=dm-0 253:1=dm-1 253:2=dm-2 253:3=dm-3 253:4=dm-4 "
	   "253:5=dm-5 253:6=dm-6 253:7=dm-7 253:8=dm-8 253:9=dm-9 "
	   "253:10=dm-10 253:11=dm-11 253:12=dm-12 8:0=sda 252:0=bcache0 "
	   "250:0=nullb0 "
	   "7:0=loop0 7:1=loop1 230:0=zd0 251:0=zram0 9:0=md0; do "
	   "n=${d#*=}; d=${d%%=*}; mkdir devices/$n; echo $d >devices/$n/dev; "
	   "ln -s ../../devices/$n dev/block/$d; done && "
	   "for d in 0 1 2 3 4 5 6 7 8 9 10 11 12; do mkdir devices/dm-$d/dm; "
	   "done && "
	   "mkdir -p devices/bcache0/bcache && "
	   "for s in dm-0:dm-1:253:1 dm-2:sda:8:0 bcache0:sda:8:0 "
	   "dm-4:loop0:7:0 dm-5:zd0:230:0 dm-6:zram0:251:0 md0:loop1:7:1 "
	   "dm-7:sda:8:0 dm-8:sda:8:0 dm-9:sda:8:0 dm-10:sda:8:0 "
	   "dm-11:sda:8:0 dm-12:sda:8:0; do "
	   "up=${s%%%%:*}; r=${s#*:}; lo=${r%%%%:*}; "
	   "mkdir -p devices/$up/slaves/$lo && "
	   "echo ${r#*:} >devices/$up/slaves/$lo/dev; done && "
	   "mkdir devices/md0/md0p1 && echo 259:0 >devices/md0/md0p1/dev && "
	   "echo 1 >devices/md0/md0p1/partition && "
	   "ln -s ../../devices/md0/md0p1 dev/block/259:0%s", root, "");
}

/* plp's check: a thin volume under a linear one, a cache target,
 * dm-integrity, a device-mapper device whose table cannot be read and
 * bcache in write-back are found; linear over a disk and bcache in
 * write-through are not; none of them in the other modes */
START_TEST(test_stack_ram_metadata_layers)
{
	char sys[300], what[384];
	struct syncguard_layers l = { sys, fake_dm_targets };

	make_sysfs();
	snprintf(sys, sizeof(sys), "%s/sys", root);
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(253, 0), true,
						 what, sizeof(what)),
			 SYNCGUARD_LAYER_RAM);
	ck_assert_ptr_nonnull(strstr(what, "device-mapper thin (dm 253:1)"));
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(253, 3), true,
						 what, sizeof(what)),
			 SYNCGUARD_LAYER_RAM);
	ck_assert_ptr_nonnull(strstr(what, "device-mapper cache"));
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(253, 8), true,
						 what, sizeof(what)),
			 SYNCGUARD_LAYER_RAM);
	ck_assert_ptr_nonnull(strstr(what, "device-mapper integrity"));
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(253, 7), true,
						 what, sizeof(what)),
			 SYNCGUARD_LAYER_RAM);
	ck_assert_ptr_nonnull(strstr(what, "whose table cannot be read "
				     "(Permission denied)"));
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(253, 2), true,
						 what, sizeof(what)), 0);
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(8, 0), true,
						 what, sizeof(what)), 0);
	for (int m = 0; m <= 8; m++)
		if (m < 4 || m > 6)
			ck_assert_int_eq(syncguard_layer_refused(&l,
					 makedev(253, m), false, what,
					 sizeof(what)), 0);
	sh("echo 'writethrough [writeback] writearound none' "
	   ">'%s/sys/dev/block/252:0/bcache/cache_mode'%s", root, "");
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(252, 0), true,
						 what, sizeof(what)),
			 SYNCGUARD_LAYER_RAM);
	ck_assert_ptr_nonnull(strstr(what, "bcache in write-back"));
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(252, 0), false,
						 what, sizeof(what)), 0);
	sh("echo '[writethrough] writeback writearound none' "
	   ">'%s/sys/dev/block/252:0/bcache/cache_mode'%s", root, "");
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(252, 0), true,
						 what, sizeof(what)), 0);
	ck_assert(!syncguard_policy_ram_metadata_ok(SYNCGUARD_MODE_PLP));
	ck_assert(syncguard_policy_ram_metadata_ok(SYNCGUARD_MODE_WRITE_BACK));
}
END_TEST

/* In every mode: a loop device or a zvol under device-mapper or md,
 * whose backing file or dataset no check follows through that layer; a
 * RAM block device, under a layer or not, where nothing survives a
 * power cut (null_blk too); device-mapper zero, flakey dropping writes, a
 * transient snapshot, and a table too long to read.  Right under the LUN (depth 0) loop devices and zvols are
 * core/loopdev.c's and the zvol check's. */
START_TEST(test_stack_layers_unsafe_in_every_mode)
{
	char sys[300], what[384];
	struct syncguard_layers l = { sys, fake_dm_targets };
	const struct {
		unsigned int ma, mi;
		const char *says;
	} unsafe[] = {
		{ 253, 4, "the loop device loop0 under dm-4" },
		{ 253, 5, "the ZFS zvol zd0 under dm-5" },
		{ 253, 6, "a RAM block device (zram0 under dm-6)" },
		{ 9, 0, "the loop device loop1 under md0" },
		{ 259, 0, "the loop device loop1 under md0" },	/* md0p1 */
		{ 251, 0, "a RAM block device (zram0)" },
		{ 253, 9, "device-mapper zero (dm 253:9), which throws every "
			  "write away" },
		{ 253, 10, "device-mapper flakey with drop_writes (dm 253:10)" },
		{ 253, 11, "device-mapper snapshot, transient (dm 253:11)" },
		{ 253, 12, "device-mapper dm-12 (dm 253:12), whose table cannot "
			   "be read whole (No buffer space available)" },
		{ 250, 0, "a RAM block device (nullb0)" },
	};

	make_sysfs();
	snprintf(sys, sizeof(sys), "%s/sys", root);
	for (size_t i = 0; i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
		for (int plp = 0; plp < 2; plp++) {
			ck_assert_int_eq(syncguard_layer_refused(&l,
				makedev(unsafe[i].ma, unsafe[i].mi), plp, what,
				sizeof(what)), SYNCGUARD_LAYER_UNSAFE);
			ck_assert_msg(strstr(what, unsafe[i].says), "%s", what);
		}
	/* right under the LUN: not this check's */
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(7, 0), false, what,
						 sizeof(what)), 0);
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(230, 0), false,
						 what, sizeof(what)), 0);
}
END_TEST

/* A live LUN's layers reloaded under it (the watch,
 * syncguard_lun_layers_lost): on dm-2, linear over sda at open.  A table
 * that cannot be read put under it is refused at open for plp, but is no
 * loss for a live LUN; a thin volume under it is lost for plp and not
 * for write-back; dm-zero under it, for write-back, but not a table too
 * long to read; a zram device under it, in every mode.  The LUN stands
 * on sda too, listed first. */
START_TEST(test_stack_layers_changed_live)
{
	char sys[300], why[512], what[384], dm2[400];
	struct syncguard_layers l = { sys, fake_dm_targets };
	struct syncguard_lun *lun = calloc(1, sizeof(*lun));

	ck_assert_ptr_nonnull(lun);
	make_sysfs();
	snprintf(sys, sizeof(sys), "%s/sys", root);
	snprintf(dm2, sizeof(dm2), "%s/devices/dm-2/slaves", sys);
	lun->layer_dev[lun->n_layer_dev++] = makedev(8, 0);
	lun->layer_dev[lun->n_layer_dev++] = makedev(253, 2);
	lun->opts.mode = SYNCGUARD_MODE_PLP;
	ck_assert(!syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));

	sh("mkdir '%s/dm-7' && echo 253:7 >'%s/dm-7/dev'", dm2, dm2);
	ck_assert_int_eq(syncguard_layer_refused(&l, makedev(253, 2), true,
						 what, sizeof(what)),
			 SYNCGUARD_LAYER_RAM);
	ck_assert(!syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));
	sh("rm -r '%s/dm-7'%s", dm2, "");

	sh("mkdir '%s/dm-1' && echo 253:1 >'%s/dm-1/dev'", dm2, dm2);
	ck_assert(syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));
	ck_assert_msg(strstr(why, "it now stands on device-mapper thin "
			     "(dm 253:1)") && strstr(why, "plp sends no flush"),
		      "%s", why);
	lun->opts.mode = SYNCGUARD_MODE_WRITE_BACK;
	ck_assert(!syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));

	sh("rm -r '%s/dm-1'%s", dm2, "");
	sh("mkdir '%s/dm-9' && echo 253:9 >'%s/dm-9/dev'", dm2, dm2);
	ck_assert(syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));
	ck_assert_msg(strstr(why, "it now stands on device-mapper zero (dm "
			     "253:9)"), "%s", why);
	sh("rm -r '%s/dm-9'%s", dm2, "");
	sh("mkdir '%s/dm-12' && echo 253:12 >'%s/dm-12/dev'", dm2, dm2);
	ck_assert(!syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));
	sh("rm -r '%s/dm-12'%s", dm2, "");
	sh("mkdir '%s/zram0' && echo 251:0 >'%s/zram0/dev'", dm2, dm2);
	for (int m = 0; m < 2; m++) {
		lun->opts.mode = m ? SYNCGUARD_MODE_PLP :
				 SYNCGUARD_MODE_WRITE_BACK;
		ck_assert(syncguard_lun_layers_lost(lun, &l, why, sizeof(why)));
		ck_assert_msg(strstr(why, "a RAM block device (zram0 under "
				     "dm-2)") && !strstr(why, "plp sends"),
			      "%s", why);
	}
	free(lun);
}
END_TEST

/* A DM_TABLE_STATUS answer, built as the kernel lays it out: each
 * target's spec and NUL-ended table line, 8-byte aligned, its next the
 * offset of the one after from data_start. */
struct dm_answer {
	union {
		struct dm_ioctl io;
		char buf[65536];
	} u;
	size_t at;	/* where the next spec goes, from data_start */
};

static void answer_add(struct dm_answer *a, const char *type,
		       const char *params)
{
	struct dm_target_spec *t = (void *)(a->u.buf + a->u.io.data_start +
					    a->at);
	size_t l = strlen(params) + 1;

	ck_assert_uint_lt(a->u.io.data_start + a->at + sizeof(*t) + l + 8,
			  sizeof(a->u));
	snprintf(t->target_type, sizeof(t->target_type), "%s", type);
	memcpy(t + 1, params, l);
	a->u.io.data_size = (uint32_t)(a->u.io.data_start + a->at +
				       sizeof(*t) + l);
	a->at = (a->at + sizeof(*t) + l + 7) & ~(size_t)7;
	t->next = (uint32_t)a->at;
	a->u.io.target_count++;
}

static const char *kinds_of(struct dm_answer *a, const char *type,
			    const char *params)
{
	static char kinds[256];

	memset(&a->u.io, 0, sizeof(a->u.io));
	a->u.io.data_start = sizeof(a->u.io);
	a->at = 0;
	answer_add(a, type, params);
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, sizeof(kinds)), 0);
	return kinds;
}

/* Reading a device-mapper table (syncguard_dm_table_kinds): a table of
 * 400 linear segments and then a thin one, longer than the 256 bytes of
 * the kinds' list, gives each kind once, so the thin one is seen; flakey
 * and a snapshot by how their table lines make them lose writes; an
 * answer the kernel could not fit, a list with no room, an answer whose
 * specs run past it, past its buffer or back, and a target with no type
 * are errors, never a shorter list. */
START_TEST(test_stack_dm_table_kinds)
{
	struct dm_answer *a = calloc(1, sizeof(*a));
	char kinds[256], p[64];
	static const struct {
		const char *type, *params, *kind;
	} line[] = {
		{ "flakey", "8:0 0 0 3600 1 drop_writes", "flakey:drop_writes" },
		{ "flakey", "8:0 0 0 3600 1 error_writes", "flakey" },
		{ "flakey", "8:0 0 5 5 5 corrupt_bio_byte 32 w 1 0",
		  "flakey:corrupt_writes" },
		{ "flakey", "8:0 0 5 5 5 corrupt_bio_byte 32 r 1 0", "flakey" },
		{ "flakey", "8:0 0 5 5 2 random_write_corrupt 500000000",
		  "flakey:corrupt_writes" },
		{ "snapshot", "253:1 253:2 N 16", "snapshot:transient" },
		{ "snapshot", "253:1 253:2 P 16", "snapshot" },
		{ "snapshot", "253:1 253:2 PO 16", "snapshot" },
		{ "linear", "8:0 2048", "linear" },
	};

	ck_assert_ptr_nonnull(a);
	for (size_t i = 0; i < sizeof(line) / sizeof(line[0]); i++)
		ck_assert_str_eq(kinds_of(a, line[i].type, line[i].params),
				 line[i].kind);

	kinds_of(a, "linear", "8:0 0");
	for (int i = 1; i < 400; i++) {
		snprintf(p, sizeof(p), "8:0 %d", 8 * i);
		answer_add(a, "linear", p);
	}
	answer_add(a, "thin", "253:3 1");
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, sizeof(kinds)), 0);
	ck_assert_str_eq(kinds, "linear thin");
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, 8), -ENOSPC);
	/* an answer said longer than the buffer it is in */
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, 4096, kinds,
						  sizeof(kinds)), -EIO);

	a->u.io.flags |= DM_BUFFER_FULL_FLAG;
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, sizeof(kinds)), -ENOBUFS);
	a->u.io.flags &= ~DM_BUFFER_FULL_FLAG;
	a->u.io.target_count++;		/* one more than the answer holds */
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, sizeof(kinds)), -EIO);
	kinds_of(a, "linear", "8:0 0");
	answer_add(a, "zero", "");
	((struct dm_target_spec *)(a->u.buf + a->u.io.data_start))->next = 0;
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, sizeof(kinds)), -EIO);
	kinds_of(a, "linear", "8:0 0");
	answer_add(a, "", "");		/* a target with no type */
	ck_assert_int_eq(syncguard_dm_table_kinds(&a->u.io, sizeof(a->u),
						  kinds, sizeof(kinds)), -EIO);
	free(a);
}
END_TEST

/* A zvol by its /dev/zvol path, or as a device some link there names;
 * a device no link names is no zvol */
START_TEST(test_stack_zvol_dataset)
{
	char zroot[300], ds[256], link[400];

	snprintf(zroot, sizeof(zroot), "%s/zvol", root);
	sh("mkdir -p '%s/tank/sub' && mknod '%s/tank/sub/vol1' b 230 16",
	   zroot, zroot);
	sh("mknod '%s/tank/sub/vol1-part1' b 230 17 && mknod '%s/zd16' b 230 16",
	   zroot, root);
	ck_assert_int_eq(syncguard_zvol_dataset(zroot, "/x/zvol/tank/v",
						makedev(230, 16), ds,
						sizeof(ds)), 1);
	ck_assert_int_eq(syncguard_zvol_dataset(zroot, "/dev/zd16",
						makedev(230, 16), ds,
						sizeof(ds)), 1);
	ck_assert_str_eq(ds, "tank/sub/vol1");
	snprintf(link, sizeof(link), "%s/tank/sub/vol1", zroot);
	ck_assert_int_eq(syncguard_zvol_dataset(zroot, link, makedev(230, 16),
						ds, sizeof(ds)), 1);
	ck_assert_str_eq(ds, "tank/sub/vol1");
	ck_assert_int_eq(syncguard_zvol_dataset(zroot, "/dev/sdz",
						makedev(230, 99), ds,
						sizeof(ds)), 0);
}
END_TEST

/* The store identity of block device 230:@minor, zvol links under
 * @zroot, into @id, its former one into @former (256 bytes each) */
static void zvol_id(const char *zroot, unsigned int minor, char *id,
		    char *former)
{
	ck_assert_int_eq(syncguard_block_store_id("/sys", zroot,
						  makedev(230, minor), id, 256,
						  former, 256), 0);
}

/* A zvol's store identity is its /dev/zvol name, not its device number,
 * which ZFS hands out afresh at every import: the same dataset at
 * another minor is the same store, another dataset at the same minor
 * another store.  The device number is its former identity (earlier
 * builds named a zvol by it), whose records latch it where they lie
 * (test_poison_device_number_held). */
START_TEST(test_poison_zvol_identity)
{
	char zroot[300], a[256], b[256], c[256];
	char former[SYNCGUARD_FORMER_LEN];

	snprintf(zroot, sizeof(zroot), "%s/zvol", root);
	sh("mkdir -p '%s/tank/sub' && mknod '%s/tank/sub/vol1' b 230 16",
	   zroot, zroot);
	zvol_id(zroot, 16, a, former);
	ck_assert_msg(!strncmp(a, "zvol-tank_sub_vol1-h", 20), "%s", a);
	ck_assert_str_eq(former, "blk-230.16");
	sh("rm '%s/tank/sub/vol1' && mknod '%s/tank/sub/vol1' b 230 32",
	   zroot, zroot);
	sh("mknod '%s/tank/sub/vol2' b 230 16%s", zroot, "");
	zvol_id(zroot, 32, b, former);
	ck_assert_str_eq(a, b);
	zvol_id(zroot, 16, c, former);
	ck_assert_str_ne(a, c);
	ck_assert_msg(!strncmp(c, "zvol-tank_sub_vol2-h", 20), "%s", c);
	/* "-part" inside a dataset's name is no partition's link */
	sh("mkdir -p '%s/tank/vm-part' && mknod '%s/tank/vm-part/disk' b 230 64",
	   zroot, zroot);
	zvol_id(zroot, 64, c, former);
	ck_assert_msg(!strncmp(c, "zvol-tank_vm-part_disk-h", 24), "%s", c);
	/* nor at the end of one (a partition is told by sysfs, not by its
	 * link's name) */
	sh("mknod '%s/tank/db-part1' b 230 80%s", zroot, "");
	zvol_id(zroot, 80, c, former);
	ck_assert_msg(!strncmp(c, "zvol-tank_db-part1-h", 20), "%s", c);
	/* a device no link names keeps its device number */
	zvol_id(zroot, 48, c, former);
	ck_assert_str_eq(c, "blk-230.48");
	ck_assert_str_eq(former, "");
}
END_TEST

/* The store identity of block device @ma:@mi, its sysfs under @sys,
 * into @id (256 bytes), its former ones into @former
 * (SYNCGUARD_FORMER_LEN) */
static void md_id(const char *sys, unsigned int ma, unsigned int mi,
		  char *id, char *former)
{
	ck_assert_int_eq(syncguard_block_store_id(sys, "/nonexistent",
						  makedev(ma, mi), id, 256,
						  former, SYNCGUARD_FORMER_LEN),
			 0);
}

/* An md array's store identity is its UUID (sysfs md/uuid), not its
 * device number, which md hands out by name or at assembly: the same
 * array as md127 is the same store, and a partition of it is named by
 * it and its number.  An array whose UUID says nothing lasting keeps
 * its device number: one of zeros, one without a superblock (whose UUID
 * Linux makes up at each mdadm --build) and one with external metadata
 * (IMSM; here given a UUID, to show it is not read).  The device number is the former identity
 * (earlier builds named an array by it). */
START_TEST(test_poison_md_identity)
{
	const char *u = "3c1b4a7e-52c6-4f1d-9a0e-6f2b8d9c0a11";
	char sys[300], id[256], former[SYNCGUARD_FORMER_LEN], want[300];

	sh("cd '%s' && mkdir -p sys/dev/block sys/devices/md0/md "
	   "sys/devices/md127/md sys/devices/md1/md sys/devices/md0/md0p1 && "
	   "cd sys && ln -s ../../devices/md0 dev/block/9:0 && "
	   "ln -s ../../devices/md127 dev/block/9:127 && "
	   "ln -s ../../devices/md1 dev/block/9:1 && "
	   "ln -s ../../devices/md0/md0p1 dev/block/259:0 && "
	   "echo 1 >devices/md0/md0p1/partition && "
	   "echo 00000000-0000-0000-0000-000000000000 >devices/md1/md/uuid && "
	   "echo 1.2 >devices/md0/md/metadata_version && "
	   "echo 0.90 >devices/md127/md/metadata_version && "
	   "echo 1.2 >devices/md1/md/metadata_version && "
	   "mkdir -p devices/md2/md devices/md3/md && "
	   "ln -s ../../devices/md2 dev/block/9:2 && "
	   "ln -s ../../devices/md3 dev/block/9:3 && "
	   "echo none >devices/md2/md/metadata_version && "
	   "echo external:imsm >devices/md3/md/metadata_version && "
	   "echo %s >devices/md0/md/uuid", root, u);
	sh("echo %s >'%s/sys/devices/md127/md/uuid'", u, root);
	sh("cd '%s/sys/devices' && echo 5f0e2d4c-1b3a-4e59-8c7d-2a1b0c9d8e7f "
	   ">md2/md/uuid && echo %s >md3/md/uuid", root, u);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	snprintf(want, sizeof(want), "md-%s", u);
	md_id(sys, 9, 0, id, former);
	ck_assert_str_eq(id, want);
	ck_assert_str_eq(former, "blk-9.0");
	md_id(sys, 9, 127, id, former);
	ck_assert_str_eq(id, want);
	ck_assert_str_eq(former, "blk-9.127");
	snprintf(want, sizeof(want), "part1-md-%s", u);
	md_id(sys, 259, 0, id, former);
	ck_assert_str_eq(id, want);
	ck_assert_str_eq(former, "blk-259.0");
	/* zeros; random, without a superblock; external metadata */
	for (unsigned int mi = 1; mi <= 3; mi++) {
		snprintf(want, sizeof(want), "blk-9.%u", mi);
		md_id(sys, 9, mi, id, former);
		ck_assert_str_eq(id, want);
		ck_assert_str_eq(former, "");
	}
}
END_TEST

/* A partition of a loop device is named by the loop's backing file
 * and its number, as the loop device itself is by that file: loop hands
 * out the partitions' device numbers (259:N) anew at each losetup -P,
 * so a number would miss the record, or find another's.  Its former
 * identity is the file's former one with its number (a kernel before
 * 6.9 names the file system otherwise), else that device number
 * (earlier builds named it so). */
START_TEST(test_poison_loop_partition_identity)
{
	char sys[300], file[300], id[256], want[300];
	char former[SYNCGUARD_FORMER_LEN];
	char file_former[SYNCGUARD_FORMER_LEN], want_former[1400];
	int fd;

	snprintf(file, sizeof(file), "%s/backing.img", root);
	fd = open(file, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(syncguard_store_ids(fd, want + 6, sizeof(want) - 6,
					     file_former, sizeof(file_former)),
			 0);
	close(fd);
	memcpy(want, "part2-", 6);
	want_former[0] = '\0';
	for (char *l = strtok(file_former, "\n"); l; l = strtok(NULL, "\n"))
		snprintf(want_former + strlen(want_former), sizeof(want_former) -
			 strlen(want_former), "part2-%s\n", l);
	strcat(want_former, "blk-259.3");
	sh("cd '%s' && mkdir -p sys/dev/block sys/devices/loop0/loop "
	   "sys/devices/loop0/loop0p2 && cd sys && "
	   "ln -s ../../devices/loop0 dev/block/7:0 && "
	   "ln -s ../../devices/loop0/loop0p2 dev/block/259:3 && "
	   "echo 2 >devices/loop0/loop0p2/partition && "
	   "echo '%s' >devices/loop0/loop/backing_file", root, file);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	md_id(sys, 7, 0, id, former);
	ck_assert_str_eq(id, want + 6);
	md_id(sys, 259, 3, id, former);
	ck_assert_str_eq(id, want);
	ck_assert_str_eq(former, want_former);
}
END_TEST

/* JFS and HFS, whose fdatasync sends no device flush, are named (and
 * so refused for write-through and write-back); ext4, XFS and HFS+,
 * which send one, are not.  No kernel here has JFS or HFS to mount. */
START_TEST(test_stack_flushless_fs)
{
	ck_assert_str_eq(syncguard_fs_flushless(0x3153464a), "JFS");
	ck_assert_str_eq(syncguard_fs_flushless(0x4244), "HFS");
	ck_assert_ptr_null(syncguard_fs_flushless(0xef53));
	ck_assert_ptr_null(syncguard_fs_flushless(0x58465342));
	ck_assert_ptr_null(syncguard_fs_flushless(0x482b));
}
END_TEST

/* The policy's answer for each sync value and mode */
START_TEST(test_stack_zvol_policy)
{
	ck_assert_ptr_nonnull(syncguard_policy_zvol(SYNCGUARD_MODE_WRITE_BACK,
						    "disabled"));
	ck_assert_ptr_nonnull(syncguard_policy_zvol(SYNCGUARD_MODE_WRITE_THROUGH,
						    "disabled"));
	ck_assert_ptr_null(syncguard_policy_zvol(SYNCGUARD_MODE_WRITE_BACK,
						 "standard"));
	ck_assert_ptr_null(syncguard_policy_zvol(SYNCGUARD_MODE_WRITE_THROUGH,
						 "always"));
	ck_assert_ptr_nonnull(syncguard_policy_zvol(SYNCGUARD_MODE_PLP,
						    "standard"));
	ck_assert_ptr_null(syncguard_policy_zvol(SYNCGUARD_MODE_PLP, "always"));
	ck_assert_ptr_nonnull(strstr(syncguard_policy_zvol(SYNCGUARD_MODE_PLP,
		"disabled"), "set sync=standard (sync=always for plp)"));
}
END_TEST

/* A file on a ZFS file system: its mount's type and source (the
 * dataset) as mountinfo lists them; a made-up line for the test file's
 * own mount, as ZFS writes it */
START_TEST(test_stack_zfs_file_dataset)
{
	char path[300], table[512], type[32], src[256];
	struct statx stx;
	int fd;

	snprintf(path, sizeof(path), "%s/f", root);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx), 0);
	snprintf(table, sizeof(table), "%llu 1 0:55 / /tank/luns rw,noatime "
		 "shared:9 - zfs tank/luns rw,xattr,noacl\n",
		 (unsigned long long)stx.stx_mnt_id);
	ck_assert_int_eq(syncguard_mount_source(fd, table, type, sizeof(type),
						src, sizeof(src)), 0);
	ck_assert_str_eq(type, "zfs");
	ck_assert_str_eq(src, "tank/luns");
	ck_assert_int_eq(syncguard_mount_source(fd, "", type, sizeof(type), src,
						sizeof(src)), -ENOENT);
	close(fd);
}
END_TEST

/* Neither the file-system checks nor the ZFS one take a LUN on trust
 * when /proc/self/mountinfo cannot be read (here: no descriptor free):
 * whether its file system sends flushes, or is a ZFS dataset with
 * sync=disabled, is in that table.  A LUN so opened used to pass both. */
START_TEST(test_stack_mountinfo_unreadable)
{
	struct syncguard_lun lun = { .fd = -1, .loop_fd = -1 };
	struct rlimit old, low;
	char path[300], err[512] = "";
	struct stat st;
	int fd, lowest;

	snprintf(path, sizeof(path), "%s/f", root);
	fd = open(path, O_RDWR | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	lun.fd = fd;
	lun.opts.mode = SYNCGUARD_MODE_WRITE_BACK;
	for (int i = 0; i < SYNCGUARD_LOOP_DEPTH; i++)
		lun.under_fd[i] = -1;
	ck_assert_msg(!syncguard_check_fs(fd, path, false, err, sizeof(err)),
		      "a file on the build's own file system refused: %s", err);
	ck_assert_int_eq(syncguard_check_beneath(&lun, path, err,
						 sizeof(err)), 0);
	lowest = dup(0);
	ck_assert_int_ge(lowest, 0);
	close(lowest);
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)lowest;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	ck_assert_int_eq(syncguard_check_fs(fd, path, false, err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, "mountinfo could not be read"), "%s", err);
	err[0] = '\0';
	ck_assert_int_eq(syncguard_check_beneath(&lun, path, err,
						 sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "mountinfo could not be read"), "%s", err);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	close(fd);
}
END_TEST

Suite *stack_suite(void)
{
	Suite *s = suite_create("stack");
	TCase *tc = tcase_create("beneath");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_stack_ram_metadata_layers);
	tcase_add_test(tc, test_stack_layers_unsafe_in_every_mode);
	tcase_add_test(tc, test_stack_layers_changed_live);
	tcase_add_test(tc, test_stack_dm_table_kinds);
	if (geteuid() == 0) {	/* mknod of a block device node */
		tcase_add_test(tc, test_stack_zvol_dataset);
		tcase_add_test(tc, test_poison_zvol_identity);
	} else {
		test_left_out("test_stack_zvol_dataset", false,
			      "mknod needs root");
		test_left_out("test_poison_zvol_identity", false,
			      "mknod needs root");
	}
	tcase_add_test(tc, test_poison_md_identity);
	tcase_add_test(tc, test_poison_loop_partition_identity);
	tcase_add_test(tc, test_stack_flushless_fs);
	tcase_add_test(tc, test_stack_zvol_policy);
	tcase_add_test(tc, test_stack_zfs_file_dataset);
	tcase_add_test(tc, test_stack_mountinfo_unreadable);
	suite_add_tcase(s, tc);
	return s;
}
