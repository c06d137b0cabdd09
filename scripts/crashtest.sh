#!/bin/bash
# crashtest.sh: power-cut simulation.  For each configuration, CUTS times:
#   1. a fresh zeroed image behind syncguard-devmodel (FUSE; volatile
#      write cache, or power-loss protected for plp);
#   2. a private tgtd exports it; iscsi-crashtest runs a mixed workload
#      (plain writes, FUA writes, SYNCHRONIZE CACHE; several sessions,
#      queue depth > 1) and journals every command;
#   3. at a random instant the power goes: the model cuts (a random
#      subset of its cache survives, nothing after it reaches the image)
#      and tgtd gets SIGKILL;
#   4. a second tgtd exports the surviving image and iscsi-crashtest
#      check reads every block back against the journal.
# The restart configuration kills tgtd first, with the power on (a
# crash: its LUN never makes its final flush), starts it again on the
# same file, write-back or write-through in turn, and lets iscsi-crashtest
# sync record what the new LUN promises (WCE=0, or a SYNCHRONIZE CACHE
# answered GOOD) before the cut: the old tgtd's acknowledged writes must
# then survive.
# sync-loop is write-back under a sync writer's loop (each write
# followed by a SYNCHRONIZE CACHE), where the LUN makes its plain writes
# durable at once and answers the SYNCHRONIZE CACHEs without a flush
# (core/lun.c, syncguard_write_persist): odd cuts one session at queue
# depth 1 (the streak), even cuts 4 sessions of 8 in flight, whose writes
# and SYNCHRONIZE CACHEs interleave (the loop's trial, which makes them
# durable in its second epoch, 200-400 ms into the load, and after that
# wherever that way writes more), on a file in ext4 on the model: the
# trial runs only where RWF_DSYNC writes run concurrently.
# nbdkit is a volatile cache we did not write: nbdkit's cache filter
# (cache=writeback) keeps writes in memory until a flush reaches it, over
# its file plugin on the image, exported as a file by nbdfuse; the cut
# kills nbdkit (SIGKILL), which loses exactly what was not flushed.
# write-back and write-through in turn, each engine in turn.  Its
# control, nbdkit-discard, puts nbdkit's fua filter (fuamode=discard)
# above the cache: flushes never reach it, and the oracle must catch the
# losses.
# Configurations: the three syncguard modes (cuts rotate through
# engine=threads, uring and auto; write-through and write-back also
# through 512-byte and 4 KiB blocks, and direct=auto and its opposite,
# so O_DIRECT and page-cache writes both meet the cut), and a block
# device: a loop device over the model (sector size 512 or 4096), where
# RWF_DSYNC writes go asynchronously through io_uring as FUA writes, in
# write-through, in write-back with direct=yes and in write-back with
# direct=auto in turn (on the device, every write in the page cache; in
# ext4, page-cache plain writes beside O_DIRECT FUA writes, in the same
# pages with 512-byte blocks: core/mix.c); and ext4 on
# such a loop device, the LUN a file in it (ext4's own O_DIRECT and
# RWF_DSYNC handling, its journal); all of them must lose nothing,
# and tgt's own aio store, which answers SYNCHRONIZE CACHE without
# flushing: the oracle must catch it losing data, or the test itself is
# broken (as nbdkit-discard must).
#
# usage: crashtest.sh [--cuts N] [--configs "write-through write-back sync-loop plp blockdev ext4 restart nbdkit aio nbdkit-discard"]
#                     [--json FILE] [--seed N] [--keep]
# --configs takes names separated by spaces or commas.
# --keep leaves the work directory (journals, logs, last image) in build/.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/leftout.sh
. "$top/scripts/leftout.sh"
cuts=20
known="write-through write-back sync-loop plp blockdev ext4 restart nbdkit aio nbdkit-discard"
configs=$known
json=$top/build/crashtest.json
seed0=1
keep=
usage() {
	echo "usage: crashtest.sh [--cuts N] [--configs LIST] [--json FILE] [--seed N] [--keep]"
	echo "  LIST: some of: $known (spaces or commas)"
}
while [ $# -gt 0 ]; do
	case $1 in
	--cuts|--configs|--json|--seed)
		[ $# -ge 2 ] || { echo "crashtest: $1 wants a value" >&2; usage >&2; exit 2; } ;;
	esac
	case $1 in
	--keep) keep=1; shift ;;
	--cuts|--seed)
		[[ $2 =~ ^[1-9][0-9]{0,5}$ ]] ||
			{ echo "crashtest: $1 wants a whole number > 0, not '$2'" >&2; usage >&2; exit 2; }
		if [ "$1" = --cuts ]; then cuts=$2; else seed0=$2; fi
		shift 2 ;;
	--configs) configs=${2//,/ }; shift 2 ;;
	--json) json=$2; shift 2 ;;
	-h|--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
for config in $configs; do
	[[ " $known " == *" $config "* ]] ||
		{ echo "crashtest: unknown configuration '$config'" >&2; usage >&2; exit 2; }
done
[ -n "${configs// /}" ] || { usage >&2; exit 2; }

module=$top/bs_syncguard.so
model=$top/tools/syncguard-devmodel
crash=$top/tools/iscsi-crashtest
tp=$top/scripts/tgtd-private
iqn=iqn.2026-11.org.syncguard:crash
for f in "$module" "$model" "$crash"; do
	[ -x "$f" ] || [ -f "$f" ] || { echo "crashtest: $f missing: run make" >&2; exit 1; }
done
mkdir -p "$top/build"
work=$(mktemp -d "$top/build/crash.XXXXXX") || exit 1
mnt=$work/mnt
mpid=
loopdev=

# one_cut runs in $(...): the loop device it attaches is also named in
# $work/loopdev, so that cleanup detaches it after an interrupt
unmount_model() {
	[ -z "$loopdev" ] && [ -f "$work/loopdev" ] && loopdev=$(cat "$work/loopdev")
	# ext4: after the cut every write fails, so unmounting logs I/O
	# errors (expected: the power went)
	mountpoint -q "$work/fs" 2>/dev/null &&
		{ umount "$work/fs" 2>/dev/null || umount -l "$work/fs"; }
	if [ -n "$loopdev" ]; then
		losetup -d "$loopdev" 2>/dev/null
		loopdev=
		rm -f "$work/loopdev"
	fi
	# also when its server died and left it disconnected (nbdfuse once
	# nbdkit is killed), which mountpoint(1) does not call a mount point
	grep -qF " $mnt fuse" /proc/self/mounts && fusermount3 -u -z "$mnt" 2>/dev/null
	if [ -n "$mpid" ]; then
		kill "$mpid" 2>/dev/null
		wait "$mpid" 2>/dev/null
		mpid=
	fi
	if [ -f "$work/nbdkit.pid" ]; then	# an nbdkit model's server
		kill -9 "$(cat "$work/nbdkit.pid")" 2>/dev/null
		rm -f "$work/nbdkit.pid"
	fi
}

cleanup() {
	trap - EXIT INT TERM
	"$tp" kill "$work/victim" 2>/dev/null
	unmount_model
	"$tp" stop "$work/check"
	unmount_check_fs
	if [ -n "$keep" ]; then say "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'echo "crashtest: interrupted" >&2; exit 130' INT TERM

say() { printf 'crashtest: %s\n' "$*" >&2; }

# bsopts|bstype|block size per configuration and cut (seed); the device
# model is plp only for plp, whose 4 KiB blocks send its writes down the
# O_DIRECT path.  The model reports no O_DIRECT alignment, so syncguard
# takes 4 KiB: with 512-byte blocks most writes take the page cache,
# with 4 KiB blocks all of them go O_DIRECT where direct says so.
lun_args() {
	local bsz= direct= mode=${1/#sync-loop/write-back}
	(( ($2 / 3) % 2 )) && bsz=4096
	if (( ($2 / 6) % 2 )); then	# the opposite of direct=auto
		[ "$mode" = write-back ] && direct=";direct=yes" || direct=";direct=no"
		[ "$mode" = write-back ] && bsz=4096	# direct=yes needs it here
	fi
	case $mode in
	aio) echo "|aio|" ;;
	plp) echo "mode=plp;alloc_check=no|syncguard|4096" ;;	# FUSE: no FIEMAP
	blockdev|ext4) case $(( ($2 / 6) % 3 )) in
		0) echo "mode=write-through|syncguard|$bsz" ;;
		1) echo "mode=write-back;direct=yes|syncguard|$bsz" ;;
		2) echo "mode=write-back|syncguard|$bsz" ;;
		esac ;;
	restart) [ "$direct" = ";direct=no" ] && direct=";direct=yes" bsz=4096
		echo "mode=write-back$direct|syncguard|$bsz" ;;
	nbdkit) (( $2 % 2 )) && mode=write-through || mode=write-back
		echo "mode=$mode|syncguard|$bsz" ;;
	nbdkit-discard) echo "mode=write-back|syncguard|$bsz" ;;
	*) echo "mode=$mode$direct|syncguard|$bsz" ;;
	esac
}

# the workload's options beyond the defaults, per configuration and seed
workload_args() {
	[ "$1" = sync-loop ] || return 0
	if (( $2 % 2 )); then echo "--sessions 1 --qd 1 --alternate --fua-pct 0"
	else echo "--sessions 4 --qd 8 --alternate --fua-pct 0"; fi
}

# restart: tgtd killed with the power on, then started again on the same
# LUN file (write-back and write-through in turn); iscsi-crashtest sync
# journals what the new LUN promises for the old one's writes
restart_victim() {
	local lunpath=$1 bsopts=$2 bsz=$3 seed=$4
	"$tp" kill "$work/victim"
	wait "$wpid" || { say "the workload failed:"; tail -n 3 "$work/run.log" >&2
			  return 1; }
	wpid=
	(( seed % 2 )) && bsopts="mode=write-through;${bsopts##*;}"
	"$tp" start "$work/victim" "$module" >/dev/null &&
	"$tp" target "$work/victim" 1 "$iqn" &&
	"$tp" lun "$work/victim" 1 1 "$lunpath" "$bsopts" "$bsz" || {
		say "cannot restart the LUN:"; tail -n 3 "$work/victim/tgtd.log" >&2
		return 1; }
	"$crash" sync --journal "$work/journal" \
		"$("$tp" url "$work/victim" "$iqn" 1)" >>"$work/run.log" 2>&1
}

# blockdev: a loop device over the model's disk, with the LUN's block
# size as its sector size; prints its path
attach_loop() {
	local wc
	loopdev=$(losetup --find --show --sector-size "${1:-512}" "$mnt/disk.img") || {
		say "cannot attach a loop device to the model"; loopdev=; return 1; }
	echo "$loopdev" >"$work/loopdev"
	# the loop device must pass flushes on to the model: one set to
	# "write through" by hand (the setting outlives a detach) drops
	# them, and the test would blame syncguard for the model's losses
	wc=/sys/block/${loopdev#/dev/}/queue/write_cache
	if [ "$(cat "$wc" 2>/dev/null)" = "write through" ]; then
		echo "write back" >"$wc" 2>/dev/null
		if [ "$(cat "$wc")" = "write through" ]; then
			say "$loopdev is set to write through (it would drop flushes): not used"
			losetup -d "$loopdev"; loopdev=; return 1
		fi
		say "$loopdev was set to write through: set back to write back"
	fi
	echo "$loopdev"
}

# ext4: a file system on a loop device over the model, and in it the
# LUN's file, written out (no unwritten extents); prints the file's path
make_fs() {
	attach_loop 512 >/dev/null || return 1
	# 4 KiB blocks: the file's blocks then line up with the model's
	# (which never tears one); 1 KiB ones let a LUN block straddle two,
	# and a write in flight at the cut could come back torn
	mkfs.ext4 -q -F -b 4096 \
		-E lazy_itable_init=0,lazy_journal_init=0,nodiscard \
		"$loopdev" >>"$work/model.log" 2>&1 &&
	mkdir -p "$work/fs" && mount -t ext4 "$loopdev" "$work/fs" &&
	dd if=/dev/zero of="$work/fs/lun.img" bs=1M count=8 conv=fsync status=none || {
		say "cannot make ext4 on the model"; return 1; }
	echo "$work/fs/lun.img"
}

# ext4: what survived, mounted (its journal replayed), and the LUN's file
# copied out of it (the checking tgtd runs in a mount namespace made
# before this mount); prints the copy's path
mount_check_fs() {
	local dev ok=1
	dev=$(losetup --find --show "$work/stable.img") || return 1
	echo "$dev" >"$work/chkloop"
	if mkdir -p "$work/chk" && mount -t ext4 "$dev" "$work/chk"; then
		cp "$work/chk/lun.img" "$work/ext4-lun.img" && ok=0
	else
		say "the surviving ext4 does not mount"
	fi
	unmount_check_fs
	[ "$ok" = 0 ] && echo "$work/ext4-lun.img"
	return "$ok"
}

unmount_check_fs() {
	mountpoint -q "$work/chk" 2>/dev/null && umount "$work/chk"
	[ -f "$work/chkloop" ] && losetup -d "$(cat "$work/chkloop")" 2>/dev/null
	rm -f "$work/chkloop"
}

# Is the LUN of configuration $1, cut $2 a file in ext4 on the model?
# ext4's, and sync-loop's even cuts: the loop on a file system whose
# RWF_DSYNC writes run concurrently (core/lun.c), not only on FUSE
in_ext4() { [ "$1" = ext4 ] || { [ "$1" = sync-loop ] && (( $2 % 2 == 0 )); }; }

# nbdkit (cache=writeback over the image; for nbdkit-discard, the fua
# filter discarding flushes above it) exported by nbdfuse as
# $mnt/disk.img; nbdfuse is the model's process, nbdkit's pid in
# $work/nbdkit.pid (the cut kills it)
start_nbdkit() {
	local filters=(--filter=cache) args=(cache=writeback)
	[ "$1" = nbdkit-discard ] && filters=(--filter=fua --filter=cache) &&
		args+=(fuamode=discard)
	rm -f "$work/stable.img" "$work/nbd.sock"
	truncate -s 8M "$work/stable.img"
	mkdir -p "$mnt"
	nbdkit -U "$work/nbd.sock" -P "$work/nbdkit.pid" "${filters[@]}" \
		file "$work/stable.img" "${args[@]}" >>"$work/model.log" 2>&1 || {
		say "nbdkit did not start:"; tail -n 3 "$work/model.log" >&2; return 1; }
	nbdfuse "$mnt/disk.img" --unix "$work/nbd.sock" >>"$work/model.log" 2>&1 &
	mpid=$!
	disk_appears nbdfuse
}

# wait up to 2 s for $mnt/disk.img, which $1 (just started) exports
disk_appears() {
	for _ in $(seq 100); do
		[ -e "$mnt/disk.img" ] && return 0
		sleep 0.02
	done
	say "$1 did not start:"; tail -n 3 "$work/model.log" >&2
	return 1
}

# the power goes: the device model's cut, or nbdkit killed with its cache
power_cut() {
	if [[ $1 == nbdkit* ]]; then
		kill -9 "$(cat "$work/nbdkit.pid")" 2>/dev/null
	else
		echo cut >"$mnt/.ctl"
	fi
}

start_model() {
	local plp=$1 seed=$2 size=8M
	[[ $3 == nbdkit* ]] && { start_nbdkit "$3"; return; }
	in_ext4 "$3" "$seed" && size=32M
	mkdir -p "$mnt"
	rm -f "$work/stable.img"
	truncate -s "$size" "$work/stable.img"
	"$model" --image "$work/stable.img" --block 4096 $plp --seed "$seed" \
		"$mnt" -f >>"$work/model.log" 2>&1 &
	mpid=$!
	disk_appears "the device model"
}

# one cut; prints the checker's line "writes W durable D lost L bad_blocks B"
one_cut() {
	local config=$1 seed=$2 bsopts bstype bsz plp= url wpid= ms lunpath
	# this runs in $(...): on an interrupt, take down what it started
	# (they hold the substitution's pipe open, so the caller would wait)
	trap '[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	      "$tp" kill "$work/victim" 2>/dev/null; unmount_model; exit 130' INT TERM
	IFS='|' read -r bsopts bstype bsz <<<"$(lun_args "$config" "$seed")"
	# every engine in turn: io_uring; the LUN's worker threads; and auto, which
	# on FUSE is the workers for I/O with SYNCHRONIZE CACHE on io_uring
	local engines=(threads uring auto)
	[ "$bstype" = syncguard ] && bsopts="$bsopts;engine=${engines[seed % 3]}"
	[ "$config" = plp ] && plp=--plp
	start_model "$plp" "$seed" "$config" || return 1
	lunpath=$mnt/disk.img
	if [ "$config" = blockdev ]; then
		attach_loop "$bsz" >/dev/null && lunpath=$loopdev || { unmount_model; return 1; }
	elif in_ext4 "$config" "$seed"; then
		lunpath=$(make_fs) || { unmount_model; return 1; }
		loopdev=$(cat "$work/loopdev")
	fi
	# a fresh image is a new store: the last cut's latch records (its
	# LUN latched when the power went) must not make this LUN start
	# latched, which would fail every durable write and prove nothing
	rm -rf "$work/victim/state"
	"$tp" start "$work/victim" "$module" >/dev/null || { unmount_model; return 1; }
	"$tp" target "$work/victim" 1 "$iqn" &&
	"$tp" lun "$work/victim" 1 1 "$lunpath" "$bsopts" "$bsz" "$bstype" || {
		say "cannot create the $config LUN:"; tail -n 3 "$work/victim/tgtd.log" >&2
		"$tp" kill "$work/victim"; unmount_model
		return 1
	}
	url=$("$tp" url "$work/victim" "$iqn" 1)
	rm -f "$work/journal"	# never check an earlier cut's journal
	# shellcheck disable=SC2046
	"$crash" run --journal "$work/journal" --seed "$seed" --time 60 \
		$(workload_args "$config" "$seed") "$url" \
		2>>"$work/run.log" &
	wpid=$!
	ms=$((100 + (seed * 7919) % 600))
	sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
	if [ "$config" = restart ]; then
		restart_victim "$lunpath" "$bsopts" "$bsz" "$seed" ||
			{ "$tp" kill "$work/victim"; unmount_model; return 1; }
	fi
	power_cut "$config"		# the power goes: device first ...
	"$tp" kill "$work/victim"	# ... and the host with it
	[ -z "$wpid" ] || wait "$wpid" || { say "the workload failed:"
		tail -n 3 "$work/run.log" >&2; unmount_model; return 1; }
	unmount_model
	lunpath=$work/stable.img
	if in_ext4 "$config" "$seed"; then
		lunpath=$(mount_check_fs) || return 1
	fi
	"$tp" lun "$work/check" 1 1 "$lunpath" "mode=write-back" "$bsz" || return 1
	"$crash" check --journal "$work/journal" \
		"$("$tp" url "$work/check" "$iqn" 1)" 2>>"$work/check.log"
	"$tp" adm "$work/check" --lld iscsi --op delete --mode logicalunit \
		--tid 1 --lun 1
	return 0
}

"$tp" start "$work/check" "$module" >/dev/null && "$tp" target "$work/check" 1 "$iqn" || exit 1

declare -A W D L B N
eol='\n'; [ -t 2 ] && eol='\r'   # one progress line per cut
status=0
# blockdev and ext4 need loop devices (root, /dev/loop-control), ext4
# also mkfs.ext4: left out without
if [[ " $configs " == *" blockdev "* || " $configs " == *" ext4 "* ]]; then
	truncate -s 1M "$work/probe.img"
	if probe=$(losetup --find --show "$work/probe.img" 2>/dev/null); then
		losetup -d "$probe"
	else
		left_out "crashtest: blockdev, ext4" machine \
			"cannot attach a loop device"
		configs=$(sed 's/\bblockdev\b//; s/\bext4\b//' <<<"$configs")
	fi
	rm -f "$work/probe.img"
fi
if [[ " $configs " == *" nbdkit"* ]] &&
   ! { command -v nbdkit && command -v nbdfuse; } >/dev/null; then
	left_out "crashtest: nbdkit, nbdkit-discard" dependency \
		"no nbdkit or nbdfuse (packages nbdkit, libnbd-bin)"
	configs=$(sed 's/\bnbdkit\(-discard\)\?\b//g' <<<"$configs")
fi
if [[ " $configs " == *" ext4 "* ]] && ! command -v mkfs.ext4 >/dev/null; then
	left_out "crashtest: ext4" dependency "no mkfs.ext4 (e2fsprogs)"
	configs=$(sed 's/\bext4\b//' <<<"$configs")
fi
for config in $configs; do
	W[$config]=0 D[$config]=0 L[$config]=0 B[$config]=0 N[$config]=0
	for i in $(seq "$cuts"); do
		seed=$((seed0 * 100000 + i))
		line=$(one_cut "$config" "$seed") || { say "$config cut $i failed"; status=1; break; }
		read -r _ w _ d _ l _ b _ <<<"$line"
		[ -n "${b:-}" ] || { say "$config cut $i: no verdict"; status=1; break; }
		N[$config]=$((N[$config] + 1)); W[$config]=$((W[$config] + w))
		D[$config]=$((D[$config] + d)); L[$config]=$((L[$config] + l))
		B[$config]=$((B[$config] + b))
		printf 'crashtest: %-13s cut %4d/%d: %s%b' "$config" "$i" "$cuts" \
			"$line" "$eol" >&2
	done
	[ -t 2 ] && echo >&2
done

printf '%-13s %6s %9s %9s %6s %10s  %s\n' config cuts writes durable lost bad_blocks verdict
{
	echo "{\"cuts_per_config\":$cuts,\"results\":["
	sep=
	for config in $configs; do
		if [ "$config" = aio ] || [ "$config" = nbdkit-discard ]; then
			verdict="control: must lose data"
			[ "${L[$config]}" -gt 0 ] && verdict="$verdict - it did (oracle works)" ||
				{ verdict="$verdict - it did NOT: the oracle is blind"; status=1; }
		else
			verdict=ok
			[ $((L[$config] + B[$config])) -eq 0 ] || { verdict="CONTRACT BROKEN"; status=1; }
		fi
		# a run whose writes mostly failed proves nothing
		[ $((D[$config] * 4)) -ge "${W[$config]}" ] ||
			{ verdict="$verdict; too few durable writes: workload failed"; status=1; }
		[ "${N[$config]}" -eq "$cuts" ] ||
			{ verdict="INCOMPLETE: ${N[$config]} of $cuts cuts ran; $verdict"; status=1; }
		printf '%-13s %6d %9d %9d %6d %10d  %s\n' "$config" "${N[$config]}" \
			"${W[$config]}" "${D[$config]}" "${L[$config]}" "${B[$config]}" "$verdict" >&3
		printf '%s{"config":"%s","cuts":%d,"writes":%d,"durable_checked":%d,"lost":%d,"bad_blocks":%d}' \
			"$sep" "$config" "${N[$config]}" "${W[$config]}" "${D[$config]}" \
			"${L[$config]}" "${B[$config]}"
		sep=,
	done
	echo "]}"
} 3>&1 >"$json"
say "results: $json"
[ "$status" -eq 0 ] || keep=1	# cleanup keeps the details
exit "$status"
