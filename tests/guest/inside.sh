#!/bin/bash
# The guest's half of tests/guest.sh, run as process 1 of a QEMU guest
# whose root is the host's own file system (read-only, over 9p, with a
# tmpfs on top): the host's open-iscsi, fio, sdparm, udev and this tree's
# tools/openiscsi-syncbench and conf/fio.  It brings up udev, the network
# (QEMU's user networking: the host's loopback is 10.0.2.2) and iscsid,
# then runs each check of /share/checks against the private tgtd on the
# host and says on the serial console how each went, in lines
#   GUEST: check NAME rc N cache_type TYPE fua F secs S
# which tests/guest.sh reads; fio's JSON and each run's output go to
# /share/out/NAME, the kernel's messages at the end to /share/out/dmesg.
# The host, not the guest, judges what reached the wire (the target's
# counters).  It powers the guest off at the end, whatever happened.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
say() { echo "GUEST: $*" >/dev/console; }
bye() { dmesg >/share/out/dmesg 2>&1; say "done"; sync; echo o >/proc/sysrq-trigger; sleep 30; }
trap bye EXIT

. /share/params	# REPO PORTAL JOBS_DIR
mount -t tmpfs tmpfs /run && mkdir -p /run/lock /run/lock/iscsi
mount -t tmpfs tmpfs /tmp
/lib/systemd/systemd-udevd --daemon >/dev/null 2>&1
udevadm trigger --action=add && udevadm settle -t 30

# the network: the first interface QEMU gave us (udev names it)
modprobe virtio_net && udevadm settle -t 10
ifc=$(ls /sys/class/net | grep -vx lo | head -1)
ip link set lo up && ip link set "$ifc" up &&
	ip addr add 10.0.2.15/24 dev "$ifc" &&
	ip route add default via 10.0.2.2 || { say "no network ($ifc)"; exit 1; }

modprobe iscsi_tcp && modprobe sd_mod || { say "no iscsi_tcp"; exit 1; }
echo "InitiatorName=iqn.2026-11.org.syncguard:guest" >/etc/iscsi/initiatorname.iscsi
rm -rf /etc/iscsi/nodes /etc/iscsi/send_targets	# the host's, not ours
iscsid || { say "iscsid did not start"; exit 1; }
say "ready $(uname -r)"

ob=$REPO/tools/openiscsi-syncbench
[ -n "${JOBS_DIR:-}" ] && export SYNCBENCH_JOBS=$JOBS_DIR

# The kernel's view of the disk in a run's output (openiscsi-syncbench
# prints it): "cache_type write_back fua 1"
view() {
	local l ct fua
	l=$(grep "Linux sees cache type" "$1" | tail -1)
	ct=$(sed -n "s/.*cache type '\([^']*\)'.*/\1/p" <<<"$l" | tr ' ' _)
	fua=$(sed -n 's/.*, FUA \([^)]*\))$/\1/p' <<<"$l")
	echo "cache_type ${ct:-none} fua ${fua:-none}"
}

# cache_type of the disk at by-path LINK
cache_type() {
	local sd
	sd=$(basename "$(readlink -f "$1")")
	cat /sys/block/"$sd"/device/scsi_disk/*/cache_type 2>/dev/null | tr ' ' '_'
}

# The switch: log in by hand, "write through" into cache_type (the sd
# driver sends MODE SELECT), read it back, run the block-device jobs on
# the session as it is, log out always.
switch_check() {
	local name=$1 iqn=$2 out=$3 link before after rc=0
	local node=(-m node -T "$iqn" -p "$PORTAL")
	link=/dev/disk/by-path/ip-$PORTAL-iscsi-$iqn-lun-1
	iscsiadm "${node[@]}" -o new >"$out/log" 2>&1 &&
		iscsiadm "${node[@]}" --login >>"$out/log" 2>&1 || rc=1
	if [ "$rc" = 0 ]; then
		udevadm settle -t 30
		dev=$(readlink -f "$link")	# fio splits names at the by-path ":"s
		before=$(cache_type "$link")
		sd=$(basename "$(readlink -f "$link")")
		echo "write through" >/sys/block/"$sd"/device/scsi_disk/*/cache_type ||
			rc=1
		after=$(cache_type "$link")
		say "check $name-before rc 0 cache_type $before fua -"
		for j in blk-fsync blk-dsync; do
			SYNCBENCH_DEV=$dev SYNCBENCH_SECONDS=2 SYNCBENCH_RAMP=0 \
			SYNCBENCH_LOG=$out/$j fio --output-format=json \
				--output="$out/$j.json" "${SYNCBENCH_JOBS:-$REPO/conf/fio}/$j.fio" \
				>>"$out/log" 2>&1 || rc=1
		done
	fi
	iscsiadm "${node[@]}" --logout >>"$out/log" 2>&1 || rc=1
	iscsiadm "${node[@]}" -o delete >>"$out/log" 2>&1
	say "check $name rc $rc cache_type ${after:-none} fua - secs $SECONDS"
}

# A stopped FUSE daemon under a write-back LUN must not stop tgtd: a
# private tgtd in this guest (Debian's own kernel, whose FUSE asks its
# daemon for stale attributes on any statx) with two write-back LUNs on
# FUSE models; the first model is stopped, and after two rounds of the
# mount watch (2 s each) the second LUN must still answer, and tgtd
# tgtadm.  This machine's newer kernel would not show it.
stall_check() {
	local name=$1 out=$2 d=/tmp/stall rc=0 m1 url i iqn
	local tp=$REPO/scripts/tgtd-private model=$REPO/tools/syncguard-devmodel
	mkdir -p "$d/m1" "$d/m2"
	modprobe fuse >>"$out/log" 2>&1 || rc=1
	for i in 1 2; do
		truncate -s 64M "$d/s$i.stable"
		"$model" --image "$d/s$i.stable" --flush-ms 2 --max-versions 1 \
			"$d/m$i" -f >>"$out/log" 2>&1 &
		[ "$i" = 1 ] && m1=$!
	done
	for i in $(seq 100); do
		[ -e "$d/m1/disk.img" ] && [ -e "$d/m2/disk.img" ] && break
		sleep 0.1
	done
	iqn=iqn.2026-11.org.syncguard:stall
	[ "$rc" = 0 ] && "$tp" start "$d/t" "$REPO/bs_syncguard.so" >>"$out/log" 2>&1 &&
		"$tp" target "$d/t" 1 "$iqn" >>"$out/log" 2>&1 &&
		"$tp" lun "$d/t" 1 1 "$d/m1/disk.img" mode=write-back >>"$out/log" 2>&1 &&
		"$tp" lun "$d/t" 1 2 "$d/m2/disk.img" mode=write-back >>"$out/log" 2>&1 &&
		url=$("$tp" url "$d/t" "$iqn" 2) || rc=1
	if [ "$rc" = 0 ]; then
		kill -STOP "$m1"
		sleep 5
		timeout 60 "$REPO/tools/iscsi-syncbench" -t 2 --timeout 8 -q 1 \
			--no-progress "$url" >>"$out/log" 2>&1 || rc=1
		timeout 20 "$tp" adm "$d/t" --lld iscsi --op show --mode target \
			>/dev/null 2>>"$out/log" || rc=1
		kill -CONT "$m1"
	fi
	"$tp" stop "$d/t" >>"$out/log" 2>&1
	cp "$d/t/tgtd.log" "$out/" 2>/dev/null
	umount "$d/m1" "$d/m2" 2>/dev/null
	say "check $name rc $rc cache_type - fua - secs $SECONDS"
}

# Device-mapper for real, with the guest's kernel (Debian's; this
# machine's own has no device-mapper, where tests/unit/check_stack.c
# walks a made-up sysfs tree instead).  A private tgtd in this guest,
# LUNs on dm devices, one line per step:
#   refuse    dm-linear over a RAM disk (brd), dm-linear over a loop
#             device (whose backing file, here on this guest's tmpfs, the
#             checks do not follow through a layer), and a RAM disk
#             itself, are refused in every mode (core/stack.c, the walk
#             down sysfs slaves/; core/fscheck.c)
#   take      dm-linear over the guest's virtio disk is taken, and a FUA
#             write to it is GOOD
#   eio       that device's table swapped for dm's error target: a FUA
#             write fails, and still fails once the linear table is back
#             and the device reads again (the LUN latched)
#   recreate  a LUN made again on that device starts latched (the record
#             kept under its dm UUID); once syncguard-stat --clear-latch
#             removed the record, the next LUN's FUA writes are GOOD
#   eio-wb    a write-back LUN's plain writes, in the page cache, then
#             the error target: SYNCHRONIZE CACHE fails, and still fails
#             once the linear table is back (the writes the page cache
#             held are lost; the LUN latched)
#   wcache    the virtio disk's write_cache set to "write through" under
#             a LUN on dm-linear: its FUA writes fail within 60 s
# Each step's own commands and their output are in out/NAME/log.
dm_check() {
	local name=$1 out=$2 d=/tmp/dm rc=0 iqn url lo mode dev i
	local tp=$REPO/scripts/tgtd-private st=$REPO/tools/syncguard-stat
	local n=131072	# sectors: 64 MiB
	dm_say() { say "check $name-$1 rc $2 cache_type - fua - secs $SECONDS"; }
	dm_log() { echo "== $*" >>"$out/log"; }
	# a FUA write (1 s at QD 1) to URL: 0 when every one was GOOD
	dm_fua() {
		timeout 120 "$REPO/tools/iscsi-syncbench" -t 1 -q 1 --sync fua \
			--timeout 20 --no-progress "$1" >>"$out/log" 2>&1
	}
	# DEVICE TABLE: load it into a live device (without the sync of its
	# page cache a suspend would otherwise make first)
	dm_table() {
		dmsetup suspend --nolockfs "$1" && dmsetup load "$1" --table "$2" &&
			dmsetup resume "$1"
	}
	dm_dellun() {
		"$tp" adm "$d/t" --lld iscsi --op delete --mode logicalunit \
			--tid 1 --lun "$1" >>"$out/log" 2>&1
	}
	mkdir -p "$d"
	iqn=iqn.2026-11.org.syncguard:dm
	dm_log "setup"
	{ modprobe dm_mod && modprobe loop &&
		modprobe brd rd_nr=2 rd_size=65536 && udevadm settle -t 30 &&
		[ -b /dev/vda ] && [ -b /dev/ram1 ] && truncate -s 64M "$d/tmpfs.img" &&
		lo=$(losetup -f --show "$d/tmpfs.img") &&
		dmsetup create sgram -u SYNCGUARD-TEST-RAM --table "0 $n linear /dev/ram0 0" &&
		dmsetup create sgloop -u SYNCGUARD-TEST-LOOP --table "0 $n linear $lo 0" &&
		dmsetup create sgdisk -u SYNCGUARD-TEST-DISK --table "0 $n linear /dev/vda 0" &&
		dmsetup create sgdisk2 -u SYNCGUARD-TEST-DISK2 --table "0 $n linear /dev/vda $n" &&
		dmsetup create sgdisk3 -u SYNCGUARD-TEST-DISK3 --table "0 $n linear /dev/vda $((2 * n))" &&
		udevadm settle -t 30 &&
		"$tp" start "$d/t" "$REPO/bs_syncguard.so" &&
		"$tp" target "$d/t" 1 "$iqn"; } >>"$out/log" 2>&1 || rc=2
	if [ "$rc" = 2 ]; then
		for i in refuse take eio recreate eio-wb wcache; do
			dm_say "$i" 2
		done
		"$tp" stop "$d/t" >>"$out/log" 2>&1
		return
	fi

	dm_log "refuse"
	for mode in write-through write-back plp; do
		for dev in /dev/mapper/sgram /dev/mapper/sgloop /dev/ram1; do
			"$tp" lun "$d/t" 1 9 "$dev" "mode=$mode" >>"$out/log" 2>&1 ||
				continue
			dm_log "taken: $dev, mode=$mode"
			rc=1
			dm_dellun 9
		done
	done
	grep -q "a RAM block device (ram0 under dm-" "$d/t/tgtd.log" &&
		grep -q "the loop device ${lo#/dev/} under dm-" "$d/t/tgtd.log" &&
		grep -q "/dev/ram1: on a RAM block device (ram1)" "$d/t/tgtd.log" ||
		{ dm_log "tgtd.log gives no reason"; rc=1; }
	dm_say refuse "$rc"

	dm_log "take"
	rc=0
	"$tp" lun "$d/t" 1 1 /dev/mapper/sgdisk mode=write-through >>"$out/log" 2>&1 &&
		url=$("$tp" url "$d/t" "$iqn" 1) && dm_fua "$url" || rc=1
	dm_say take "$rc"

	dm_log "eio"
	rc=0
	dm_table sgdisk "0 $n error" >>"$out/log" 2>&1 || rc=2
	dm_fua "$url" && { dm_log "GOOD over the error target"; rc=1; }
	dm_table sgdisk "0 $n linear /dev/vda 0" >>"$out/log" 2>&1 || rc=2
	dd if=/dev/mapper/sgdisk of=/dev/null bs=4k count=1 iflag=direct \
		>>"$out/log" 2>&1 || rc=2
	dm_fua "$url" && { dm_log "GOOD once the table was back"; rc=1; }
	dm_say eio "$rc"

	dm_log "recreate"
	rc=0
	dm_dellun 1 && "$tp" lun "$d/t" 1 1 /dev/mapper/sgdisk \
		mode=write-through >>"$out/log" 2>&1 || rc=2
	dm_fua "$url" && { dm_log "the new LUN was not latched"; rc=1; }
	grep -q "lun 1: starts latched" "$d/t/tgtd.log" ||
		{ dm_log "tgtd.log does not say it starts latched"; rc=1; }
	"$st" --latched --state-dir "$d/t/state" >>"$out/log" 2>&1
	"$st" --latched --state-dir "$d/t/state" 2>/dev/null |
		grep -q "dm-SYNCGUARD-TEST-DISK\b" ||
		{ dm_log "no latch record under the dm UUID"; rc=1; }
	dm_dellun 1 &&
		"$st" --clear-latch /dev/mapper/sgdisk --state-dir "$d/t/state" \
			>>"$out/log" 2>&1 &&
		"$tp" lun "$d/t" 1 1 /dev/mapper/sgdisk mode=write-through \
			>>"$out/log" 2>&1 || rc=2
	dm_fua "$url" || { dm_log "not GOOD after --clear-latch"; rc=1; }
	dm_say recreate "$rc"

	dm_log "eio-wb"
	rc=0
	# the kernel's flusher must not write the cached writes back first
	echo 360000 >/proc/sys/vm/dirty_expire_centisecs
	"$tp" lun "$d/t" 1 3 /dev/mapper/sgdisk3 mode=write-back >>"$out/log" 2>&1 &&
		url=$("$tp" url "$d/t" "$iqn" 3) &&
		timeout 120 "$REPO/tools/iscsi-syncbench" --sync none --bytes 256k \
			-q 1 --no-progress "$url" >>"$out/log" 2>&1 &&
		dm_table sgdisk3 "0 $n error" >>"$out/log" 2>&1 || rc=2
	dm_flush() {
		timeout 120 "$REPO/tools/iscsi-syncbench" --sync flush-only -t 1 \
			-q 1 --timeout 20 --no-progress "$url" >>"$out/log" 2>&1
	}
	dm_flush && { dm_log "SYNCHRONIZE CACHE GOOD over the error target"; rc=1; }
	dm_table sgdisk3 "0 $n linear /dev/vda $((2 * n))" >>"$out/log" 2>&1 || rc=2
	dm_flush && { dm_log "SYNCHRONIZE CACHE GOOD once the table was back"; rc=1; }
	dm_say eio-wb "$rc"

	dm_log "wcache"
	rc=0
	"$tp" lun "$d/t" 1 2 /dev/mapper/sgdisk2 mode=write-through >>"$out/log" 2>&1 &&
		url=$("$tp" url "$d/t" "$iqn" 2) && dm_fua "$url" || rc=2
	cat /sys/block/vda/queue/write_cache >>"$out/log"
	echo "write through" >/sys/block/vda/queue/write_cache || rc=2
	for i in $(seq 12); do
		dm_fua "$url" || break
		sleep 5
	done
	dm_fua "$url" && { dm_log "FUA writes GOOD after write through"; rc=1; }
	grep -q 'lun 2: the write cache of vda was set to "write through"' \
		"$d/t/tgtd.log" || { dm_log "tgtd.log gives no reason"; rc=1; }
	echo "write back" >/sys/block/vda/queue/write_cache
	dm_say wcache "$rc"

	"$tp" stop "$d/t" >>"$out/log" 2>&1
	cp "$d/t/tgtd.log" "$out/" 2>/dev/null
	dmsetup remove_all >>"$out/log" 2>&1
	losetup -d "$lo" 2>/dev/null
}

while read -r name iqn how args; do
	out=/share/out/$name
	mkdir -p "$out"
	SECONDS=0	# how long the check took: a stall shows in the table
	case $how in
	switch) switch_check "$name" "$iqn" "$out" ;;
	stall) stall_check "$name" "$out" ;;
	dm) dm_check "$name" "$out" ;;
	tool)
		# shellcheck disable=SC2086
		timeout 300 "$ob" --portal "$PORTAL" --target "$iqn" --output "$out" \
			$args >"$out/log" 2>&1
		rc=$?
		say "check $name rc $rc $(view "$out/log") secs $SECONDS" ;;
	esac
done </share/checks
