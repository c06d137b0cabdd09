#!/bin/bash
# stall.sh: a command on the io_uring engine never waits on unrelated,
# stuck I/O.  Submission batching (bs_syncguard_uring.c) holds a read or
# write back while others are in the kernel; on the FUSE model with a
# long flush, io-wq's buffered writes to the file wait for that flush
# (the kernel holds the inode lock through fsync), and a read held behind
# them waited until the initiator timed out (helper-39, 3 of 3 runs).
# Here 16 writes are stuck behind a 15 s flush and a reader of cached
# blocks must get its reads answered within its 8 s timeout.
# Exit 0 when it holds.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
sb=$top/tools/iscsi-syncbench
iqn=iqn.2026-11.org.syncguard:stall-test
work=$(mktemp -d "$top/build/stall.XXXXXX") || exit 1
say() { printf 'stall: %s\n' "$*" >&2; }
cleanup() {
	echo "flush-ms 0" > "$work/m/.ctl" 2>/dev/null
	[ -n "${bg:-}" ] && wait $bg 2>/dev/null
	"$tp" stop "$work/tgtd" >/dev/null 2>&1
	fusermount3 -u "$work/m" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/m" && truncate -s 64M "$work/img" || exit 1
# mounted before tgtd starts: its private mount namespace copies it
"$top/tools/syncguard-devmodel" --image "$work/img" --flush-ms 20 "$work/m" ||
	{ say "cannot mount the FUSE model"; exit 1; }
"$tp" start "$work/tgtd" "$top/bs_syncguard.so" >/dev/null &&
"$tp" target "$work/tgtd" 1 "$iqn" &&
"$tp" lun "$work/tgtd" 1 1 "$work/m/disk.img" "mode=write-back;engine=uring" ||
	{ say "cannot set up the LUN"; exit 1; }
u=$("$tp" url "$work/tgtd" "$iqn" 1)

# the reader's blocks into the host page cache
"$sb" -r 100 -q 1 -S 1M -t 1 --no-progress "$u" >/dev/null ||
	{ say "warm-up reads failed"; exit 1; }
echo "flush-ms 15000" > "$work/m/.ctl"
"$sb" -s flush -q 1 -t 2 --timeout 0 --no-progress -i "$iqn:flusher" "$u" \
	>/dev/null 2>&1 &
bg=$!
sleep 1
"$sb" -s none -q 16 -t 2 --timeout 0 --no-progress -i "$iqn:writer" "$u" \
	>/dev/null 2>&1 &
writer=$!
bg="$bg $writer"
sleep 3
out=$("$sb" -r 100 -q 1 -S 1M -t 2 --timeout 8 --json --no-progress \
	-i "$iqn:reader" "$u" 2>&1)
rc=$?
ops=$(jq -r '.results[0].ops // 0' <<<"$out" 2>/dev/null || echo 0)
# the writer's 2 s are over: still running, its writes are stuck
if ! kill -0 "$writer" 2>/dev/null; then
	say "FAIL: the writes were not held up by the flush (the test proves nothing)"
	exit 1
fi
if [ "$rc" -eq 0 ] && [ "${ops:-0}" -gt 0 ]; then
	say "ok: $ops reads answered while 16 writes waited on a 15 s flush"
	exit 0
fi
say "FAIL: reads of cached blocks behind stuck writes: exit $rc, $ops reads" \
    "($(grep -m1 -i 'timed out\|error' <<<"$out"))"
exit 1
