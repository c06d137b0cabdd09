#!/bin/bash
# guest.sh: openiscsi-syncbench and the job files of conf/fio run for
# real, through Linux's own iSCSI initiator (iscsi_tcp, the sd driver)
# in a QEMU guest, against a private tgtd with bs_syncguard on this host;
# the target's counters (syncguard-stat) then say what reached the wire.
#
# The guest stands in for a real host with a kernel initiator, which this
# machine lacks (no iscsi_tcp).  It runs under TCG (KVM is not used), so
# its numbers are not performance figures: this test asserts behaviour
# only -- which commands each job put on the wire -- never a rate.
#
# The guest boots Debian's own kernel (linux-image-amd64) with a small
# initramfs built here from busybox-static and the host's 9p and overlay
# modules (tests/guest/init); its root is the host's root file system,
# read-only over 9p with a tmpfs on top, so open-iscsi, fio, sdparm and
# this tree's tools come from the host's installed packages and nothing
# is fetched.  QEMU's user networking lets it reach the host's loopback
# as 10.0.2.2, where the private tgtd listens; the node records are made
# for that address (SendTargets would answer 127.0.0.1).  The guest runs
# tests/guest/inside.sh and reports on the serial console; a shared 9p
# directory carries fio's JSON back.
#
# One target (one LUN) per check, so each target's counters hold exactly
# its check's commands: the login's reads, the job, the logout (where the
# sd driver sends SYNCHRONIZE CACHE to a disk it sees as write-back).
#
# Two checks run a private tgtd inside the guest instead.  stack-dm puts
# LUNs on device-mapper devices, which this machine's kernel lacks and
# the guest's has (tests/guest/inside.sh, dm_check, says what each step
# shows); the guest gets two virtio disks for them.  stall-fuse:
# Debian 12's kernel is older than this host's, and its FUSE asks a
# daemon for stale attributes on any statx, as the mount watch makes
# every 2 s on tgtd's event thread (core/mounts.c); a daemon stopped
# under one write-back LUN must not stop another LUN or tgtadm.
#
#   tests/guest.sh [--keep]     exit 0 when every check holds
#
# SYNCGUARD_GUEST_JOBS=DIR runs the job files of DIR instead of conf/fio
# (how the test is shown to fail: a fua.fio without writefua=1).  Left
# out, with the reason, where QEMU, the kernel image or a tool is missing.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/leftout.sh
. "$top/scripts/leftout.sh"
tp=$top/scripts/tgtd-private
stat=$top/tools/syncguard-stat
say() { printf 'guest: %s\n' "$*" >&2; }
KEEP=0
[ "${1:-}" = --keep ] && KEEP=1

# ---- what the guest needs ----
need() {	# TOOL PACKAGE
	command -v "$1" >/dev/null && return 0
	left_out "tests/guest.sh" dependency "no $1 ($2)"
	exit 0
}
need qemu-system-x86_64 qemu-system-x86
need busybox busybox-static
need cpio cpio
need fio fio
need iscsiadm open-iscsi
need sdparm sdparm
need udevadm udev
need jq jq
need dmsetup dmsetup
kernel=$(ls /boot/vmlinuz-* 2>/dev/null | sort -V | tail -1)
if [ -z "$kernel" ] || [ ! -r "$kernel" ]; then
	left_out "tests/guest.sh" dependency "no kernel image in /boot (linux-image-amd64)"
	exit 0
fi
kver=${kernel#/boot/vmlinuz-}
mods=/lib/modules/$kver
if [ ! -f "$mods/modules.dep" ] ||
   ! grep -q '/iscsi_tcp\.ko' "$mods/modules.dep"; then
	left_out "tests/guest.sh" dependency \
		"no modules with iscsi_tcp for $kver in $mods (linux-image-amd64)"
	exit 0
fi
# the initramfs has no libraries: busybox must be the static one
if ldd "$(command -v busybox)" >/dev/null 2>&1; then
	left_out "tests/guest.sh" dependency "busybox is not static (busybox-static)"
	exit 0
fi
for f in "$top/bs_syncguard.so" "$stat" "$top/tools/iscsi-syncbench" \
	 "$top/tools/syncguard-devmodel"; do
	[ -x "$f" ] || [ -f "$f" ] || { say "FAIL: $f not built (make)"; exit 1; }
done

work=$(mktemp -d /var/tmp/syncguard-guest.XXXXXX)
tgtd=$work/tgtd
qpid=
cleanup() {
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	"$tp" stop "$tgtd" 2>/dev/null
	if [ "$KEEP" = 1 ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the initramfs: busybox, /init, the 9p and overlay modules ----
ir=$work/initramfs
mkdir -p "$ir/bin" "$ir/lib" "$ir/proc" "$ir/sys" "$ir/dev"
cp "$(command -v busybox)" "$ir/bin/busybox"
install -m 0755 "$top/tests/guest/init" "$ir/init"
# a module and what it needs, needed first (modules.dep lists the
# dependencies of MODULE; the last one listed is loaded first)
seen=" "
add_module() {
	local m=$1 d
	case $seen in *" $m "*) return 0 ;; esac
	for d in $(awk -v m="$m:" '$1 == m { for (i = NF; i > 1; i--) print $i }' \
			"$mods/modules.dep"); do
		add_module "$d"
	done
	case $seen in *" $m "*) return 0 ;; esac
	seen="$seen$m "
	mkdir -p "$ir/lib/$(dirname "$m")" && cp "$mods/$m" "$ir/lib/$m" &&
		echo "$m" >>"$ir/modules.order"
}
for m in virtio_pci 9pnet_virtio 9p overlay; do
	path=$(grep -o "^[^:]*/$m\.ko[^:]*:" "$mods/modules.dep" | tr -d :)
	if [ -z "$path" ]; then
		# built into the kernel: nothing to load
		grep -q "/$m\.ko" "$mods/modules.builtin" 2>/dev/null && continue
		left_out "tests/guest.sh" dependency "no module $m for $kver"
		exit 0
	fi
	add_module "$path"
done
case $(head -1 "$ir/modules.order") in *.ko) ;; *)
	left_out "tests/guest.sh" dependency "compressed modules: the initramfs loads .ko files only"
	exit 0 ;;
esac
(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz" ||
	{ say "FAIL: the initramfs could not be built"; exit 1; }

# ---- the private tgtd: one target of one LUN per check ----
"$tp" start "$tgtd" "$top/bs_syncguard.so" >/dev/null ||
	{ say "FAIL: no private tgtd"; exit 1; }
port=$(cat "$tgtd/port")
base=iqn.2026-11.org.syncguard:guest$$
share=$work/share
mkdir -p "$share/out"
: >"$share/checks"
tid=0
# check NAME MODE HOW [ARGS]: a target NAME with a LUN in MODE; HOW is
# tool (openiscsi-syncbench ARGS) or switch (tests/guest/inside.sh)
check() {
	local name=$1 mode=$2 how=$3; shift 3
	tid=$((tid + 1))
	# a file written whole: write-through's O_DIRECT writes into holes
	# would cost allocations
	dd if=/dev/zero of="$work/$name.img" bs=1M count=48 status=none ||
		return 1
	"$tp" target "$tgtd" "$tid" "$base-$name" &&
		"$tp" lun "$tgtd" "$tid" 1 "$work/$name.img" "mode=$mode" ||
		return 1
	echo "$name $base-$name $how $*" >>"$share/checks"
}
short="--seconds 2 --ramp 1"
pre="--seconds 1 --ramp 0"
check wb-none write-back tool --sync none $short &&
check wb-fua write-back tool --sync fua $short &&
check wb-flush write-back tool --sync flush $short &&
check wb-every8 write-back tool --sync every:8 $short &&
check wb-end write-back tool --sync end $short &&
check wb-dsync write-back tool --sync dsync $short &&
check wb-fsync write-back tool --sync fsync $short &&
check wt-fua write-through tool --sync fua $short &&
check wt-dsync write-through tool --sync dsync $short &&
check wt-fsync write-through tool --sync fsync $short &&
check wb-switch write-back switch &&
check wb-iozone write-back tool --preset iozone $pre &&
check wb-vdbench write-back tool --preset vdbench $pre &&
check wb-throughput write-back tool --preset throughput $pre ||
	{ say "FAIL: the targets could not be made"; exit 1; }
# run in the guest alone, on a tgtd of its own (tests/guest/inside.sh)
echo "stall-fuse - stall" >>"$share/checks"
# device-mapper, on a tgtd of its own in the guest, whose kernel has it
# (tests/guest/inside.sh, dm_check): its steps are judged below
echo "stack-dm - dm" >>"$share/checks"
dm_steps="refuse take eio recreate eio-wb close plp-dm reload wcache moved drops long"
# the guest's virtio disks (/dev/vda, /dev/vdb), under the dm devices of
# stack-dm
truncate -s 384M "$work/disk.img"
truncate -s 64M "$work/disk2.img"

# the tool and its job files go to the guest through the shared folder:
# the guest's /tmp is a tmpfs of its own (inside.sh), and a checkout
# under the host's /tmp would not be there
mkdir -p "$share/repo/tools" "$share/repo/conf" "$share/repo/scripts"
install -m 0755 "$top/tools/openiscsi-syncbench" "$top/tools/iscsi-syncbench" \
	"$top/tools/syncguard-devmodel" "$stat" "$share/repo/tools/"
install -m 0755 "$top/scripts/tgtd-private" "$share/repo/scripts/"
install -m 0644 "$top/bs_syncguard.so" "$share/repo/"
cp -r "$top/conf/fio" "$share/repo/conf/"
cat >"$share/params" <<EOF
REPO='/share/repo'
PORTAL='10.0.2.2:$port'
JOBS_DIR='${SYNCGUARD_GUEST_JOBS:-}'
EOF
install -m 0755 "$top/tests/guest/inside.sh" "$share/inside.sh"

# What a failure leaves to read where the work directory is gone (CI):
# the failed runs' own output (those whose rc is not 0, or the last one
# the guest began), the guest kernel's errors, and whether the private
# tgtd outlived the checks.
declare -A G
diagnose() {
	local name pid last
	last=$(ls -td "$share/out"/*/ 2>/dev/null | head -1)
	for name in $(awk '{ print $1 }' "$share/checks"); do
		[ "${G[$name]:-}" = 0 ] && continue
		[ -n "${G[$name]:-}" ] || [ "$share/out/$name/" = "$last" ] ||
			continue
		say "out/$name/log, its last lines:"
		tail -n 15 "$share/out/$name/log" 2>/dev/null | sed 's/^/  /' >&2
	done
	say "the guest kernel's errors, timeouts and resets, the last ones:"
	grep -aiE 'error|timeout|timed out|abort|reset|fail|offline|reject|blocked' \
		"$share/out/dmesg" 2>/dev/null | grep -av 'Power-on or device reset' |
		grep -av 'dev dm-[0-9]' |
		tail -n 25 | sed 's/^/  /' >&2
	pid=$(cat "$tgtd/pid" 2>/dev/null)
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		say "tgtd (pid $pid) is still running; its threads (name, state, where each waits):"
		for t in /proc/"$pid"/task/*; do
			printf '  %s %s %s\n' "$(cat "$t/comm" 2>/dev/null)" \
				"$(awk '{ print $3 }' "$t/stat" 2>/dev/null)" \
				"$(cat "$t/wchan" 2>/dev/null)"
		done | sort | uniq -c | sed 's/^/ /' >&2
	else say "tgtd (pid ${pid:-?}) is gone"; fi
	say "tgtd.log, its last lines:"
	tail -n 15 "$tgtd/tgtd.log" | sed 's/^/  /' >&2
}

# ---- the guest ----
say "booting $kver under TCG (not a performance measurement), $tid checks"
t0=$(date +%s)
timeout 900 qemu-system-x86_64 -machine pc,accel=tcg -m 1024 -smp 1 \
	-nodefaults -nographic -no-reboot -serial stdio \
	-kernel "$kernel" -initrd "$work/initrd.gz" \
	-append "console=ttyS0 panic=-1 quiet" \
	-virtfs local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$share,mount_tag=share,security_model=none,multidevs=remap" \
	-netdev user,id=n0 -device virtio-net-pci,netdev=n0,romfile= \
	-drive "file=$work/disk.img,if=virtio,format=raw,cache=writeback" \
	-drive "file=$work/disk2.img,if=virtio,format=raw,cache=writeback" \
	</dev/null >"$work/serial.log" 2>&1 &
qpid=$!
wait "$qpid"
qrc=$?
qpid=
say "the guest ran $(( $(date +%s) - t0 )) s (QEMU exit $qrc)"
tr -d '\r' <"$work/serial.log" | grep -a '^GUEST: ' >"$work/guest.txt"
if ! grep -q '^GUEST: done' "$work/guest.txt" ||
   ! grep -q '^GUEST: ready' "$work/guest.txt"; then
	say "FAIL: the guest did not finish its checks; its console:"
	tail -n 40 "$work/serial.log" >&2
	diagnose
	exit 1
fi

# ---- what reached the wire ----
fails=0 checks=0
expect() {	# WHAT CONDITION
	checks=$((checks + 1))
	eval "$2" || { fails=$((fails + 1)); say "FAIL: $1"; }
}
printf '%-14s %-15s %4s %6s %6s %5s %6s %3s %5s %4s\n' check "Linux's view" rc \
	writes fua sync reads wce fio_w secs >&2
declare -A W F S R E C D X T
for name in $(awk '{ print $1 }' "$share/checks"); do
	line=$(grep "^GUEST: check $name rc " "$work/guest.txt" | tail -1)
	G[$name]=$(awk '{ print $5 }' <<<"$line")
	if [ "$name" = stall-fuse ]; then	# no target on this host's tgtd
		printf '%-14s %-15s %4s %6s %6s %5s %6s %3s %5s %4s\n' "$name" \
			"(its own tgtd)" "${G[$name]:-?}" - - - - - - \
			"$(awk '{ print $11 }' <<<"$line")" >&2
		expect "stall-fuse: with a FUSE daemon stopped under one write-back LUN, tgtd in the guest answered another LUN and tgtadm (out/stall-fuse/log)" \
			'[ "${G[$name]}" = 0 ]'
		continue
	fi
	if [ "$name" = stack-dm ]; then	# its steps, on its own tgtd
		for step in $dm_steps; do
			line=$(grep "^GUEST: check $name-$step rc " "$work/guest.txt" | tail -1)
			G[$name-$step]=$(awk '{ print $5 }' <<<"$line")
			printf '%-14s %-15s %4s %6s %6s %5s %6s %3s %5s %4s\n' \
				"${name#stack-}-$step" "(its own tgtd)" "${G[$name-$step]:-?}" \
				- - - - - - "$(awk '{ print $11 }' <<<"$line")" >&2
		done
		G[$name]=0
		for step in $dm_steps; do
			[ "${G[$name-$step]:-}" = 0 ] || G[$name]=1
		done
		continue
	fi
	C[$name]=$(awk '{ print $7 }' <<<"$line")
	T[$name]=$(awk '{ print $11 }' <<<"$line")
	read -r W[$name] F[$name] S[$name] R[$name] E[$name] D[$name] < <(
		"$stat" --json "$base-$name" 1 | jq -r '.[0] |
		"\(.writes) \(.fua_writes) \(.sync_caches) \(.reads) \(.errors) \(.wce)"')
	# the writes fio itself counted (after its ramp_time)
	X[$name]=$(cat "$share/out/$name"/*.json 2>/dev/null |
		jq -s '[.[].jobs[].write.total_ios] | add // 0')
	printf '%-14s %-15s %4s %6s %6s %5s %6s %3s %5s %4s\n' "$name" "${C[$name]:-?}" \
		"${G[$name]:-?}" "${W[$name]}" "${F[$name]}" "${S[$name]}" \
		"${R[$name]}" "${D[$name]}" "${X[$name]}" "${T[$name]:-?}" >&2
	expect "$name: the guest's run exited 0 (out/$name/log)" '[ "${G[$name]}" = 0 ]'
	expect "$name: no command answered with an error" '[ "${E[$name]}" = 0 ]'
done
grep '^GUEST: check wb-switch-before ' "$work/guest.txt" | awk '{ print $7 }' >"$work/before"

# write-back (WCE=1, DPOFUA=1): Linux sees a write-back cache with FUA
for n in wb-none wb-fua wb-flush wb-every8 wb-end wb-dsync wb-fsync wb-iozone \
	 wb-vdbench wb-throughput; do
	expect "$n: Linux sees 'write back' (${C[$n]})" '[ "${C[$n]}" = write_back ]'
done
for n in wt-fua wt-dsync wt-fsync; do
	expect "$n: Linux sees 'write through' (${C[$n]})" '[ "${C[$n]}" = write_through ]'
done
# the sg engine's CDBs, exactly (the logout adds one SYNCHRONIZE CACHE
# to a disk Linux sees as write-back: sd's shutdown flush)
expect "wb-none: plain WRITEs, no FUA, no flush but the logout's" \
	'[ "${W[wb-none]}" -gt 0 ] && [ "${F[wb-none]}" = 0 ] && [ "${S[wb-none]}" -le 1 ]'
expect "wb-fua: every WRITE with FUA=1 (fio counted ${X[wb-fua]}), none without, no flush but the logout's" \
	'[ "${F[wb-fua]}" -gt 0 ] && [ "${W[wb-fua]}" = 0 ] && [ "${F[wb-fua]}" -ge "${X[wb-fua]}" ] && [ "${S[wb-fua]}" -le 1 ]'
expect "wt-fua: FUA=1 on the wire to a WCE=0 disk too (sg), and no flush at all" \
	'[ "${F[wt-fua]}" -gt 0 ] && [ "${W[wt-fua]}" = 0 ] && [ "${S[wt-fua]}" = 0 ]'
expect "wb-flush: a SYNCHRONIZE CACHE for each WRITE (${S[wb-flush]} for ${W[wb-flush]})" \
	'[ "${F[wb-flush]}" = 0 ] && [ "${W[wb-flush]}" -gt 0 ] &&
	 [ "${S[wb-flush]}" -ge $(( ${W[wb-flush]} - 1 )) ] && [ "${S[wb-flush]}" -le $(( ${W[wb-flush]} + 1 )) ]'
expect "wb-every8: a SYNCHRONIZE CACHE for every 8 WRITEs (${S[wb-every8]} for ${W[wb-every8]})" \
	'[ "${F[wb-every8]}" = 0 ] && [ "${W[wb-every8]}" -ge 16 ] &&
	 [ "${S[wb-every8]}" -ge $(( ${W[wb-every8]} / 8 - 1 )) ] && [ "${S[wb-every8]}" -le $(( ${W[wb-every8]} / 8 + 2 )) ]'
expect "wb-end: WRITEs, then one SYNCHRONIZE CACHE (and the logout's)" \
	'[ "${F[wb-end]}" = 0 ] && [ "${W[wb-end]}" -gt 0 ] && [ "${S[wb-end]}" -ge 1 ] && [ "${S[wb-end]}" -le 2 ]'
# the block device: what Linux decides
expect "wb-dsync: O_DSYNC writes go out as WRITE with FUA=1 (WCE=1, DPOFUA=1), none without" \
	'[ "${F[wb-dsync]}" -gt 0 ] && [ "${W[wb-dsync]}" = 0 ] && [ "${F[wb-dsync]}" -ge "${X[wb-dsync]}" ]'
expect "wb-fsync: fdatasync goes out as SYNCHRONIZE CACHE after each WRITE (${S[wb-fsync]} for ${W[wb-fsync]})" \
	'[ "${F[wb-fsync]}" = 0 ] && [ "${W[wb-fsync]}" -gt 0 ] && [ "${S[wb-fsync]}" -ge $(( ${W[wb-fsync]} - 1 )) ]'
expect "wt-dsync: O_DSYNC writes to a WCE=0 disk: plain WRITEs, no FUA, no flush" \
	'[ "${W[wt-dsync]}" -gt 0 ] && [ "${F[wt-dsync]}" = 0 ] && [ "${S[wt-dsync]}" = 0 ]'
expect "wt-fsync: fdatasync on a WCE=0 disk sends no flush" \
	'[ "${W[wt-fsync]}" -gt 0 ] && [ "${F[wt-fsync]}" = 0 ] && [ "${S[wt-fsync]}" = 0 ]'
# the sd driver's MODE SELECT switches a write-back LUN to WCE=0
expect "wb-switch: Linux saw 'write back', then 'write through' after the echo ($(cat "$work/before") -> ${C[wb-switch]})" \
	'[ "$(cat "$work/before")" = write_back ] && [ "${C[wb-switch]}" = write_through ]'
expect "wb-switch: the LUN reports WCE=0 after the sd driver's MODE SELECT" \
	'[ "${D[wb-switch]}" = 0 ]'
expect "wb-switch: after the switch, no FUA and no flush from O_DSYNC or fdatasync writes" \
	'[ "${W[wb-switch]}" -gt 0 ] && [ "${F[wb-switch]}" = 0 ] && [ "${S[wb-switch]}" = 0 ]'
# the presets' job files
expect "wb-iozone: reads, and every write with FUA=1" \
	'[ "${R[wb-iozone]}" -gt 0 ] && [ "${F[wb-iozone]}" -gt 0 ] && [ "${W[wb-iozone]}" = 0 ]'
expect "wb-vdbench: reads and plain writes, no FUA, no flush but the logout's" \
	'[ "${R[wb-vdbench]}" -gt 0 ] && [ "${W[wb-vdbench]}" -gt 0 ] && [ "${F[wb-vdbench]}" = 0 ] && [ "${S[wb-vdbench]}" -le 1 ]'
expect "wb-throughput: plain writes, WCE restored to 1 afterwards" \
	'[ "${W[wb-throughput]}" -gt 0 ] && [ "${F[wb-throughput]}" = 0 ] && [ "${D[wb-throughput]}" = 1 ]'
# device-mapper in the guest's kernel (tests/guest/inside.sh, dm_check;
# rc 2: a step could not be set up, out/stack-dm/log)
expect "stack-dm-refuse: LUNs on dm-linear over a RAM disk and over a loop device on tmpfs, and on a RAM disk and on null_blk, refused in every mode, tgtd.log saying why each time (${G[stack-dm-refuse]:-none})" \
	'[ "${G[stack-dm-refuse]:-}" = 0 ]'
expect "stack-dm-take: a LUN on dm-linear over the virtio disk taken, its FUA writes GOOD (${G[stack-dm-take]:-none})" \
	'[ "${G[stack-dm-take]:-}" = 0 ]'
expect "stack-dm-eio: every FUA write fails while dm-flakey fails the writes, and still once the linear table is back (${G[stack-dm-eio]:-none})" \
	'[ "${G[stack-dm-eio]:-}" = 0 ]'
expect "stack-dm-recreate: a LUN on that dm device, made again under another number, starts latched, its record under the dm UUID; GOOD after --clear-latch (${G[stack-dm-recreate]:-none})" \
	'[ "${G[stack-dm-recreate]:-}" = 0 ]'
expect "stack-dm-eio-wb: every SYNCHRONIZE CACHE of a write-back LUN fails over its cached writes lost to dm-flakey (another process's sync met the error first), and still once the linear table is back (${G[stack-dm-eio-wb]:-none})" \
	'[ "${G[stack-dm-eio-wb]:-}" = 0 ]'
expect "stack-dm-close: a write-back LUN deleted with its cached writes lost to dm-flakey: the LUN made again starts latched (${G[stack-dm-close]:-none})" \
	'[ "${G[stack-dm-close]:-}" = 0 ]'
expect "stack-dm-plp-dm: plp takes dm-linear over the disk and refuses dm-thin, tgtd.log saying why; write-through takes dm-thin (${G[stack-dm-plp-dm]:-none})" \
	'[ "${G[stack-dm-plp-dm]:-}" = 0 ]'
expect "stack-dm-reload: a plp LUN's dm-linear table reloaded live to dm-thin fails its FUA writes within 5 s, tgtd.log saying why (${G[stack-dm-reload]:-none})" \
	'[ "${G[stack-dm-reload]:-}" = 0 ]'
expect "stack-dm-wcache: every FUA write fails within 5 s of the disk under dm-linear set to write through, tgtd.log saying why (${G[stack-dm-wcache]:-none})" \
	'[ "${G[stack-dm-wcache]:-}" = 0 ]'
expect "stack-dm-moved: a LUN whose dm-linear moved to a second disk is not latched for the first disk's write cache, and is for the second's (${G[stack-dm-moved]:-none})" \
	'[ "${G[stack-dm-moved]:-}" = 0 ]'
expect "stack-dm-drops: dm-zero and dm-flakey dropping writes refused in every mode, tgtd.log saying why; a write-through LUN's dm-linear reloaded live to dm-flakey dropping writes fails its FUA writes within 5 s (${G[stack-dm-drops]:-none})" \
	'[ "${G[stack-dm-drops]:-}" = 0 ]'
expect "stack-dm-long: write-through refuses a table of 400 dm-linear segments and then a dm-zero one, for the zero one (${G[stack-dm-long]:-none})" \
	'[ "${G[stack-dm-long]:-}" = 0 ]'
# a tgtd wedged by a check would fail the later ones in ways that hide it
expect "tgtd still answers tgtadm after the checks" \
	'timeout 10 "$tp" adm "$tgtd" --lld iscsi --op show --mode target >/dev/null'
expect "every fio run wrote a histogram log" \
	'[ "$(find "$share/out" -name "*_clat_hist.*.log" | wc -l)" -ge 13 ]'

if [ "$fails" -eq 0 ]; then say "ok: $checks checks"
else
	diagnose
	say "$fails of $checks checks FAILED (tests/guest.sh --keep keeps the guest's output)"
fi
[ "$fails" -eq 0 ]
