#!/bin/bash
# stall-pool.sh: group flushes stuck on devices that no longer answer
# leave other LUNs' group flushes running.
# Every LUN's group flush runs on io-wq, io_uring's thread pool, one pool
# for tgtd's event thread, which by default runs at most 4 requests per
# CPU at once; glue/uring.c (iowq_bound) sizes it so that the ring's
# requests never queue behind each other.  Here 4 x CPUs + 1 write-back
# LUNs, each on a FUSE device model whose daemon is then stopped, each
# get a SYNCHRONIZE CACHE that cannot end, and a write-through LUN with
# write_sync=group (a group flush per write) on a plain file must still
# have its writes answered within the initiator's 8 s.  The stopped
# daemons stand in for a suspended ZFS pool or a dead NFS server, which
# this machine does not have.  With io-wq at its default size the writes
# time out.  Exit 0 when they are answered, 77 when skipped.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
sb=$top/tools/iscsi-syncbench
iqn=iqn.2026-11.org.syncguard:stall-pool-$$	# own counters: see syncbench.sh
say() { printf 'stall-pool: %s\n' "$*" >&2; }

cpus=$(getconf _NPROCESSORS_ONLN)
n=$((4 * cpus + 1))
if [ "$n" -gt 65 ]; then
	say "skipped: $cpus CPUs would need $n FUSE models to fill io-wq's default pool"
	exit 77
fi
work=$(mktemp -d "$top/build/stall-pool.XXXXXX") || exit 1
pids=
bg=
cleanup() {
	# the stopped daemons first: the flushes waiting on them could not end
	for p in $pids; do kill -CONT "$p" 2>/dev/null; done
	[ -n "$bg" ] && wait $bg 2>/dev/null
	"$tp" stop "$work/tgtd" >/dev/null 2>&1
	for i in $(seq "$n"); do fusermount3 -u "$work/m$i" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# mounted before tgtd starts: its private mount namespace copies them
for i in $(seq "$n"); do
	mkdir "$work/m$i" && truncate -s 16M "$work/img$i" &&
	"$top/tools/syncguard-devmodel" --image "$work/img$i" "$work/m$i" ||
		{ say "cannot mount FUSE model $i"; exit 1; }
done
"$tp" start "$work/tgtd" "$top/bs_syncguard.so" >/dev/null &&
"$tp" target "$work/tgtd" 1 "$iqn" || { say "cannot start tgtd"; exit 1; }
for i in $(seq "$n"); do
	"$tp" lun "$work/tgtd" 1 "$i" "$work/m$i/disk.img" "mode=write-back" ||
		{ say "cannot set up LUN $i"; exit 1; }
done
last=$((n + 1))
truncate -s 16M "$work/plain.img" &&
"$tp" lun "$work/tgtd" 1 "$last" "$work/plain.img" \
	"mode=write-through;write_sync=group" ||
	{ say "cannot set up LUN $last"; exit 1; }
u=$("$tp" url "$work/tgtd" "$iqn" 1)
u=${u%/1}
# the flushes this is about run on the ring (io-wq), not a worker
for i in $(seq "$last"); do
	ring=$("$top/tools/syncguard-stat" --json "$iqn" "$i" | jq -r '.[0].ring')
	if [ "$ring" = none ]; then
		say "FAIL: LUN $i's flushes do not run on io_uring here (the test proves nothing)"
		exit 1
	fi
done
if grep -qE "io-wq (keeps its default size|runs at most)" "$work/tgtd/tgtd.log"; then
	say "FAIL: $(grep -m1 -E 'io-wq (keeps|runs)' "$work/tgtd/tgtd.log")"
	exit 1
fi

for i in $(seq "$n"); do
	"$sb" -s none -q 1 -t 0.2 --no-progress "$u/$i" >/dev/null ||
		{ say "writes to LUN $i failed"; exit 1; }
	p=$(pgrep -f -- "--image $work/img$i ") ||
		{ say "cannot find model $i's daemon"; exit 1; }
	pids="$pids $p"
	kill -STOP "$p"
	"$sb" -s flush-only -q 1 -t 1 --timeout 0 --no-progress \
		-i "$iqn:f$i" "$u/$i" >/dev/null 2>&1 &
	bg="$bg $!"
done
sleep 2
# each stuck flush holds an io-wq thread: more than the default pool
pid=$(cat "$work/tgtd/pid")
wrk=$(cat /proc/"$pid"/task/*/comm 2>/dev/null | grep -c '^iou-wrk')
if [ "$wrk" -lt "$n" ]; then
	say "FAIL: $wrk io-wq threads in tgtd for $n stuck flushes (the test proves nothing)"
	exit 1
fi
out=$("$sb" -s none -q 4 -t 2 --timeout 8 --json --no-progress "$u/$last" 2>&1)
rc=$?
ops=$(jq -r '.results[0].ops // 0' <<<"$out" 2>/dev/null || echo 0)
stuck=0
for b in $bg; do
	kill -0 "$b" 2>/dev/null && stuck=$((stuck + 1))
done
if [ "$stuck" -ne "$n" ]; then
	say "FAIL: $((n - stuck)) of $n flushes on stopped daemons were answered (the test proves nothing)"
	exit 1
fi
if [ "$rc" -ne 0 ] || [ "${ops:-0}" -eq 0 ]; then
	say "FAIL: LUN $last's group-commit writes while $n flushes were stuck: exit $rc, $ops writes" \
	    "($(grep -m1 -i 'timed out\|error' <<<"$out"))"
	exit 1
fi
say "ok: $ops writes on LUN $last (group commit) answered while $n LUNs' flushes held $wrk io-wq threads"
exit 0
