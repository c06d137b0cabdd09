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

while read -r name iqn how args; do
	out=/share/out/$name
	mkdir -p "$out"
	SECONDS=0	# how long the check took: a stall shows in the table
	case $how in
	switch) switch_check "$name" "$iqn" "$out" ;;
	stall) stall_check "$name" "$out" ;;
	tool)
		# shellcheck disable=SC2086
		timeout 300 "$ob" --portal "$PORTAL" --target "$iqn" --output "$out" \
			$args >"$out/log" 2>&1
		rc=$?
		say "check $name rc $rc $(view "$out/log") secs $SECONDS" ;;
	esac
done </share/checks
