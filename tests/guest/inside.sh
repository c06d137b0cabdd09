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
# LUNs on dm devices over the virtio disk QEMU gives the guest, one line
# per step:
#   refuse    dm-linear over a RAM disk (brd), dm-linear over a loop
#             device (whose backing file, here on this guest's tmpfs, the
#             checks do not follow through a layer), a RAM disk itself,
#             and null_blk, are refused in every mode, tgtd.log saying why
#             (core/stack.c, the walk down sysfs slaves/; core/fscheck.c)
#   take      dm-linear over the disk is taken, and a FUA write is GOOD
#   eio       that device's writes failed by dm-flakey (error_writes,
#             loaded live; flushes still supported, so its write_cache
#             stays "write back" and the watch has nothing to say): every
#             FUA write fails with a medium error, and every one still
#             does once the linear table is back and the device reads
#   recreate  the device removed and made again under another name and
#             device number with the same dm UUID: a LUN on it starts
#             latched (the record kept under the UUID); once
#             syncguard-stat --clear-latch removed the record, the next
#             LUN's FUA writes are GOOD
#   eio-wb    a write-back LUN's plain writes, in the page cache, then
#             dm-flakey failing the writes and a sync from another
#             process (which writes them back, and meets the error
#             first): every SYNCHRONIZE CACHE fails, and every one still
#             does once the linear table is back (the writes the page
#             cache held are lost; the LUN latched)
#   close     a write-back LUN deleted with its writes cached and
#             dm-flakey failing them: its final flush fails, and the LUN
#             made again on the device, the linear table back, starts
#             latched
#   plp-dm    plp reads each device-mapper table with DM_TABLE_STATUS: a
#             plp LUN on dm-linear over the disk is taken; one on a
#             dm-thin volume (a pool on the disk) is refused, tgtd.log
#             saying why, and the same volume is taken in write-through
#   reload    the plp LUN's dm-linear table reloaded live to another thin
#             volume of that pool: within 5 s every FUA write fails, and
#             tgtd.log says the layer changed (the watch,
#             syncguard_lun_layers_lost)
#   wcache    the disk's write_cache set to "write through" under a LUN
#             on dm-linear: within 5 s every FUA write fails, tgtd.log
#             saying why
#   moved     a LUN's dm-linear reloaded from the disk to a second one
#             (as pvmove does): the first disk set to "write through"
#             leaves its FUA writes GOOD, the second so set fails them
#             within 5 s (the watch notes the disks under a LUN anew
#             every round)
#   drops     dm-zero, and dm-flakey dropping writes (drop_writes), are
#             refused in every mode, tgtd.log saying why; a write-through
#             LUN's dm-linear table reloaded live to dm-flakey dropping
#             writes: within 5 s every FUA write fails, tgtd.log saying
#             why
#   long      a table of 400 dm-linear segments and then a dm-zero one,
#             longer than the 16 KiB DM_TABLE_STATUS is first asked with:
#             write-through refuses it for the zero segment (the table is
#             asked for again with more room; each kind listed once)
# Each step's own commands and their output are in out/NAME/log; rc 2 is
# a step whose setting up failed.
dm_check() {
	local name=$1 out=$2 d=/tmp/dm rc=0 iqn url="" url1="" lo i
	local tp=$REPO/scripts/tgtd-private st=$REPO/tools/syncguard-stat
	local n=131072 expire	# sectors: 64 MiB
	local log=$d/t/tgtd.log
	dm_say() { say "check $name-$1 rc $2 cache_type - fua - secs $SECONDS"; }
	dm_log() { echo "== $*" >>"$out/log"; }
	dms() { timeout 60 dmsetup "$@"; }
	# 1 s of FUA writes at QD 1 to URL: 0 when every one was GOOD
	dm_fua() {
		[ -n "$1" ] && timeout 120 "$REPO/tools/iscsi-syncbench" -t 1 -q 1 \
			--sync fua --timeout 20 --no-progress "$1" >>"$out/log" 2>&1
	}
	# 1 s of FUA writes (or, SYNC flush-only, SYNCHRONIZE CACHEs) to URL:
	# 0 when every one failed with a medium error (none GOOD; not a
	# login or a tgtd that failed)
	dm_fails() {
		local r o=$d/fails.out
		[ -n "$1" ] || return 1
		timeout 120 "$REPO/tools/iscsi-syncbench" -t 1 -q 1 --sync "${2:-fua}" \
			--timeout 20 --no-progress "$1" >"$o" 2>&1
		r=$?
		cat "$o" >>"$out/log"
		[ "$r" = 1 ] && grep -q "^  0 operations: 0 IOPS" "$o" &&
			grep -q "CHECK CONDITION, sense key MEDIUM ERROR" "$o"
	}
	# DEVICE TABLE: load it into a live device (without the sync of its
	# page cache a suspend would otherwise make first)
	dm_table() {
		dms suspend --nolockfs "$1" && dms load "$1" --table "$2" &&
			dms resume "$1"
	}
	dm_dellun() {
		"$tp" adm "$d/t" --lld iscsi --op delete --mode logicalunit \
			--tid 1 --lun "$1" >>"$out/log" 2>&1
	}
	dm_lun() {	# LUN DEVICE MODE
		"$tp" lun "$d/t" 1 "$1" "$2" "mode=$3" >>"$out/log" 2>&1
	}
	# lines of tgtd.log with TEXT
	dm_count() { grep -c -- "$1" "$log"; }
	# each DEVICE refused as LUN 9 in every mode: 0 when so
	dm_refused() {
		local m v r=0
		for m in write-through write-back plp; do
			for v in "$@"; do
				dm_lun 9 "$v" "$m" || continue
				dm_log "taken: $v, mode=$m"
				r=1
				dm_dellun 9
			done
		done
		return "$r"
	}
	# DISK's write_cache set to "write through": 5 s later every FUA
	# write to URL (LUN N's) fails, tgtd.log saying why; then "write
	# back" again.  0 when so, 1 when not, 2 when it could not be set
	dm_wc_latches() {	# DISK N URL
		local r=0
		echo "write through" >/sys/block/"$1"/queue/write_cache || r=2
		sleep 5
		dm_fails "$3" || { dm_log "not every FUA write failed"; r=1; }
		echo "write back" >/sys/block/"$1"/queue/write_cache
		grep -q "lun $2: the write cache of $1 was set to \"write through\"" \
			"$log" || { dm_log "tgtd.log gives no reason"; r=1; }
		return "$r"
	}
	mkdir -p "$d"
	iqn=iqn.2026-11.org.syncguard:dm
	dm_log "setup"
	{ modprobe virtio_blk && modprobe dm_mod && modprobe dm_flakey &&
		modprobe dm_thin_pool && modprobe loop &&
		modprobe brd rd_nr=2 rd_size=65536 &&
		modprobe null_blk nr_devices=1 gb=1 && udevadm settle -t 30 &&
		[ -b /dev/vda ] && [ -b /dev/vdb ] && [ -b /dev/ram1 ] &&
		[ -b /dev/nullb0 ] &&
		truncate -s 64M "$d/tmpfs.img" &&
		lo=$(losetup -f --show "$d/tmpfs.img") &&
		dms create sgram -u SYNCGUARD-TEST-RAM --table "0 $n linear /dev/ram0 0" &&
		dms create sgloop -u SYNCGUARD-TEST-LOOP --table "0 $n linear $lo 0" &&
		dms create sgdisk -u SYNCGUARD-TEST-DISK --table "0 $n linear /dev/vda 0" &&
		dms create sgdisk2 -u SYNCGUARD-TEST-DISK2 --table "0 $n linear /dev/vda $n" &&
		dms create sgdisk3 -u SYNCGUARD-TEST-DISK3 --table "0 $n linear /dev/vda $((2 * n))" &&
		dms create sgdisk5 -u SYNCGUARD-TEST-DISK5 --table "0 $n linear /dev/vda $((5 * n))" &&
		dms create sgmove -u SYNCGUARD-TEST-MOVE --table "0 65536 linear /dev/vda $((4 * n + 16384))" &&
		udevadm settle -t 30 &&
		"$tp" start "$d/t" "$REPO/bs_syncguard.so" &&
		"$tp" target "$d/t" 1 "$iqn"; } >>"$out/log" 2>&1 || rc=2
	if [ "$rc" = 2 ]; then
		for i in refuse take eio recreate eio-wb close plp-dm reload wcache \
			 moved drops long; do
			dm_say "$i" 2
		done
		"$tp" stop "$d/t" >>"$out/log" 2>&1
		return
	fi

	dm_log "refuse"
	dm_refused /dev/mapper/sgram /dev/mapper/sgloop /dev/ram1 /dev/nullb0 ||
		rc=1
	[ "$(dm_count "sgram: it stands on a RAM block device (ram0 under dm-")" = 3 ] &&
		[ "$(dm_count "sgloop: it stands on the loop device ${lo#/dev/} under dm-")" = 3 ] &&
		[ "$(dm_count "/dev/ram1: on a RAM block device (ram1)")" = 3 ] &&
		[ "$(dm_count "/dev/nullb0: on a RAM block device (nullb0)")" = 3 ] ||
		{ dm_log "tgtd.log does not give each refusal its reason"; rc=1; }
	dm_say refuse "$rc"

	dm_log "take"
	rc=0
	dm_lun 1 /dev/mapper/sgdisk write-through && url=$("$tp" url "$d/t" "$iqn" 1) &&
		dm_fua "$url" || rc=1
	dm_say take "$rc"

	dm_log "eio"
	rc=0
	dm_table sgdisk "0 $n flakey /dev/vda 0 0 3600 1 error_writes" >>"$out/log" 2>&1 ||
		rc=2
	dm_fails "$url" || { dm_log "not every FUA write failed"; rc=1; }
	dm_table sgdisk "0 $n linear /dev/vda 0" >>"$out/log" 2>&1 &&
		dd if=/dev/mapper/sgdisk of=/dev/null bs=4k count=1 iflag=direct \
			>>"$out/log" 2>&1 || rc=2
	dm_fails "$url" || { dm_log "not every FUA write failed with the table back"; rc=1; }
	dm_say eio "$rc"

	dm_log "recreate"
	rc=0
	i=$(dms info -c --noheadings -o minor sgdisk)
	# the freed device number goes to a filler, so sgdisk-b gets another
	dm_dellun 1 && dms remove sgdisk && dms create sgfill --table "0 8 zero" &&
		dms create sgdisk-b -u SYNCGUARD-TEST-DISK --table "0 $n linear /dev/vda 0" &&
		udevadm settle -t 30 && dm_log "minor $i, now $(dms info -c --noheadings -o minor sgdisk-b)" &&
		[ "$(dms info -c --noheadings -o minor sgdisk-b)" != "$i" ] &&
		dm_lun 1 /dev/mapper/sgdisk-b write-through || rc=2
	dm_fails "$url" || { dm_log "the new LUN was not latched"; rc=1; }
	grep -q "lun 1: starts latched: an earlier LUN on this store latched an error" "$log" ||
		{ dm_log "tgtd.log does not say it starts latched"; rc=1; }
	"$st" --latched --state-dir "$d/t/state" >>"$out/log" 2>&1
	"$st" --latched --state-dir "$d/t/state" 2>/dev/null |
		grep -q "^dm-SYNCGUARD-TEST-DISK:" ||
		{ dm_log "no latch record under the dm UUID"; rc=1; }
	dm_dellun 1 &&
		"$st" --clear-latch /dev/mapper/sgdisk-b --state-dir "$d/t/state" \
			>>"$out/log" 2>&1 &&
		dm_lun 1 /dev/mapper/sgdisk-b write-through || rc=2
	dm_fua "$url" || { dm_log "not GOOD after --clear-latch"; rc=1; }
	url1=$url
	dm_say recreate "$rc"

	dm_log "eio-wb"
	rc=0
	# the kernel's flusher must not write the cached writes back first
	expire=$(cat /proc/sys/vm/dirty_expire_centisecs)
	echo 360000 >/proc/sys/vm/dirty_expire_centisecs
	url=""
	dm_lun 3 /dev/mapper/sgdisk3 write-back && url=$("$tp" url "$d/t" "$iqn" 3) &&
		timeout 120 "$REPO/tools/iscsi-syncbench" --sync none --bytes 256k \
			-q 1 --no-progress "$url" >>"$out/log" 2>&1 &&
		dm_table sgdisk3 "0 $n flakey /dev/vda $((2 * n)) 0 3600 1 error_writes" \
			>>"$out/log" 2>&1 || rc=2
	sync
	dm_fails "$url" flush-only ||
		{ dm_log "not every SYNCHRONIZE CACHE failed"; rc=1; }
	dm_table sgdisk3 "0 $n linear /dev/vda $((2 * n))" >>"$out/log" 2>&1 || rc=2
	dm_fails "$url" flush-only ||
		{ dm_log "not every SYNCHRONIZE CACHE failed with the table back"; rc=1; }
	# what failed them was the error, not the watch
	! grep -q "the write cache of dm-" "$log" ||
		{ dm_log "the watch saw a write cache change"; rc=1; }
	dm_say eio-wb "$rc"

	dm_log "close"
	rc=0
	url=""
	dm_lun 5 /dev/mapper/sgdisk5 write-back && url=$("$tp" url "$d/t" "$iqn" 5) &&
		timeout 120 "$REPO/tools/iscsi-syncbench" --sync none --bytes 256k \
			-q 1 --no-progress "$url" >>"$out/log" 2>&1 &&
		dm_table sgdisk5 "0 $n flakey /dev/vda $((5 * n)) 0 3600 1 error_writes" \
			>>"$out/log" 2>&1 && dm_dellun 5 &&
		dm_table sgdisk5 "0 $n linear /dev/vda $((5 * n))" >>"$out/log" 2>&1 &&
		dm_lun 5 /dev/mapper/sgdisk5 write-back || rc=2
	dm_fails "$url" flush-only || { dm_log "the new LUN was not latched"; rc=1; }
	grep -q "lun 5: starts latched: an earlier LUN on this store latched an error" "$log" ||
		{ dm_log "tgtd.log does not say it starts latched"; rc=1; }
	echo "$expire" >/proc/sys/vm/dirty_expire_centisecs
	dm_say close "$rc"

	dm_log "plp-dm"
	rc=0
	# a thin pool, its metadata and data on the disk (new, so zeros: a
	# new pool), and two thin volumes in it
	{ dms create sgmeta --table "0 16384 linear /dev/vda $((3 * n))" &&
		dms create sgdata --table "0 $n linear /dev/vda $((3 * n + 16384))" &&
		dms create sgpool --table "0 $n thin-pool /dev/mapper/sgmeta /dev/mapper/sgdata 128 0" &&
		dms message sgpool 0 "create_thin 0" && dms message sgpool 0 "create_thin 1" &&
		dms create sgthin -u SYNCGUARD-TEST-THIN --table "0 $n thin /dev/mapper/sgpool 0" &&
		udevadm settle -t 30; } >>"$out/log" 2>&1 || rc=2
	url=""
	dm_lun 2 /dev/mapper/sgdisk2 plp && url=$("$tp" url "$d/t" "$iqn" 2) &&
		dm_fua "$url" || { dm_log "plp did not take dm-linear"; rc=1; }
	if dm_lun 4 /dev/mapper/sgthin plp; then
		dm_log "plp took dm-thin"
		rc=1
		dm_dellun 4
	fi
	grep -q "lun 4: /dev/mapper/sgthin: mode=plp, but it stands on device-mapper thin (dm " \
		"$log" || { dm_log "tgtd.log gives no reason"; rc=1; }
	dm_lun 4 /dev/mapper/sgthin write-through &&
		dm_fua "$("$tp" url "$d/t" "$iqn" 4)" && dm_dellun 4 || rc=1
	dm_say plp-dm "$rc"

	dm_log "reload"
	rc=0
	[ -n "$url" ] && dm_table sgdisk2 "0 $n thin /dev/mapper/sgpool 1" >>"$out/log" 2>&1 ||
		rc=2
	sleep 5
	dm_fails "$url" || { dm_log "not every FUA write failed"; rc=1; }
	grep -q "lun 2: a layer under it changed: it now stands on device-mapper thin" \
		"$log" || { dm_log "tgtd.log gives no reason"; rc=1; }
	dm_say reload "$rc"

	dm_log "wcache"
	rc=0
	[ "$(cat /sys/block/vda/queue/write_cache)" = "write back" ] &&
		dm_fua "$url1" || rc=2
	dm_wc_latches vda 1 "$url1" || rc=$((rc ? rc : $?))
	dm_say wcache "$rc"

	dm_log "moved"
	rc=0
	url=""
	dm_lun 6 /dev/mapper/sgmove write-through && url=$("$tp" url "$d/t" "$iqn" 6) &&
		dm_fua "$url" && dm_table sgmove "0 65536 linear /dev/vdb 0" \
			>>"$out/log" 2>&1 || rc=2
	sleep 5		# a round of the watch after the move
	echo "write through" >/sys/block/vda/queue/write_cache || rc=2
	sleep 5
	dm_fua "$url" || { dm_log "latched for the disk it left"; rc=1; }
	echo "write back" >/sys/block/vda/queue/write_cache
	dm_wc_latches vdb 6 "$url" || rc=$((rc ? rc : $?))
	dm_say moved "$rc"

	dm_log "drops"
	rc=0
	{ dms create sgzero --table "0 $n zero" &&
		dms create sgdrop --table "0 65536 flakey /dev/vdb 65536 0 3600 1 drop_writes" &&
		dms create sgdrop2 -u SYNCGUARD-TEST-DROP \
			--table "0 32768 linear /dev/vda $((4 * n + 81920))" &&
		udevadm settle -t 30; } >>"$out/log" 2>&1 || rc=2
	dm_refused /dev/mapper/sgzero /dev/mapper/sgdrop || rc=1
	[ "$(dm_count "sgzero: it stands on device-mapper zero (dm ")" = 3 ] &&
		[ "$(dm_count "sgdrop: it stands on device-mapper flakey with drop_writes (dm ")" = 3 ] ||
		{ dm_log "tgtd.log does not give each refusal its reason"; rc=1; }
	url=""
	dm_lun 7 /dev/mapper/sgdrop2 write-through && url=$("$tp" url "$d/t" "$iqn" 7) &&
		dm_fua "$url" &&
		dm_table sgdrop2 "0 32768 flakey /dev/vda $((4 * n + 81920)) 0 3600 1 drop_writes" \
			>>"$out/log" 2>&1 || rc=2
	sleep 5
	dm_fails "$url" || { dm_log "not every FUA write failed"; rc=1; }
	grep -q "lun 7: a layer under it changed: it now stands on device-mapper flakey with drop_writes" \
		"$log" || { dm_log "tgtd.log gives no reason"; rc=1; }
	dm_dellun 7
	dm_say drops "$rc"

	dm_log "long"
	rc=0
	{ for i in $(seq 0 399); do
			echo "$((8 * i)) 8 linear /dev/vdb $((65536 + 8 * i))"
		done >"$d/long.table" &&
		echo "3200 8 zero" >>"$d/long.table" &&
		dms create sglong "$d/long.table" && udevadm settle -t 30 &&
		[ "$(dms table sglong | wc -l)" = 401 ]; } >>"$out/log" 2>&1 || rc=2
	if dm_lun 8 /dev/mapper/sglong write-through; then
		dm_log "write-through took it"
		rc=1
		dm_dellun 8
	fi
	grep -q "lun 8: /dev/mapper/sglong: it stands on device-mapper zero (dm " \
		"$log" || { dm_log "tgtd.log gives no reason"; rc=1; }
	dm_say long "$rc"

	"$tp" stop "$d/t" >>"$out/log" 2>&1
	cp "$log" "$out/" 2>/dev/null
	dms remove_all >>"$out/log" 2>&1
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
