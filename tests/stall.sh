#!/bin/bash
# stall.sh: a command on the io_uring engine never waits on unrelated,
# stuck I/O.  Submission batching (glue/uring.c) holds a read or
# write back while others are in the kernel; on the FUSE model with a
# long flush, io-wq's buffered writes to the file wait for that flush
# (the kernel holds the inode lock through fsync), and a read held behind
# them would wait until the initiator timed out.
# Here 16 writes are stuck behind a 15 s flush and a reader of cached
# blocks must get its reads answered within its 8 s timeout.
# Then: a LUN deleted while its final flush takes 15 s stops nothing else.
# tgt closes a backing store on its event thread, which runs every LUN's
# commands; a flush run there would leave another LUN without an answer
# for 15 s.  A second LUN's commands must be answered within 8 s, and
# tgtadm's delete must return, while that flush still runs.  The same for
# tgtadm's switch of a write-back LUN to WCE=0, which flushes first.
# Last: with engine=uring on a FUSE file (which takes no RWF_NOWAIT),
# reads and writes stuck on a stopped FUSE daemon stop no other LUN's
# commands, group flushes included.
# io_uring would run a FUSE write on tgtd's event thread (FUSE's poll
# calls every file writable, so io_uring tries the write there, and FUSE
# asks its daemon for the file's attributes first), so the engine sends
# such a file's reads and writes straight to io-wq (glue/uring.c,
# queue_io).
# Exit 0 when all of them hold.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
sb=$top/tools/iscsi-syncbench
iqn=iqn.2026-11.org.syncguard:stall-test-$$	# own counters: see syncbench.sh
work=$(mktemp -d "$top/build/stall.XXXXXX") || exit 1
say() { printf 'stall: %s\n' "$*" >&2; }
cleanup() {
	# a stopped daemon first: the commands waiting on it could not end
	[ -n "${daemon:-}" ] && kill -CONT "$daemon" 2>/dev/null
	echo "flush-ms 0" > "$work/m/.ctl" 2>/dev/null
	[ -n "${bg:-}" ] && wait $bg 2>/dev/null
	"$tp" stop "$work/tgtd" >/dev/null 2>&1
	fusermount3 -u "$work/m" 2>/dev/null
	fusermount3 -u "$work/m2" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/m" "$work/m2" && truncate -s 64M "$work/img" "$work/img2" ||
	exit 1
# mounted before tgtd starts: its private mount namespace copies them
"$top/tools/syncguard-devmodel" --image "$work/img" --flush-ms 20 "$work/m" &&
"$top/tools/syncguard-devmodel" --image "$work/img2" "$work/m2" ||
	{ say "cannot mount the FUSE models"; exit 1; }
"$tp" start "$work/tgtd" "$top/bs_syncguard.so" >/dev/null &&
"$tp" target "$work/tgtd" 1 "$iqn" &&
truncate -s 16M "$work/plain.img" &&
"$tp" lun "$work/tgtd" 1 1 "$work/m/disk.img" "mode=write-back;engine=uring" &&
"$tp" lun "$work/tgtd" 1 2 "$work/plain.img" "mode=write-through" ||
	{ say "cannot set up the LUNs"; exit 1; }
u=$("$tp" url "$work/tgtd" "$iqn" 1)
u2=$("$tp" url "$work/tgtd" "$iqn" 2)

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
else
	say "FAIL: reads of cached blocks behind stuck writes: exit $rc, $ops reads" \
	    "($(grep -m1 -i 'timed out\|error' <<<"$out"))"
	exit 1
fi

# Dirty the LUN at URL $1, make flushes take 15 s, run tgtadm with the
# rest of the arguments in the background, and LUN 2's commands
# meanwhile (their number in $ops): they must be answered and tgtadm
# must return while the flush ($2 names it) still runs.
during_slow_flush() {
	local url=$1 what=$2 adm rc out
	shift 2
	"$sb" -s none -q 4 -t 1 --no-progress "$url" >/dev/null ||
		{ say "writes before $what failed"; exit 1; }
	echo "flush-ms 15000" > "$work/m/.ctl"
	"$tp" adm "$work/tgtd" "$@" &
	adm=$!
	bg=$adm
	sleep 1
	out=$("$sb" -r 50 -q 1 -t 2 --timeout 8 --json --no-progress "$u2" 2>&1)
	rc=$?
	ops=$(jq -r '.results[0].ops // 0' <<<"$out" 2>/dev/null || echo 0)
	if [ "$rc" -ne 0 ] || [ "${ops:-0}" -eq 0 ] || kill -0 "$adm" 2>/dev/null; then
		say "FAIL: LUN 2 during $what: exit $rc, $ops commands; tgtadm" \
		    "$(kill -0 "$adm" 2>/dev/null && echo "still waiting" || echo returned)" \
		    "($(grep -m1 -i 'timed out\|error' <<<"$out"))"
		exit 1
	fi
}

# Let flushes run fast again and wait up to 20 s for the condition $1.
flush_then() {
	echo "flush-ms 0" > "$work/m/.ctl"
	for _ in $(seq 100); do
		eval "$1" && return 0
		sleep 0.2
	done
	return 1
}

lun3_wce() { "$top/tools/syncguard-stat" --json "$iqn" 3 | jq -r '.[0].wce'; }

# ---- a LUN's final flush (LUN delete) stops no other LUN ----
echo "flush-ms 0" > "$work/m/.ctl"
wait $bg 2>/dev/null
bg=
during_slow_flush "$u" "LUN 1's 15 s final flush" \
	--op delete --mode logicalunit --tid 1 --lun 1
if grep -q "lun 1: final flush" "$work/tgtd/tgtd.log"; then
	say "FAIL: the final flush was over before LUN 2's run (the test proves nothing)"
	exit 1
fi
if ! flush_then 'grep -q "lun 1: final flush done" "$work/tgtd/tgtd.log"'; then
	say "FAIL: LUN 1's final flush never finished: $(grep 'lun 1:' "$work/tgtd/tgtd.log" | tail -2)"
	exit 1
fi
say "ok: $ops commands on LUN 2 answered while LUN 1's final flush took 15 s"

# ---- tgtadm's switch to WCE=0 (it flushes first) stops no other LUN ----
"$tp" lun "$work/tgtd" 1 3 "$work/m/disk.img" "mode=write-back;engine=uring" ||
	{ say "cannot re-create the model's LUN"; exit 1; }
during_slow_flush "$("$tp" url "$work/tgtd" "$iqn" 3)" \
	"LUN 3's 15 s switch to WCE=0" --op update --mode logicalunit --tid 1 \
	--lun 3 --params mode_page=8:0:18:0x10:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0
if [ "$(lun3_wce)" != 1 ]; then
	say "FAIL: LUN 3 reports WCE=$(lun3_wce) before its flush is done (the test proves nothing, or the switch lied)"
	exit 1
fi
if ! flush_then '[ "$(lun3_wce)" = 0 ]'; then
	say "FAIL: LUN 3's switch to WCE=0 never finished (WCE=$(lun3_wce))"
	exit 1
fi
say "ok: $ops commands on LUN 2 answered while LUN 3's switch to WCE=0 flushed for 15 s"

# ---- tgtadm updates while a switch to WCE=0 still flushes ----
wce_page() { echo "mode_page=8:0:18:$1:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0"; }
lun3_flushes() { "$top/tools/syncguard-stat" --json "$iqn" 3 | jq -r '.[0].device_flushes'; }
adm3() { "$tp" adm "$work/tgtd" --op update --mode logicalunit --tid 1 --lun 3 --params "$1"; }
# Start a switch of LUN 3 from WCE=1 to 0 whose flush takes 3 s, send
# the updates $2... meanwhile; the LUN must end at WCE=$1 (test $3).
during_switch() {
	local want=$1 what=$3 f0 p
	adm3 "$(wce_page 0x14)" || { say "FAIL: WCE=1 on LUN 3"; exit 1; }
	"$sb" -s none -q 4 -t 1 --no-progress "$("$tp" url "$work/tgtd" "$iqn" 3)" >/dev/null
	f0=$(lun3_flushes)
	echo "flush-ms 3000" > "$work/m/.ctl"
	adm3 "$(wce_page 0x10)" && adm3 "$2" ||
		{ say "FAIL: tgtadm refused an update ($what)"; exit 1; }
	if [ "$(lun3_flushes)" != "$f0" ]; then
		say "FAIL: the switch's flush was over before the update (the test proves nothing)"
		exit 1
	fi
	flush_then '[ "$(lun3_flushes)" -gt "$f0" ]' ||
		{ say "FAIL: the switch's flush never ended"; exit 1; }
	sleep 0.5	# the switch's end, after its flush is counted
	if [ "$(lun3_wce)" != "$want" ]; then
		say "FAIL: $what: WCE=$(lun3_wce), not $want"
		exit 1
	fi
	say "ok: $what"
}
during_switch 1 "$(wce_page 0x14)" \
	"tgtadm's WCE=1 during a switch to WCE=0 stands, not dropped"
during_switch 0 "mode_page=2:0:14:0x80:0x80:0:0xa:0:0:0:0:0:0:0:0:0:0" \
	"another mode page's update during a switch to WCE=0 does not cancel it"

# ---- WCE=1 while the switch to 0 still waits for the writes in flight ----
# (on worker threads, the model's engine=auto, writes hold the write lock,
# stuck behind a 2 s flush: the switch has not turned WCE off yet, so a
# WCE=1 compared with the page would be dropped as equal, and the LUN
# would end at 0)
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 3 &&
"$tp" lun "$work/tgtd" 1 4 "$work/m/disk.img" "mode=write-back" ||
	{ say "cannot move the model to LUN 4"; exit 1; }
u4=$("$tp" url "$work/tgtd" "$iqn" 4)
adm4() { "$tp" adm "$work/tgtd" --op update --mode logicalunit --tid 1 --lun 4 --params "$1"; }
lun4_wce() { "$top/tools/syncguard-stat" --json "$iqn" 4 | jq -r '.[0].wce'; }
"$sb" -s none -q 4 -t 1 --no-progress "$u4" >/dev/null
echo "flush-ms 2000" > "$work/m/.ctl"
"$sb" -s flush -q 1 -t 4 --timeout 0 --no-progress -i "$iqn:f4" "$u4" >/dev/null 2>&1 &
bg="$!"
"$sb" -s none -q 8 -t 4 --timeout 0 --no-progress -i "$iqn:w4" "$u4" >/dev/null 2>&1 &
bg="$bg $!"
sleep 1
adm4 "$(wce_page 0x10)" && sleep 0.3 && adm4 "$(wce_page 0x14)" ||
	{ say "FAIL: tgtadm refused a WCE change under load"; exit 1; }
echo "flush-ms 0" > "$work/m/.ctl"
wait $bg
bg=
sleep 1
if [ "$(lun4_wce)" != 1 ]; then
	say "FAIL: tgtadm's WCE=1 while the switch to 0 waited for writes was dropped (WCE=$(lun4_wce))"
	exit 1
fi
say "ok: tgtadm's WCE=1 while a switch to WCE=0 waits for the writes in flight stands"

# ---- writes stuck on a stopped FUSE daemon stop no other LUN ----
# plp with 4 KiB blocks: O_DIRECT writes, which go through the ring
daemon=$(pgrep -f -- "--image $work/img2 ") ||
	{ say "cannot find the second model's daemon"; exit 1; }
"$tp" lun "$work/tgtd" 1 5 "$work/m2/disk.img" \
	"mode=plp;alloc_check=no;engine=uring" 4096 ||
	{ say "cannot set up the second model's LUN"; exit 1; }
u5=$("$tp" url "$work/tgtd" "$iqn" 5)
# group commit: its flushes run on io-wq, one pool for the tgtd, which
# LUN 5's stuck reads and writes share (sized for every request the
# ring holds: tests/stall-pool.sh)
truncate -s 16M "$work/plain6.img" &&
"$tp" lun "$work/tgtd" 1 6 "$work/plain6.img" \
	"mode=write-through;write_sync=group" ||
	{ say "cannot set up LUN 6"; exit 1; }
u6=$("$tp" url "$work/tgtd" "$iqn" 6)
"$sb" -s none -q 4 -t 1 --no-progress "$u5" >/dev/null ||
	{ say "writes to the second model failed"; exit 1; }
kill -STOP "$daemon"
"$sb" -s none -q 4 -t 2 --timeout 0 --no-progress -i "$iqn:w5" "$u5" \
	>/dev/null 2>&1 &
bg=$!
"$sb" -r 100 -q 32 -t 2 --timeout 0 --no-progress -i "$iqn:r5" "$u5" \
	>/dev/null 2>&1 &
bg="$bg $!"
sleep 1
out=$("$sb" -r 50 -q 4 -t 2 --timeout 8 --json --no-progress "$u6" 2>&1)
rc=$?
ops=$(jq -r '.results[0].ops // 0' <<<"$out" 2>/dev/null || echo 0)
w5=$(kill -0 ${bg%% *} 2>/dev/null && echo stuck || echo done)
kill -CONT "$daemon"
daemon=
wait $bg 2>/dev/null
bg=
if [ "$w5" != stuck ]; then
	say "FAIL: the writes to a stopped FUSE daemon were answered (the test proves nothing)"
	exit 1
fi
if [ "$rc" -ne 0 ] || [ "${ops:-0}" -eq 0 ]; then
	say "FAIL: LUN 6 while LUN 5's FUSE daemon was stopped: exit $rc, $ops commands" \
	    "($(grep -m1 -i 'timed out\|error' <<<"$out"))"
	exit 1
fi
say "ok: $ops commands on LUN 6 (group commit) answered while LUN 5's FUSE daemon was stopped"
exit 0
