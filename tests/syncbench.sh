#!/bin/bash
# syncbench.sh: tools/iscsi-syncbench against a private tgtd -- usage
# errors (one line, the synopsis, exit 2), --help and --man listing the
# same options and every one of them accepted, JSON that parses (jq) and
# says what the target reports, --compare ratios across runs with
# different labels, --plot writing a PNG, --cache-off turning WCE off for
# the run and back on after, --verify / --verify-only finding a block
# overwritten behind the target's back, Ctrl-C printing the results so
# far with exit 130, the iozone preset's shape, labels and JSON that
# cannot inject into CSV or gnuplot, a unit attention mid-run said once,
# a missing LUN named, each command's header corked with its data,
# syncguard-stat's and tgtd-private's errors, sweeps checked before they run
# (--bytes below one command, writes to a write-protected LUN, a preset
# beside the options it sets), --compare refusing a file without
# results, and a target killed mid-run ending the run instead of hanging
# it, per-session IOPS of sessions that ran out of free blocks
# under --verify, and open-loop runs: --rate achieving a rate well below
# capacity, flagging one far above it, latency counted from the intended
# time across a stalled target, --curve's steps and their --compare,
# --plot and --merge.  Exit 0 when all hold.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
# shellcheck source=scripts/leftout.sh
. "$top/scripts/leftout.sh"
sb=$top/tools/iscsi-syncbench
# the run's pid in the name: two runs on one host would publish their
# counters under one name and read none (/run/syncguard/TARGET)
iqn=iqn.2026-11.org.syncguard:syncbench-test-$$
work=$(mktemp -d "$top/build/syncbench.XXXXXX") || exit 1
trap '"$tp" stop "$work/tgtd" >/dev/null 2>&1; "$tp" stop "$work/tgtd2" >/dev/null 2>&1; rm -rf "$work"' EXIT
fails=0 checks=0
say() { printf 'syncbench: %s\n' "$*" >&2; }
ok() { checks=$((checks + 1)); }
bad() { checks=$((checks + 1)); fails=$((fails + 1)); say "FAIL: $*"; }
expect() { if eval "$2"; then ok; else bad "$1"; fi; }

# ---- usage, --help, --man (no target needed) ----
usage_case() {	# ARGS...: exit 2, one message line, then the synopsis
	local out rc
	out=$("$sb" "$@" 2>&1 >/dev/null); rc=$?
	if [ "$rc" -eq 2 ] && [ "$(sed -n 2p <<<"$out" | cut -c1-6)" = "usage:" ] &&
	   [ "$(wc -l <<<"$out")" -le 6 ]; then ok
	else bad "usage error for '$*': exit $rc, stderr: $(head -3 <<<"$out")"; fi
}
usage_case
usage_case --bogus
usage_case --time
usage_case -q 0 iscsi://127.0.0.1/x/1
usage_case -b 1m -q 1024 -n 64 iscsi://127.0.0.1/x/1	# 64 GiB of buffers
usage_case --interval 0.0001 iscsi://127.0.0.1/x/1	# 4,318 lines a second
usage_case -b 3k iscsi://127.0.0.1/x/1 extra
usage_case --sync sometimes iscsi://127.0.0.1/x/1
usage_case --full iscsi://127.0.0.1/x/1
usage_case --preset bonnie iscsi://127.0.0.1/x/1
usage_case --preset vdbench -q 4 iscsi://127.0.0.1/x/1	# would be ignored
usage_case --preset iozone --sessions 3 iscsi://127.0.0.1/x/1
usage_case --preset iozone --span 8m iscsi://127.0.0.1/x/1	# its files are its own
usage_case -t 5 --bytes 1m iscsi://127.0.0.1/x/1		# -t would be dropped
usage_case --compare --csv a.json b.json			# --csv would be ignored
usage_case --compare
usage_case http://127.0.0.1/x/1
usage_case -s flush-only -b 4k,64k iscsi://127.0.0.1/x/1	# one test run twice
usage_case -s flush-only -r 50 iscsi://127.0.0.1/x/1	# labelled 50% reads, none sent
usage_case --preset iozone --preset vdbench iscsi://127.0.0.1/x/1	# the last would win
usage_case iscsi://127.0.0.1:99999/iqn.x/1			# connection refused
# open loop: a rate that is none, a discipline no rate paces, --curve
# beside --rate (it sets its own), --arrivals alone
usage_case --rate 0 iscsi://127.0.0.1/x/1
usage_case --rate -200 iscsi://127.0.0.1/x/1
usage_case --rate fast iscsi://127.0.0.1/x/1
usage_case --rate 200 -s end iscsi://127.0.0.1/x/1	# one flush after the writes
usage_case --curve 10,50 --rate 200 iscsi://127.0.0.1/x/1
usage_case --curve 50,10 iscsi://127.0.0.1/x/1		# not rising
usage_case --curve 0,101 iscsi://127.0.0.1/x/1
usage_case --arrivals poisson iscsi://127.0.0.1/x/1	# no --rate or --curve
usage_case --rate 1000 --bytes 1m iscsi://127.0.0.1/x/1	# paced over no time
usage_case --curve 50 --bytes 1m iscsi://127.0.0.1/x/1
usage_case --arrivals bursty --rate 200 iscsi://127.0.0.1/x/1
usage_case --rate 200 --preset vdbench iscsi://127.0.0.1/x/1
usage_case --label $'\xff\xfe' iscsi://127.0.0.1/x/1	# invalid UTF-8 would make the JSON invalid
usage_case --label $'\xc0\xaf' iscsi://127.0.0.1/x/1	# an overlong '/'
for bad in 'iscsi://bob%hunter2@127.0.0.1:1/iqn.x/' 'ISCSI://bob%hunter2@127.0.0.1:1/iqn.x/1' \
	   'iscsi://bob%hun@ter2@127.0.0.1:1/iqn.x/1'; do	# upper-case scheme, '@' in the secret
	out=$("$sb" "$bad" 2>&1); rc=$?
	expect "a bad URL's message masks its CHAP secret, never printing it: $(head -1 <<<"$out")" \
		'[ $rc -eq 2 ] && grep -q "bob%\*\*\*@" <<<"$out" && ! grep -q "hun\|ter2" <<<"$out"'
done
out=$("$top/tools/syncguard-stat" iqn.2026-11.org.syncguard:none 1 --json 2>/dev/null); rc=$?
expect "syncguard-stat takes --json after the operands (not 'one argument too many')" \
	'[ $rc -eq 1 ] && [ "$out" = "[]" ]'
for a in --bogus "--watch iqn.x 1" "iqn.x abc" "iqn.x 1 extra"; do
	out=$("$top/tools/syncguard-stat" $a 2>&1); rc=$?
	expect "syncguard-stat $a: exit 2 with the reason (not the synopsis alone)" \
		'[ $rc -eq 2 ] && grep -q "^syncguard-stat: .* '"'"'" <<<"$out"'
done
# syncguard-devmodel: no mount over a file (its own image would read as
# I/O errors) or over a model still mounted (its .ctl would go to the new
# one)
dm=$top/tools/syncguard-devmodel
mkdir "$work/dm" && truncate -s 4M "$work/dm.img"
"$dm" --image "$work/dm.img" "$work/dm.img" 2>/dev/null; rc=$?
[ $rc -eq 0 ] && fusermount3 -u "$work/dm.img"
expect "syncguard-devmodel refuses a mount point that is a file (no mount over it)" '[ $rc -eq 1 ]'
rc=2
if "$dm" --image "$work/dm.img" "$work/dm"; then
	"$dm" --image "$work/dm.img" "$work/dm" 2>/dev/null; rc=$?
	[ $rc -eq 0 ] && fusermount3 -u "$work/dm"
	fusermount3 -u "$work/dm"
fi
expect "syncguard-devmodel refuses a mount point already mounted (no second model on it)" '[ $rc -eq 1 ]'
out=$("$tp" url "$work/none" "$iqn" 1 2>/dev/null); rc=$?
expect "tgtd-private url without a tgtd fails and prints no URL (not one without a port, exit 0)" \
	'[ $rc -eq 1 ] && [ -z "$out" ]'
out=$("$tp" lun "$work/none" 1 1 /x 2>&1); rc=$?
expect "tgtd-private lun without a tgtd fails with one reason (no tgtadm run with an empty -C)" \
	'[ $rc -eq 1 ] && ! grep -q tgtadm <<<"$out"'

help_opts=$("$sb" --help | grep -o -- '^  \(-., \)\?    --[a-z-]*\|^  -., --[a-z-]*' | grep -o -- '--[a-z-]*' | sort)
man_opts=$("$sb" --man | grep -o '^\(\\fB\\-.\\fR, \)\?\\fB\\-\\-[a-z-]*' | sed 's/.*\\-\\-/--/' | sort)
expect "--help and --man list the same options" '[ -n "$help_opts" ] && [ "$help_opts" = "$man_opts" ]'
unknown=
for o in $help_opts; do
	"$sb" "$o" 2>&1 | grep -q "unknown option" && unknown="$unknown $o"
done
expect "every option in --help is accepted (not:$unknown)" '[ -z "$unknown" ]'

# ---- against a private tgtd ----
"$tp" start "$work/tgtd" "$top/bs_syncguard.so" >/dev/null || exit 1
"$tp" target "$work/tgtd" 1 "$iqn" || exit 1
for l in 1:write-back 2:write-through; do
	truncate -s 64M "$work/lun${l%%:*}.img"
	"$tp" lun "$work/tgtd" 1 "${l%%:*}" "$work/lun${l%%:*}.img" "mode=${l#*:}" || exit 1
done
u1=$("$tp" url "$work/tgtd" "$iqn" 1)
u2=$("$tp" url "$work/tgtd" "$iqn" 2)
out=$("$tp" url "$work/tgtd" "$iqn-typo" 1 2>&1); rc=$?
expect "tgtd-private url of a target that tgtd does not have fails, naming it (no URL printed)" \
	'[ $rc -eq 1 ] && grep -q "no target $iqn-typo" <<<"$out"'
out=$("$tp" url "$work/tgtd" "$iqn" 9 2>&1); rc=$?
expect "tgtd-private url of a LUN the target does not have fails, naming it" \
	'[ $rc -eq 1 ] && grep -q "has no LUN 9" <<<"$out"'
out=$("$sb" -t 0.2 "$("$tp" url "$work/tgtd" "$iqn" 0)" 2>&1); rc=$?
expect "LUN 0 is named as tgt's controller (not 'READ CAPACITY failed: INVALID_OPERATION_CODE')" \
	'[ $rc -eq 1 ] && grep -q "LUN 0 is no block device (peripheral device type 0x0c" <<<"$out"'
out=$("$sb" -t 0.2 "${u1%/1}/7" 2>&1); rc=$?
expect "a LUN the target does not have is named as such, exit 1 (not 'cannot log in')" \
	'[ $rc -eq 1 ] && grep -q "LUN 7 does not exist there" <<<"$out"'

"$sb" -t 0.5 -q 1,4 -s fua --label wb --json --no-progress "$u1" >"$work/wb.json"
expect "a run exits 0" '[ $? -eq 0 ]'
"$sb" -t 0.5 -q 1,4 -s fua --label wt --json --no-progress "$u2" >"$work/wt.json"
expect "JSON parses, says WCE=1 on write-back and 0 on write-through, DPOFUA=1" \
	'[ "$(jq -r "[.target.wce, .target.dpofua, (.results|length), .results[0].workload, .results[1].queue_depth] | @tsv" "$work/wb.json")" = "$(printf "1\t1\t2\trand-write\t4")" ] &&
	 [ "$(jq -r .target.wce "$work/wt.json")" = 0 ]'
expect "JSON results have IOPS, percentiles and device flushes per op" \
	'jq -e ".results[] | select(.iops > 0 and .latency_us.p99 >= .latency_us.p50 and .device_flushes_per_op >= 0)" "$work/wb.json" >/dev/null'
expect "JSON results say how the LUN ran (write-back: the page cache, RWF_DSYNC writes O_DIRECT; the write_sync trial's way; the engine)" \
	'[ "$(jq -r ".results[1].target_writes" "$work/wb.json" | cut -c1-60)" = "page cache, RWF_DSYNC writes O_DIRECT, write_sync auto (now " ] &&
	 jq -r ".results[1].target_flush_batching" "$work/wt.json" | grep -q "^flushes at once\|^holds back flushes" &&
	 jq -r ".results[1].target_engine" "$work/wb.json" | grep -q "^io_uring (bsopts engine=auto), [0-9]* worker threads$"'

# write-back's sync loop: several commands in flight keep their plain
# writes cached (only a single writer's strict alternation makes them
# durable at once); write-through has none
"$sb" -t 1.5 -q 8 -s flush --json --no-progress "$u1" >"$work/loop.json"
expect "JSON says how write-back's sync loop ran: cached at QD 8 ($(jq -r '.results[0].target_sync_loop' "$work/loop.json"))" \
	'jq -r ".results[0].target_sync_loop" "$work/loop.json" | grep -q "^plain writes cached" &&
	 jq -r ".results[0].target_sync_loop" "$work/wt.json" | grep -q "^none (write-through" &&
	 "$top/tools/syncguard-stat" --json "$iqn" 1 | jq -e ".[0] | .sync_loop_way == \"cached\" and .sync_loop_rate.at_once == 0" >/dev/null &&
	 "$top/tools/syncguard-stat" --json "$iqn" 2 | jq -e ".[0].sync_loop_way == null" >/dev/null'

# the writes line and the JSON name the same way of write_sync's trial,
# on write-through too (statsfile.c builds the line apart from the JSON)
expect "syncguard-stat's writes line names the trial's way its JSON gives (write-through)" \
	'way=$("$top/tools/syncguard-stat" --json "$iqn" 2 | jq -r ".[0].write_sync_way") &&
	 line=$("$top/tools/syncguard-stat" "$iqn" 2 | grep "writes:") &&
	 case $way in
	 group) grep -q "(now group commit" <<<"$line" ;;
	 dsync) grep -q "(now RWF_DSYNC" <<<"$line" ;;
	 *) false ;;
	 esac'

"$sb" -t 1.2 --interval 0.5 --json --no-progress "$u1" >"$work/iv.json"
expect "--interval 0.5 over 1.2 s gives two intervals and the last, partial one" \
	'[ "$(jq -r ".results[0].intervals | length" "$work/iv.json")" = 3 ] &&
	 jq -e ".results[0].intervals[2][0] >= 1.1" "$work/iv.json" >/dev/null'

# a target that stalls across each boundary (tgtd stopped 0.5 s around
# it): the lines stay on the grid (timed from the last line + 1 s, with
# poll's 100 ms wait, they would come up to 0.1 s late, each one later
# than the last)
tpid=$(cat "$work/tgtd/pid")
( for k in 1 2 3; do sleep 0.8; kill -STOP "$tpid"; sleep 0.5; kill -CONT "$tpid"; sleep 0.2; done ) &
"$sb" -t 3.5 --interval 1 --json --no-progress "$u1" >"$work/iv2.json"
wait; kill -CONT "$tpid"
expect "--interval lines stay on a fixed grid while the target stalls (1.0, 2.0, 3.0 s)" \
	'jq -e "[.results[0].intervals[0:3][] | .[0]] as \$t | (\$t | length) == 3 and
		 ([range(3)] | all(. as \$i | (\$t[\$i] - \$i - 1) | fabs < 0.06))" "$work/iv2.json" >/dev/null'

expect "--compare takes --no-progress, which scripts pass everywhere" \
	'"$sb" --no-progress --compare "$work/wb.json" "$work/wt.json" >/dev/null'
cmp=$("$sb" --compare "$work/wb.json" "$work/wt.json")
expect "--compare matches runs with different labels by workload, with ratios" \
	'[ "$(awk "\$1 == \"wt\" && \$5 == 4 && \$8 ~ /^[0-9.]+$/" <<<"$cmp" | wc -l)" = 1 ]'
head -n 2 "$work/wb.json" >"$work/cut.json"	# a run killed after its first point
cat "$work/wb.json" "$work/wt.json" >"$work/two.json"	# appended with >>
expect "--compare reads what a run cut short wrote, and runs appended to one file" \
	'[ "$("$sb" --compare "$work/cut.json" | grep -c "^wb ")" = 1 ] &&
	 [ "$("$sb" --compare "$work/two.json" | grep -c "^w[bt] ")" = 4 ]'
# rows of runs saved without --label are named by their files; a ratio
# only between runs of one discipline (fua against flush would be quoted
# as the targets' difference); each row's errors beside it
"$sb" -t 0.3 -s fua --json --no-progress "$u1" >"$work/nolabel-fua.json"
"$sb" -t 0.3 -s flush --json --no-progress "$u1" >"$work/nolabel-flush.json"
"$sb" -t 0.3 -s fua --json --no-progress "$u2" >"$work/other-fua.json"
cmp2=$("$sb" --compare "$work/nolabel-fua.json" "$work/nolabel-flush.json" "$work/other-fua.json")
expect "--compare: rows named by file, no ratio across disciplines, errors shown" \
	'[ "$(awk "NR == 2 && \$1 == \"nolabel-fua\" && \$8 == \"1.00\" && \$NF == 0 ||
		  NR == 3 && \$1 == \"nolabel-flush\" && \$8 == \"-\" && \$NF == 0 ||
		  NR == 4 && \$1 == \"other-fua\" && \$8 ~ /^[0-9.]+\$/ && \$NF == 0" <<<"$cmp2" | wc -l)" = 3 ]'
jq . "$work/wb.json" >"$work/pretty.json"; jq -c . "$work/wt.json" >"$work/compact.json"
expect "--compare reads JSON that went through jq (pretty-printed, compacted) the same" \
	'[ "$("$sb" --compare "$work/pretty.json" "$work/compact.json" | sed "s|$work/[a-z]*.json||g")" = "$(sed "s|$work/[a-z]*.json||g" <<<"$cmp")" ]'
"$sb" --plot "$work/p.png" "$work/wb.json" "$work/wt.json" >/dev/null
expect "--plot writes a PNG" '[ "$(head -c 4 "$work/p.png" | od -An -c | tr -d " ")" = "211PNG" ]'

"$sb" -t 0.3 --cache-off --json --no-progress "$u1" >"$work/off.json"
expect "--cache-off runs with WCE=0" '[ "$(jq -r .target.wce "$work/off.json")" = 0 ]'
"$sb" -t 0.1 --json --no-progress "$u1" >"$work/after.json"
expect "--cache-off restores WCE=1" '[ "$(jq -r .target.wce "$work/after.json")" = 1 ]'
# a hang-up ends the run as Ctrl-C does, and restores WCE (the signal's
# default would end the process with WCE=0 left behind)
"$sb" -t 20 --cache-off --no-progress "$u1" >/dev/null 2>"$work/hup.err" &
pid=$!
sleep 1.5
kill -HUP "$pid"
wait "$pid"; rc=$?
"$sb" -t 0.1 --json --no-progress "$u1" >"$work/after.json"
expect "--cache-off ended by SIGHUP: exit 130 and WCE=1 again" \
	'[ $rc -eq 130 ] && [ "$(jq -r .target.wce "$work/after.json")" = 1 ]'
# the control session, idle for the whole run, dropped by the target
# (as a keepalive nobody answered would): the restore logs in again
"$sb" -t 3 --cache-off --no-progress "$u1" >/dev/null 2>"$work/drop.err" &
pid=$!
sleep 1
ctlsid=$("$tp" adm "$work/tgtd" --op show --mode conn --tid 1 |
	 awk '/^Session:/ { print $2 }' | sort -n | head -1)	# the first login
"$tp" adm "$work/tgtd" --op delete --mode conn --tid 1 --sid "$ctlsid" --cid 0
wait "$pid"; rc=$?
"$sb" -t 0.1 --json --no-progress "$u1" >"$work/after.json"
expect "--cache-off whose control session the target dropped: restored over a new one ($(tail -1 "$work/drop.err"))" \
	'[ $rc -eq 0 ] && grep -q "over a new session" "$work/drop.err" && [ "$(jq -r .target.wce "$work/after.json")" = 1 ]'

# every:N at QD16: a session's k-th SYNCHRONIZE CACHE goes only once its
# first 4k WRITEs are answered, as libiscsi's side of the wire sees it
# (tests/wirecheck.c; sent after the 4th write's answer alone, about
# half of the flushes left earlier writes uncovered)
rm -f "$work/order.log"
WIRECHECK_EVERY=4 WIRECHECK_LOG="$work/order.log" LD_PRELOAD="$top/build/wirecheck.so" \
	"$sb" -s every:4 -q 16 -t 1 --no-progress "$u1" >/dev/null 2>&1
expect "every:4's flushes wait for the 4 writes they cover ($(grep -c "sent before" "$work/order.log") early; $(tail -1 "$work/order.log"))" \
	'! grep -q "sent before" "$work/order.log" && grep -q "^flushes [1-9][0-9]* writes" "$work/order.log"'

# each point of a sweep draws its own offsets (tools/syncbench/run.c,
# point_rng): two points of 256 random 4 KiB writes over the LUN
# rewrite a few blocks by chance; the second point repeating the first's
# offsets would rewrite every block it writes (2048 and more)
rm -f "$work/sweep.log"
WIRECHECK_LOG="$work/sweep.log" LD_PRELOAD="$top/build/wirecheck.so" \
	"$sb" -s none -r 0 -q 1,2 --bytes 1m --seed 7 --no-progress "$u1" >/dev/null 2>&1
read -r _ rewritten < <(grep "^rewritten_blocks" "$work/sweep.log")
expect "each point of a sweep draws its own offsets (${rewritten:-?} of 4096 blocks written twice)" \
	'[ -n "$rewritten" ] && [ "$rewritten" -lt 512 ] && grep -q "^flushes 0 writes 512 " "$work/sweep.log"'

# one segment per command: the tool corks its socket around each pass's
# writes, so that a command's header leaves with its data, as the kernel
# initiator sends them (libiscsi alone sends them as two segments). Only
# the few setup commands libiscsi's synchronous calls send (INQUIRY,
# READ CAPACITY, MODE SENSE...) go uncorked; 64 KiB writes add Data-Out
# PDUs after tgt's R2Ts, which must be corked too.
for bs in 4k 64k; do
	rm -f "$work/cork.log"
	WIRECHECK_LOG="$work/cork.log" LD_PRELOAD="$top/build/wirecheck.so" \
		"$sb" -q 8 -b "$bs" -t 0.5 --no-progress "$u1" >/dev/null 2>&1
	read -r _ pdus _ uncorked < <(grep "^command_pdus" "$work/cork.log")
	expect "$bs writes: command and Data-Out headers sent corked (${pdus:-?} sent, ${uncorked:-?} uncorked)" \
		'[ "${pdus:-0}" -ge 500 ] && [ "${uncorked:-999}" -le 16 ]'
done

# a LUN that reports DPOFUA=0 (tests/wirecheck.c clears the bit in the
# MODE SENSE answers; tgt sets it for every LUN): the fua discipline
# measures no durability there, and the tool says so; not for none, and
# not where the LUN reports 1
WIRECHECK_DPOFUA0=1 LD_PRELOAD="$top/build/wirecheck.so" \
	"$sb" -s fua -t 0.2 --no-progress "$u1" >/dev/null 2>"$work/dpofua0.err"
WIRECHECK_DPOFUA0=1 LD_PRELOAD="$top/build/wirecheck.so" \
	"$sb" -s none -t 0.2 --json --no-progress "$u1" >"$work/dpofua0.json" 2>"$work/dpofua0-none.err"
"$sb" -s fua -t 0.2 --no-progress "$u1" >/dev/null 2>"$work/dpofua1.err"
expect "DPOFUA=0 with --sync fua: a note that fua measures no durability; none with --sync none, or DPOFUA=1" \
	'grep -q "reports DPOFUA=0" "$work/dpofua0.err" && [ "$(jq -r .target.dpofua "$work/dpofua0.json")" = 0 ] &&
	 ! grep -q DPOFUA "$work/dpofua0-none.err" && ! grep -q DPOFUA "$work/dpofua1.err"'

# the queue depth on the wire (IOPS x latency outside libiscsi's queue)
# and the time commands waited in that queue: reported, and no more in
# flight than asked
"$sb" -t 0.5 -q 8 --json --no-progress "$u1" >"$work/wire.json"
expect "the run reports its queue depth on the wire ($(jq -r '.results[0].queue_depth_on_wire' "$work/wire.json") of 8) and the initiator's queueing ($(jq -r '.results[0].initiator_queued_us' "$work/wire.json") us)" \
	'jq -e ".results[0] | .queue_depth_on_wire > 0 and .queue_depth_on_wire <= 8.05 and .initiator_queued_us >= 0" "$work/wire.json" >/dev/null'

# ---- open loop: --rate, --arrivals, --curve ----
# well below what the LUN does (thousands of IOPS): the asked rate is
# achieved (within 25%: the machine is shared), fixed or Poisson
for arr in fixed poisson; do
	"$sb" --rate 200 --arrivals $arr -t 2 -q 4 --json --no-progress "$u1" >"$work/rate-$arr.json"
	expect "--rate 200, $arr arrivals: about 200 IOPS achieved, sustained ($(jq -c '.results[0] | [.iops, .asked_iops, .arrivals, .rate_sustained]' "$work/rate-$arr.json"))" \
		'jq -e ".results[0] | .asked_iops == 200 and .arrivals == \"$arr\" and
			.iops >= 150 and .iops <= 250 and .rate_sustained and .latency_us.p99 != null" "$work/rate-$arr.json" >/dev/null'
done
# far above it: said, not hidden (achieved beside asked, flagged, the
# arrivals never sent counted), in JSON, text and CSV
"$sb" --rate 1000000 -s flush -q 1 -t 1 --json --no-progress "$u1" >"$work/rate-over.json"
expect "--rate far above capacity: achieved < asked and flagged ($(jq -c '.results[0] | [.iops, .asked_iops, .rate_sustained, .unsent]' "$work/rate-over.json"))" \
	'jq -e ".results[0] | .asked_iops == 1000000 and .iops > 0 and .iops < 500000 and
		.rate_sustained == false and .unsent > 0" "$work/rate-over.json" >/dev/null'
out=$("$sb" --rate 1000000 -s flush -q 1 -t 0.3 --no-progress "$u1" 2>&1)
expect "--rate far above capacity: the text says NOT SUSTAINED, with asked and achieved" \
	'grep -q "open loop: asked 1000000.0 IOPS (fixed arrivals), achieved [0-9]" <<<"$out" &&
	 grep -q "NOT SUSTAINED: the target answered [0-9]* of the [0-9]* arrivals due in the measured window, the last [0-9]* ms after it" <<<"$out"'
"$sb" --rate 1000000 -s flush -q 1 -t 0.3 --csv --no-progress "$u1" >"$work/rate-over.csv"
"$sb" --rate 100 -t 0.3 --csv --no-progress "$u1" >"$work/rate-ok.csv"
csv_col() {	# FILE COLUMN: the first row's value in the named column
	awk -F, -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i } NR == 2 { print $c }' "$1"
}
expect "--rate in CSV: asked_iops, arrivals and rate_sustained columns ($(tail -1 "$work/rate-over.csv" | cut -d, -f27-))" \
	'[ "$(csv_col "$work/rate-over.csv" asked_iops)" = 1000000.0 ] && [ "$(csv_col "$work/rate-over.csv" rate_sustained)" = 0 ] &&
	 [ "$(csv_col "$work/rate-ok.csv" asked_iops)" = 100.0 ] && [ "$(csv_col "$work/rate-ok.csv" arrivals)" = fixed ] &&
	 [ "$(csv_col "$work/rate-ok.csv" rate_sustained)" = 1 ]'
# behind at the end of the window: tgtd stopped from 0.8 s into a 1 s
# window (--start-at fixes it) until 0.4 s after it, with room for every
# arrival (-q 256).  Every arrival is sent and answered, the last ones
# 0.4 s after the window, far past the median latency: NOT SUSTAINED,
# though no arrival went unsent (rate.c, kept_up).
t0=$(( $(date +%s) + 5 ))
"$sb" --rate 200 -t 1 -q 256 --start-at "$t0" --json --no-progress "$u1" >"$work/rate-late.json" &
pid=$!
sleep "$(awk -v t="$t0" -v now="$(date +%s.%N)" 'BEGIN { d = t + 0.8 - now; printf "%.3f", (d > 0 ? d : 0) }')"
kill -STOP "$(cat "$work/tgtd/pid")"; sleep 0.6; kill -CONT "$(cat "$work/tgtd/pid")"
wait "$pid"
expect "--rate behind at the end of the window: not sustained, though nothing went unsent ($(jq -c '.results[0] | [.iops, .asked_iops, .rate_sustained, .unsent, .latency_us.max]' "$work/rate-late.json"))" \
	'jq -e ".results[0] | .rate_sustained == false and .unsent == 0 and .latency_us.max >= 300000" "$work/rate-late.json" >/dev/null'
# no coordinated omission: tgtd stopped 0.5 s into a 200 IOPS run with 4
# in flight; the ~100 arrivals due in the stall wait for it, and their
# latency, from their intended time, has the wait in it.  Timed from
# when they were sent (a closed loop's view), only the 4 commands held
# in the target would come back 250 ms old or more.
"$sb" --rate 200 -t 3 -q 4 --json --no-progress "$u1" >"$work/rate-stall.json" &
pid=$!
sleep 1
kill -STOP "$(cat "$work/tgtd/pid")"; sleep 0.5; kill -CONT "$(cat "$work/tgtd/pid")"
wait "$pid"
slow=$(jq 'def lo($i): if $i < 64 then $i else (($i / 64 | floor) + 5) as $e | (64 + ($i % 64)) * pow(2; $e - 6) end;
	[.results[0].latency_hist.bins[] | select(lo(.[0]) >= 250000000) | .[1]] | add // 0' "$work/rate-stall.json")
expect "--rate against a target stalled 0.5 s: $slow operations carry 250 ms or more (more than the 4 in flight), max $(jq '.results[0].latency_us.max' "$work/rate-stall.json") us" \
	'[ "$slow" -gt 8 ] && jq -e ".results[0].latency_us.max >= 400000" "$work/rate-stall.json" >/dev/null'
# --curve: the closed-loop maximum, then a result per percentage of it,
# rising
"$sb" --curve 10,50,90 -t 0.3 -q 2 --label c1 --json --no-progress "$u1" >"$work/curve.json"
expect "--curve 10,50,90: 4 results, the maximum then 10, 50, 90% of it ($(jq -c '[.results[] | [.curve_step, .curve_pct, .asked_iops, .iops]]' "$work/curve.json"))" \
	'jq -e ".results as \$r | (\$r | length) == 4 and \$r[0].curve_step == 1 and \$r[0].asked_iops == null and
		\$r[0].iops > 0 and ([\$r[1:][] | .curve_pct] == [10, 50, 90]) and
		([\$r[1:][] | .asked_iops] | . == sort and .[0] < .[2]) and
		all(\$r[1:][]; (.asked_iops - \$r[0].iops * .curve_pct / 100 | fabs) <= 0.1 and
			.curve_max_iops == \$r[0].iops and .latency_us.p50 != null and .latency_us.p99 != null)" "$work/curve.json" >/dev/null'
out=$("$sb" --curve -t 0.2 --no-progress "$u1" 2>&1)
expect "--curve alone: vdbench's steps, a table of them after ($(grep -c '^  [0-9]*%' <<<"$out") steps)" \
	'[ "$(awk "/^curve: / { t = 1; next } t && /^  (max|[0-9]+%) / { printf \"%s \", \$1 }" <<<"$out")" = "max 10% 50% 70% 80% 90% 100% " ]'
# --compare pairs a curve's steps by their percentage (not every step
# with the first file's maximum): a file against its copy is 1.00 each
cp "$work/curve.json" "$work/curve2.json"
cmp=$("$sb" --compare "$work/curve.json" "$work/curve2.json")
expect "--compare of two curves: step by step, with the asked rate and load" \
	'[ "$(awk "NR > 1 && \$8 == \"1.00\" && \$10 == \"1.00\" { printf \"%s \", \$NF }" <<<"$cmp")" = "max 10% 50% 90% max 10% 50% 90% " ]'
"$sb" --plot "$work/curve.png" "$work/curve.json" >"$work/curve-plot.out" 2>&1
expect "--plot of a curve draws latency against achieved IOPS ($(head -1 "$work/curve-plot.out"))" \
	'[ "$(head -c 4 "$work/curve.png" | od -An -c | tr -d " ")" = "211PNG" ] &&
	 grep -q "latency against achieved IOPS, 1 run" "$work/curve-plot.out"'
out=$("$sb" --merge "$work/curve.json" "$work/curve2.json" 2>&1 >/dev/null); rc=$?
expect "--merge refuses open-loop results (their asked rates would be lost)" \
	'[ $rc -eq 2 ] && grep -q "open-loop result" <<<"$out"'

# --merge: two processes started together (--start-at) on two LUNs,
# their results merged: operations and sessions add up, the histograms
# bin by bin, and the merged p99 is the p99 of the union of both runs'
# operations, computed here from their bins (in jq, with the buckets'
# own middles), not an average of the two p99s.  Each process runs in a
# network namespace of its own, reaching tgtd over a veth pair through
# a portal added for it: they stand in for two initiator hosts (one
# kernel, one clock here).  Where namespaces cannot be made, two
# processes on the host's loopback stand in, said out loud.
ns_up() {	# NAME INDEX: a namespace at 10.213.INDEX.2, this host .1
	ip netns add "$1" 2>/dev/null || return 1
	netns="$netns $1"
	ip link add "$1-h" type veth peer name "$1-n" &&
	ip link set "$1-n" netns "$1" &&
	ip addr add "10.213.$2.1/30" dev "$1-h" && ip link set "$1-h" up &&
	ip -n "$1" addr add "10.213.$2.2/30" dev "$1-n" &&
	ip -n "$1" link set "$1-n" up && ip -n "$1" link set lo up &&
	"$tp" adm "$work/tgtd" --lld iscsi --op new --mode portal \
		--param "portal=10.213.$2.1:$port" >/dev/null
}
netns=
trap 'for n in $netns; do ip link del "$n-h" 2>/dev/null; ip netns del "$n" 2>/dev/null; done;
	"$tp" stop "$work/tgtd" >/dev/null 2>&1; "$tp" stop "$work/tgtd2" >/dev/null 2>&1; rm -rf "$work"' EXIT
port=$(sed 's|iscsi://[^:]*:\([0-9]*\)/.*|\1|' <<<"$u1")
t0=$(( $(date +%s) + 3 ))
if ns_up "sbA$$" 1 && ns_up "sbB$$" 2; then
	ip netns exec "sbA$$" "$sb" -s fua -q 4 -t 1 --start-at "$t0" --json --no-progress \
		"iscsi://10.213.1.1:$port/$iqn/1" >"$work/m1.json" 2>"$work/m1.err" &
	ip netns exec "sbB$$" "$sb" -s fua -q 4 -t 1 --start-at "$t0" --json --no-progress \
		"iscsi://10.213.2.1:$port/$iqn/2" >"$work/m2.json" 2>"$work/m2.err"
	wait
	expect "two runs from two network namespaces, each over its own veth ($(jq -r '.url' "$work/m1.json" 2>/dev/null), $(jq -r '.url' "$work/m2.json" 2>/dev/null))" \
		'jq -e ".url | test(\"10.213.1.1\")" "$work/m1.json" >/dev/null && jq -e ".url | test(\"10.213.2.1\")" "$work/m2.json" >/dev/null'
else
	left_out "--merge of runs from two network namespaces" machine "no network namespace or veth here: two processes on loopback instead"
	"$sb" -s fua -q 4 -t 1 --start-at "$t0" --json --no-progress "$u1" >"$work/m1.json" 2>/dev/null &
	"$sb" -s fua -q 4 -t 1 --start-at "$t0" --json --no-progress "$u2" >"$work/m2.json" 2>/dev/null
	wait
fi
expect "--start-at: both runs record the agreed start ($t0)" \
	'[ "$(jq -r .start "$work/m1.json")" = "$(date -u -d "@$t0" +%Y-%m-%dT%H:%M:%SZ)" ] &&
	 [ "$(jq -r .start "$work/m2.json")" = "$(jq -r .start "$work/m1.json")" ]'
"$sb" --merge "$work/m1.json" "$work/m2.json" >"$work/merged.json"
union_p99=$(jq -s '
	def mid($i): if $i < 64 then $i else
		(($i / 64 | floor) + 5) as $e | pow(2; $e - 6) as $w |
		(64 + ($i % 64)) * $w + ($w / 2 | floor) end;
	[.[].results[0].latency_hist] as $h |
	([$h[].bins[]] | group_by(.[0]) | map([.[0][0], (map(.[1]) | add)]) | sort_by(.[0])) as $bins |
	([$bins[][1]] | add) as $n | (0.99 * $n + 0.999999 | floor) as $want |
	(reduce $bins[] as $b ({seen: 0, v: null};
		if .v == null then .seen += $b[1] | (if .seen >= $want then .v = mid($b[0]) else . end) else . end) | .v) as $v |
	([$h[].min_ns] | min) as $lo | ([$h[].max_ns] | max) as $hi |
	(if $v > $hi then $hi elif $v < $lo then $lo else $v end) / 1000 * 10 | round / 10' "$work/m1.json" "$work/m2.json")
expect "--merge: operations and sessions add up, and the merged p99 ($(jq '.results[0].latency_us.p99' "$work/merged.json") us) is the union's ($union_p99 us)" \
	'jq -e --slurpfile a "$work/m1.json" --slurpfile b "$work/m2.json" --argjson p "$union_p99" ".results[0] |
		.ops == (\$a[0].results[0].ops + \$b[0].results[0].ops) and .sessions == 2 and
		(.sources | length) == 2 and (.latency_us.p99 - \$p | fabs) < 0.11" "$work/merged.json" >/dev/null'
out=$("$sb" --merge "$work/merged.json" "$work/m1.json" 2>&1); rc=$?
expect "--merge of a merged file and one of its runs: exit 2, naming both (the merged file lists its runs)" \
	'[ $rc -eq 2 ] && grep -q "m1.json: the same run as another file, or in it .*merged.json" <<<"$out" &&
	 [ "$(jq ".merged_from | length" "$work/merged.json")" = 2 ]'
cp "$work/m1.json" "$work/m3.json"
sed -i 's/"block_size":4096/"block_size":8192/' "$work/m3.json"
out=$("$sb" --merge "$work/m1.json" "$work/m3.json" 2>&1); rc=$?
expect "--merge of runs of another block size: exit 2, naming the file and the field" \
	'[ $rc -eq 2 ] && grep -q "m3.json: another value than the first file.s: block_size" <<<"$out"'
out=$("$sb" -t 1 --start-at 1000 "$u1" 2>&1); rc=$?
expect "--start-at in the past is refused" '[ $rc -eq 2 ] && grep -q "in the past" <<<"$out"'

# Several URLs in one run: a process per LUN, started together, merged.
# LUN 1 is write-back and LUN 2 write-through, so the merged WCE is
# unknown (-1) and each source says its own; the merged p99 lies between
# the two LUNs' (the union's percentile cannot leave their range).
"$sb" -s fua -q 2 -t 1 --json --no-progress "$u1" "$u2" >"$work/multi.json" 2>"$work/multi.err"; rc=$?
expect "two URLs in one run: exit $rc, per-LUN sources that add up, WCE per LUN ($(jq -c '[.target.wce, (.results[0].sources[] | [.wce, .ops, .p99])]' "$work/multi.json" 2>/dev/null))" \
	'[ $rc -eq 0 ] && jq -e ".target.wce == -1 and (.results[0] | (.sources | length) == 2 and .sessions == 2 and
		.ops == (.sources | map(.ops) | add) and .sources[0].wce == 1 and .sources[1].wce == 0 and
		(.sources[0].source | endswith(\"/1\")) and (.sources[1].source | endswith(\"/2\")) and
		.latency_us.p99 >= 0.98 * (.sources | map(.p99) | min) and .latency_us.p99 <= 1.02 * (.sources | map(.p99) | max))" \
		"$work/multi.json" >/dev/null'
# --cache-off's mark survives a merge where every run had WCE forced
# off; LUN 2 (write-through) is at WCE=0 already, so not with it
"$sb" -t 0.3 --cache-off --json --no-progress "$u1" "$u2" >"$work/multi-off.json" 2>/dev/null
"$sb" -t 0.3 --cache-off --json --no-progress "$u1" >"$work/off2.json" 2>/dev/null
"$sb" --merge "$work/off.json" "$work/off2.json" >"$work/merged-off.json" 2>/dev/null
expect "--cache-off in merged results: forced off where every run's was ($(jq -c '.target | [.wce, .wce_forced_off]' "$work/merged-off.json" "$work/multi-off.json" 2>/dev/null | tr '\n' ' '))" \
	'jq -e ".target.wce == 0 and .target.wce_forced_off" "$work/merged-off.json" >/dev/null &&
	 jq -e ".target.wce == 0 and (.target.wce_forced_off | not)" "$work/multi-off.json" >/dev/null'
# a flush-only point moves no data: merged, as alone, 0 MB/s (not the
# flushes times the block size)
"$sb" -s flush-only -t 0.3 --json --no-progress "$u1" "$u2" >"$work/multi-fo.json" 2>/dev/null
expect "flush-only over two URLs: 0 MB/s ($(jq -c '.results[0] | [.ops, .mb_per_s]' "$work/multi-fo.json" 2>/dev/null))" \
	'jq -e ".results[0] | .ops > 0 and .mb_per_s == 0" "$work/multi-fo.json" >/dev/null'
# a signal to the whole process group (timeout(1) sends it to its child
# and to its group, as does kill -- -PGID) while --cache-off holds two
# LUNs at WCE=0: each LUN's process gets it once and restores its LUN (a
# second one, forwarded by the first process, made it quit at once)
truncate -s 16M "$work/lun10.img"
"$tp" lun "$work/tgtd" 1 10 "$work/lun10.img" "mode=write-back" >/dev/null || bad "LUN 10"
u10=$("$tp" url "$work/tgtd" "$iqn" 10)
timeout 2.5 "$sb" --cache-off --start-at $(( $(date +%s) + 1 )) -t 5 -s fua --no-progress \
	"$u1" "$u10" >/dev/null 2>"$work/grp.err"; rc=$?
w1=$("$sb" -t 0.1 --json --no-progress "$u1" 2>/dev/null | jq -r .target.wce)
w10=$("$sb" -t 0.1 --json --no-progress "$u10" 2>/dev/null | jq -r .target.wce)
expect "--cache-off over two URLs, its process group signalled (timeout): both LUNs back at WCE=1 (exit $rc, WCE $w1 $w10; $(grep -c "may still be off" "$work/grp.err") left off)" \
	'[ $rc -eq 124 ] && [ "$w1" = 1 ] && [ "$w10" = 1 ] && ! grep -q "may still be off" "$work/grp.err"'
# every block a run writes is unlike every other (a slot's buffer
# written again unchanged would let a deduplicating backend store next
# to nothing): 4 KiB writes at QD 1, sequential, from a fresh LUN
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 10 >/dev/null
truncate -s 0 "$work/lun10.img"; truncate -s 16M "$work/lun10.img"
"$tp" lun "$work/tgtd" 1 10 "$work/lun10.img" "mode=write-back" >/dev/null || bad "LUN 10 again"
"$sb" -p seq -q 1 -b 4k -s none --bytes 2m --no-progress "$u10" >/dev/null 2>&1
zero=$(head -c 4096 /dev/zero | md5sum)
written=$(split -b 4096 --filter=md5sum "$work/lun10.img" | grep -vc "^${zero%% *}")
distinct=$(split -b 4096 --filter=md5sum "$work/lun10.img" | grep -v "^${zero%% *}" | sort -u | wc -l)
expect "every 4 KiB block written is distinct ($distinct of $written)" \
	'[ "$written" -ge 256 ] && [ "$distinct" = "$written" ]'
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 10 >/dev/null
out=$("$sb" -s fua -q 2 -t 0.5 --no-progress "$u1" "${u1%/1}/7" 2>&1); rc=$?
expect "a missing LUN among several URLs: exit 1, named, the other LUN's results still printed" \
	'[ $rc -eq 1 ] && grep -q "/7: no results" <<<"$out" && grep -q "operations:" <<<"$out"'
usage_case --verify "$u1" "$u2"
usage_case --interval 1 "$u1" "$u2"
usage_case --rate 100 "$u1" "$u2"

# Latency per command: under -s flush an operation is a WRITE and its
# SYNCHRONIZE CACHE acknowledged as one.  Each command is timed from the
# moment it is handed to libiscsi, so every operation's latency is at
# least its WRITE's plus its SYNCHRONIZE CACHE's: the operation's mean
# is at least the sum of the two commands' means, and its p50 at least
# the WRITE's.  Counts: one of each per operation (give or take the
# operations in flight when the warm-up ended).
"$sb" -s flush -q 4 -t 1 --json --no-progress "$u1" >"$work/pc.json" 2>/dev/null
expect "per command on a flush run: $(jq -c '.results[0] | [.ops, .latency_us.mean, (.commands | map_values([.ops, .latency_us.mean]))]' "$work/pc.json")" \
	'jq -e ".results[0] | .ops as \$n | .commands as \$c |
		\$c.synchronize_cache.ops == \$n and \$c.write.ops == \$n and
		\$c.read.ops == 0 and \$c.write_fua.ops == 0 and \$c.write_fua.latency_us.p99 == null and
		.latency_us.mean >= 0.97 * (\$c.write.latency_us.mean + \$c.synchronize_cache.latency_us.mean) and
		.latency_us.p50 >= 0.97 * \$c.write.latency_us.p50 and
		(\$c.synchronize_cache.cdf | length) == 11" "$work/pc.json" >/dev/null'
"$sb" -s fua -q 2 -t 0.5 -r 30 --json --no-progress "$u1" >"$work/pcf.json" 2>/dev/null
expect "per command on a 30% read fua run: READs and WRITE FUAs apart, no plain WRITE or SYNCHRONIZE CACHE" \
	'jq -e ".results[0] | .commands as \$c | \$c.read.ops == .reads and \$c.write_fua.ops == .writes and
		\$c.write.ops == 0 and \$c.synchronize_cache.ops == 0" "$work/pcf.json" >/dev/null'
out=$("$sb" -s flush -q 2 -t 0.5 --no-progress "$u1" 2>/dev/null)
expect "the text table of a flush run shows WRITE and SYNCHRONIZE CACHE latency apart" \
	'grep -q "per command, us:" <<<"$out" && grep -Eq "^ +WRITE +[0-9]+ " <<<"$out" &&
	 grep -Eq "^ +SYNCHRONIZE CACHE +[0-9]+ " <<<"$out"'
out=$("$sb" -s flush -q 2 -t 0.5 --csv --no-progress "$u1" 2>/dev/null)
expect "CSV: the SYNCHRONIZE CACHE p99 column of a flush run is filled, the WRITE FUA one empty" \
	'awk -F, "NR == 1 { for (i = 1; i <= NF; i++) col[\$i] = i }
		  NR == 2 { exit !(\$col[\"synchronize_cache_lat_p99_us\"] > 0 && \$col[\"write_fua_lat_p99_us\"] == \"\" && \$col[\"synchronize_cache_ops\"] > 0) }" <<<"$out"'
out=$("$sb" --compare "$work/pc.json" "$work/pcf.json")
expect "--compare shows each run's WRITE and SYNCHRONIZE CACHE p99" \
	'grep -q "WRITE p99 *SYNC p99" <<<"$out" &&
	 awk "\$1 == \"pc\" && \$(NF-2) ~ /^[0-9]+$/ && \$(NF-1) ~ /^[0-9]+$/ { f = 1 } END { exit !f }" <<<"$out"'
expect "--merge adds each command's histogram" \
	'jq -e --slurpfile a "$work/m1.json" --slurpfile b "$work/m2.json" ".results[0].commands.write_fua.ops ==
		(\$a[0].results[0].commands.write_fua.ops + \$b[0].results[0].commands.write_fua.ops)" "$work/merged.json" >/dev/null'

# fio's language.  --fio-json writes fio's json+ layout: fio's own
# fio_jsonplus_clat2csv (Debian's fio package; code this project did not
# write) reads it, and its bins add up to each section's total_ios; a
# JSON made by fio itself is read by --compare beside a run of ours.
"$sb" -s flush -q 2 -t 0.5 -r 30 --fio-json --no-progress "$u1" >"$work/fj.json" 2>/dev/null
expect "--fio-json: a job with fio's read, write and sync sections, bins adding up to total_ios" \
	'jq -e ".jobs[0] | .\"job options\".fsync == \"1\" and .\"job options\".rw == \"randrw\" and
		.read.total_ios > 0 and .write.total_ios > 0 and (.sync.total_ios - .write.total_ios | fabs) <= 2 and
		([.write.clat_ns.bins[]] | add) == .write.total_ios and ([.sync.lat_ns.bins[]] | add) == .sync.total_ios and
		.write.clat_ns.percentile[\"99.000000\"] <= .write.clat_ns.max" "$work/fj.json" >/dev/null'
if command -v fio_jsonplus_clat2csv >/dev/null; then
	(cd "$work" && fio_jsonplus_clat2csv fj.json fjclat.csv >/dev/null 2>&1)
	expect "fio's fio_jsonplus_clat2csv reads --fio-json: write clat count $(awk -F, 'NR > 1 && $14 ~ /[0-9]/ { n += $14 } END { print n + 0 }' "$work/fjclat_job0.csv" 2>/dev/null) of $(jq '.jobs[0].write.total_ios' "$work/fj.json")" \
		'[ "$(awk -F, "NR > 1 && \$14 ~ /[0-9]/ { n += \$14 } END { print n + 0 }" "$work/fjclat_job0.csv")" = "$(jq ".jobs[0].write.total_ios" "$work/fj.json")" ]'
else
	left_out "fio_jsonplus_clat2csv reading --fio-json" dependency "no fio_jsonplus_clat2csv (package fio)"
fi
if command -v fio >/dev/null; then
	fio --name=kernel --filename="$work/fio.img" --size=8m --rw=randwrite --bs=4k \
		--ioengine=psync --fsync=1 --runtime=0.5 --time_based \
		--output-format=json+ >"$work/fio.json" 2>/dev/null
	"$sb" -s flush -q 1 -t 0.5 --json --no-progress "$u1" >"$work/ours.json" 2>/dev/null
	out=$("$sb" --compare "$work/ours.json" "$work/fio.json")
	expect "--compare reads fio's own JSON beside ours: one rand-write flush row of 4096 bytes with its IOPS ratio and SYNC p99 ($(grep '^fio ' <<<"$out"))" \
		'awk "\$1 == \"fio\" && \$2 == \"rand-write\" && \$3 == \"flush\" && \$4 == 4096 && \$5 == 1 &&
			\$8 ~ /^[0-9.]+$/ && \$9 == \"-\" && \$(NF-1) ~ /^[0-9]+$/ { f = 1 } END { exit !f }" <<<"$out"'
	# every field fio's json+ has in a job and in its sections, ours has
	# (a script reading write.bw_mean or usr_cpu must not fail on ours)
	missing=$(jq -n -r --slurpfile f "$work/fio.json" --slurpfile o "$work/fj.json" '
		($f[0].jobs[0]) as $a | ($o[0].jobs[0]) as $b |
		([$a | keys[] | select(. as $k | $b | has($k) | not)] +
		 [("read", "write", "trim", "sync") as $s | $a[$s] | keys[] |
		  select(. as $k | $b[$s] | has($k) | not) | "\($s).\(.)"]) | join(" ")')
	expect "--fio-json has every field of fio's own json+ job (missing: ${missing:-none})" \
		'[ -z "$missing" ] && jq -e ".jobs[0] | .iodepth_level[\"2\"] == 100 and
			([.latency_ns[], .latency_us[], .latency_ms[]] | add | . > 99.9 and . < 100.1) and
			.write.iops_samples == 1 and .write.iops_mean == .write.iops and .usr_cpu + .sys_cpu > 0" "$work/fj.json" >/dev/null'
else
	left_out "--compare reading fio's JSON" dependency "no fio (package fio)"
fi
# a mixed fio job's p99 is of its reads and writes together, as ours is:
# 900 reads of 0.1 ms and 100 writes, 95% within 2 ms, 99% within 10 ms:
# 99.5% of both within 2 ms (the writes' alone would read 10 ms)
jq -n '[1,5,10,20,30,40,50,60,70,80,90,95,99,99.5,99.9] as $p |
	def pct(f): [$p[] | {key: "\(.)", value: f}] | from_entries;
	{"fio version": "fio-3.33", jobs: [{jobname: "mix",
	 "job options": {rw: "randrw", rwmixread: "90", bs: "4k", iodepth: "1"},
	 read: {total_ios: 900, iops: 900, bw_bytes: 3686400,
		clat_ns: {percentile: pct(100000)}},
	 write: {total_ios: 100, iops: 100, bw_bytes: 409600,
		clat_ns: {percentile: pct(if . <= 90 then 1000000
					 elif . <= 95 then 2000000
					 else 10000000 end)}},
	 sync: {total_ios: 0}, error: 0}]}' >"$work/mix.json"
out=$("$sb" --compare "$work/mix.json" | awk '$1 == "mix" { print $9, $11 }')
expect "--compare: a fio randrw job's p99 is of both reads and writes (p99, WRITE p99: $out)" \
	'[ "$out" = "2000 10000" ]'
echo '{"fio version":"fio-3.33","jobs":[{"jobname":"x"}]}' >"$work/odd.json"
out=$("$sb" --compare "$work/ours.json" "$work/odd.json" 2>&1); rc=$?
expect "--compare of fio JSON of another shape: exit 2 naming the file and the field" \
	'[ $rc -eq 2 ] && grep -q "odd.json: fio JSON: a job without job options" <<<"$out"'
out=$("$sb" --version)
expect "--version prints the Makefile's version ($out)" \
	'[ "$out" = "iscsi-syncbench $(sed -n "s/^VERSION := //p" "$top/Makefile")" ]'
expect "the JSON records the run: tool version, host, start, command line" \
	'jq -e "(.tool_version | length) > 0 and .host == \"$(hostname)\" and (.start | test(\"^[0-9-]+T\")) and
		(.command_line | test(\"-s flush -q 1\"))" "$work/ours.json" >/dev/null'
sed 's/"tool_version":"[^"]*"/"tool_version":"0.1"/' "$work/m2.json" >"$work/m4.json"
out=$("$sb" --merge "$work/m1.json" "$work/m4.json" 2>&1); rc=$?
expect "--merge of runs of another tool version: exit 2 naming the field" \
	'[ $rc -eq 2 ] && grep -q "m4.json: another tool version than the first file.s: tool_version" <<<"$out"'

# Each check below fails on the code before its fix: secrets, open-loop
# rates, --merge, several URLs, per-command counts and fio input.
# A CHAP secret with '/' in it (base64) is masked everywhere: the user
# part ends at its '@', wherever the first '/' is.
sec="iscsi://alice%Ab/9+x=@127.0.0.1:$port/$iqn"
out=$("$sb" -s fua -t 0.2 --json --no-progress "$sec/1" 2>&1; "$sb" -s fua -t 0.2 --no-progress "$sec/1" "$sec/9" 2>&1)
expect "a CHAP secret holding '/' never shows, in JSON, text or a LUN's failure ($(grep -c 'alice%\*\*\*@' <<<"$out") masked)" \
	'! grep -q "Ab/9" <<<"$out" && grep -q "alice%\*\*\*@" <<<"$out"'
usage_case --rate 0x10 "$u1"
usage_case --rate 0.001 "$u1"
# an open loop is rated over its schedule: 1 operation in 2 s is 0.5 IOPS
"$sb" -s fua -t 2 --rate 0.5 --json --no-progress "$u1" >"$work/slow.json" 2>/dev/null
expect "--rate 0.5 -t 2: 0.5 IOPS over 2 s ($(jq -c '.results[0] | [.ops, .seconds, .iops]' "$work/slow.json"))" \
	'jq -e ".results[0] | .ops == 1 and .seconds >= 1.99 and (.iops - 0.5 | fabs) < 0.01" "$work/slow.json" >/dev/null'
# per-command counts are the operations' exactly, with a warm-up too
"$sb" -s flush -q 8 -n 2 -t 0.5 --warmup 0.3 --json --no-progress "$u1" >"$work/pcw.json" 2>/dev/null
expect "per-command counts equal the operations' after a warm-up ($(jq -c '.results[0] | [.ops, .commands.write.ops, .commands.synchronize_cache.ops]' "$work/pcw.json"))" \
	'jq -e ".results[0] | .ops == .commands.write.ops and .ops == .commands.synchronize_cache.ops" "$work/pcw.json" >/dev/null'
# --merge checks every point before it prints: nothing half-written
"$sb" -s fua -q 1,2 -t 0.2 --json --no-progress "$u1" >"$work/q12.json" 2>/dev/null
"$sb" -s fua -q 1,4 -t 0.2 --json --no-progress "$u2" >"$work/q14.json" 2>/dev/null
out=$("$sb" --merge "$work/q12.json" "$work/q14.json" 2>/dev/null); rc=$?
expect "--merge of files that differ at their second point: exit 2, nothing on stdout" '[ $rc -eq 2 ] && [ -z "$out" ]'
out=$("$sb" --merge "$work/m1.json" "$work/m1.json" 2>&1); rc=$?
expect "--merge of one run given twice: exit 2 (its operations would count twice)" \
	'[ $rc -eq 2 ] && grep -q "the same run as another file" <<<"$out"'
# several URLs interrupted (SIGINT to the parent alone, as kill(1) or
# timeout(1) send it) before any result: exit 130, JSON still JSON
out=$(timeout --preserve-status -s INT 1.5 "$sb" -s fua -t 5 --json --no-progress --start-at $(( $(date +%s) + 4 )) "$u1" "$u2" 2>/dev/null); rc=$?
expect "several URLs interrupted before their first result: exit $rc (130), valid JSON with no results" \
	'[ $rc -eq 130 ] && jq -e ".results == []" <<<"$out" >/dev/null'
if command -v fio >/dev/null; then
	fio --name=nj --filename="$work/fio.img" --size=8m --rw=randwrite --bs=4k --numjobs=2 \
		--ioengine=psync --runtime=0.3 --time_based --output-format=json >"$work/fio-nj.json" 2>/dev/null
	out=$("$sb" --compare "$work/ours.json" "$work/fio-nj.json")
	expect "fio numjobs=2 without group_reporting: two rows of one session each" \
		'[ "$(awk "\$1 == \"fio-nj\" && \$6 == 1" <<<"$out" | wc -l)" = 2 ]'
	# group_reporting given bare leaves no trace in fio's JSON: one job
	# of the name, two sessions
	fio --name=ng --filename="$work/fio.img" --size=8m --rw=randwrite --bs=4k --numjobs=2 \
		--group_reporting --ioengine=psync --runtime=0.3 --time_based \
		--output-format=json >"$work/fio-ng.json" 2>/dev/null
	out=$("$sb" --compare "$work/ours.json" "$work/fio-ng.json")
	expect "fio numjobs=2 with a bare --group_reporting: one row of two sessions" \
		'[ "$(awk "\$1 == \"fio-ng\" && \$6 == 2" <<<"$out" | wc -l)" = 1 ]'
	sed 's/"bs" : "4k"/"bs" : "4k-64k"/' "$work/fio.json" >"$work/fio-range.json"
	out=$("$sb" --compare "$work/ours.json" "$work/fio-range.json" 2>&1); rc=$?
	expect "a fio job of several transfer sizes is refused, not shown as its first (exit $rc)" \
		'[ $rc -eq 2 ] && grep -q "several transfer sizes" <<<"$out"'
fi
"$sb" -s flush-only -q 2 -t 0.3 --fio-json --no-progress "$u1" >"$work/fo.json" 2>/dev/null
out=$("$sb" --compare "$work/fj.json" "$work/fo.json")
expect "--fio-json read back: flush-only stays flush-only, a flush run keeps its operation p99" \
	'awk "\$1 == \"fo\" && \$2 == \"flush-only\" && \$3 == \"flush-only\" && \$7 > 0 { a = 1 }
	      \$1 == \"fj\" && \$3 == \"flush\" && \$9 ~ /^[0-9]+$/ { b = 1 } END { exit !(a && b) }" <<<"$out"'

# the offsets' seed: from the clock unless given, and printed
s1=$("$sb" -t 0.1 --no-progress "$u1" | awk '/^seed:/ { print $2 }')
s2=$("$sb" -t 0.1 --no-progress "$u1" | awk '/^seed:/ { print $2 }')
expect "two runs without --seed get different seeds ($s1, $s2), so a read run does not re-read what the write run before it wrote" \
	'[ -n "$s1" ] && [ -n "$s2" ] && [ "$s1" != "$s2" ]'
"$sb" -t 0.1 --seed 77 --json --no-progress "$u1" >"$work/seed.json"
expect "--seed 77 is the run's seed, in JSON too" '[ "$(jq -r .seed "$work/seed.json")" = 77 ]'

flushes0=$("$top/tools/syncguard-stat" --json "$iqn" 1 | jq '.[0].device_flushes')
"$sb" --bytes 4m -p seq -q 4 --verify --state "$work/state" --span 4m --no-progress --csv "$u1" >"$work/verify.csv"
expect "--verify passes on an honest target" '[ $? -eq 0 ]'
# its read-back is READ FUA=1 (the LUN reports DPOFUA=1): the write-back
# LUN flushed what it cached of plain writes before it answered
flushes1=$("$top/tools/syncguard-stat" --json "$iqn" 1 | jq '.[0].device_flushes')
expect "--verify reads back with FUA=1: write-back flushed first (device flushes $flushes0 -> $flushes1)" \
	'[ "$flushes1" -gt "$flushes0" ]'
# a span too small for the depth: the queue runs at about 4 of 32, under
# the label QD 32; the tool says so, and with a span with room it does
# not
"$sb" -t 1 -q 32 --verify --span 16k --no-progress "$u2" >/dev/null 2>"$work/starved.err"
"$sb" -t 1 -q 4 --verify --span 4m --no-progress "$u2" >/dev/null 2>"$work/full.err"
expect "--verify on a span too small for QD 32 says the depth it reached ($(head -c 200 "$work/starved.err"))" \
	'grep -q "verify: the queue ran at [0-4]\.[0-9] commands in flight of 32" "$work/starved.err" &&
	 ! grep -q "the queue ran at" "$work/full.err"'
expect "--verify's CSV row says what was read back, in verify columns" \
	'[ "$(awk -F, "NR == 1 { print \$24, \$25 } NR == 2 { print \$24, \$25 }" "$work/verify.csv" | tr "\n" " ")" = "verify_checked verify_mismatches 8192 0 " ]'
"$sb" --verify-only --state "$work/state" --span 4m "$u1" >/dev/null
expect "--verify-only passes on the same LUN" '[ $? -eq 0 ]'
out=$("$sb" --verify-only --state "$work/state" --span 4m "$u2" 2>&1); rc=$?
expect "--verify-only refuses a state file saved for another LUN (not every block reported lost)" \
	'[ $rc -eq 2 ] && grep -q "saved for LUN 1 of $iqn, not LUN 2" <<<"$out" && ! grep -q mismatches <<<"$out"'
out=$("$sb" --verify-only --state "$work/state" --span 4m --csv "$u1" 2>/dev/null)
expect "--verify-only --csv prints CSV (not the human line)" \
	'[ "$out" = "$(printf "verify_checked,verify_mismatches,verify_complete\n8192,0,1")" ]'
dd if=/dev/urandom of="$work/lun1.img" bs=4096 seek=3 count=1 conv=notrunc,fsync status=none
out=$("$sb" --verify-only --state "$work/state" --span 4m "$u1" 2>&1); rc=$?
expect "--verify-only finds the overwritten block by LBA" \
	'[ $rc -eq 1 ] && grep -q "verify: LBA 2[4-9]:" <<<"$out" && grep -q "8 mismatches" <<<"$out"'

"$sb" -t 30 -q 2 --no-progress "$u1" >"$work/int.out" 2>&1 &
pid=$!
sleep 1.5
kill -INT "$pid"
wait "$pid"; rc=$?
expect "Ctrl-C prints the results so far and exits 130" \
	'[ $rc -eq 130 ] && grep -q "IOPS.*(interrupted)" "$work/int.out"'
"$sb" -t 30 -q 2 --csv --no-progress "$u1" >"$work/int.csv" 2>/dev/null &
pid=$!
sleep 1.5
kill -INT "$pid"
wait "$pid"
expect "Ctrl-C in CSV: the row says interrupted" \
	'[ "$(awk -F, "NR == 1 { print \$22 } NR == 2 { print \$22 }" "$work/int.csv" | tr "\n" " ")" = "interrupted 1 " ]'
# Ctrl-C in the warm-up: nothing measured, and no latency of 0 us said
# for it: null in JSON, empty in CSV; --compare and --plot
# take such a file
"$sb" --warmup 5 -t 1 --json --no-progress "$u1" >"$work/warm.json" 2>/dev/null &
pid=$!
sleep 1
kill -INT "$pid"
wait "$pid"; rc=$?
expect "Ctrl-C in the warm-up: JSON latency null, no CDF, exit 130" \
	'[ $rc -eq 130 ] && jq -e ".results[0] | .ops == 0 and .latency_us.p99 == null and (.cdf | length) == 0" "$work/warm.json" >/dev/null'
# commands answered after the warm-up count, with their whole latency:
# tgtd stopped from 0.5 s to 1.5 s into a 1 s warm-up holds 4 commands
# across it, which come back about 1 s old (counting only commands
# issued after the warm-up left them out, and the window's first
# latency's worth of time empty)
"$sb" --warmup 1 -t 1 -q 4 --json --no-progress "$u1" >"$work/held.json" 2>/dev/null &
pid=$!
sleep 0.5
kill -STOP "$(cat "$work/tgtd/pid")"
sleep 1
kill -CONT "$(cat "$work/tgtd/pid")"
wait "$pid"
expect "a command held across the warm-up's end counts, with its latency ($(jq -r '.results[0].latency_us.max' "$work/held.json") us)" \
	'jq -e ".results[0].latency_us.max >= 500000" "$work/held.json" >/dev/null'
expect "JSON without --label: the top-level label is null (not \"\"), with --label that label" \
	'jq -e ".label == null" "$work/warm.json" >/dev/null && jq -e ".label == \"wb\"" "$work/wb.json" >/dev/null'
expect "--compare and --plot take a run with no operation" \
	'"$sb" --compare "$work/warm.json" "$work/wb.json" >/dev/null &&
	 "$sb" --plot "$work/warm.png" "$work/warm.json" "$work/wb.json" >/dev/null 2>&1 && [ -s "$work/warm.png" ]'
# Ctrl-C during a --verify run stops the writes and still checks them,
# and saves the state
rm -f "$work/int.state"
"$sb" -t 30 -q 4 --verify --state "$work/int.state" --span 4m --no-progress "$u1" >"$work/intv.out" 2>&1 &
pid=$!
sleep 1.5
kill -INT "$pid"
wait "$pid"; rc=$?
expect "Ctrl-C under --verify: read back, 0 mismatches, state saved, exit 130 ($(tail -2 "$work/intv.out" | tr '\n' ' '))" \
	'[ $rc -eq 130 ] && grep -q " 0 mismatches" "$work/intv.out" && [ -s "$work/int.state" ] &&
	 "$sb" --verify-only --state "$work/int.state" --span 4m "$u1" >/dev/null 2>&1'


# on a sparse 1 GiB LUN, which its writers cannot fill in the short form
rm -f "$work/iozone.log"
truncate -s 1G "$work/iozone.img"
"$tp" lun "$work/tgtd" 1 9 "$work/iozone.img" "mode=write-through" >/dev/null || bad "LUN 9"
WIRECHECK_LOG="$work/iozone.log" LD_PRELOAD="$top/build/wirecheck.so" \
	"$sb" --preset iozone --csv --no-progress "$("$tp" url "$work/tgtd" "$iqn" 9)" >"$work/iozone.csv"
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 9 >/dev/null
rm -f "$work/iozone.img"
expect "the iozone preset: 4 phases of 8 KiB, FUA writes and plain reads, 2 sessions" \
	'[ "$(awk -F, "NR > 1 && \$3 == 8192 && \$5 == 2 { print \$21 \":\" \$2 }" "$work/iozone.csv" | tr "\n" " ")" = "initial-writers:fua rewriters:fua random-readers:none random-writers:fua " ]'
# its random readers read only what its initial writers wrote, as
# iozone's stay in their files (reads of holes flatter a sparse LUN)
expect "the iozone preset reads only blocks it wrote ($(tail -1 "$work/iozone.log"))" \
	'grep -q "reads [1-9][0-9]* unwritten_reads 0$" "$work/iozone.log"'

"$sb" -t 0.2 --json --no-progress --label 'a,b' "$u1" >/dev/null 2>&1
expect "a label that would break CSV, JSON or gnuplot is a usage error" '[ $? -eq 2 ]'
"$sb" -t 0.2 -b 4k,16k --span 8k --json --no-progress "$u1" >"$work/bad.json" 2>/dev/null; rc=$?
expect "a sweep with a size the LUN cannot take fails before it runs (exit 2)" \
	'[ $rc -eq 2 ] && ! grep -q "\"iops\"" "$work/bad.json"'
printf '{"results":[{"label":"x","workload":"w\x27; system \x27touch %s/pwned\x27; plot \x27x","sync":"none","block_size":4096,"queue_depth":1,"sessions":1,"iops":5,"mb_per_s":1,"latency_us":{"p99":1},"cdf":[[50,1.0]]}]}\n' "$work" >"$work/evil.json"
"$sb" --plot "$work/evil.png" "$work/evil.json" >/dev/null 2>&1; rc=$?
expect "--plot does not run commands hidden in a JSON file (and plots it)" '[ $rc -eq 0 ] && [ -s "$work/evil.png" ] && [ ! -e "$work/pwned" ]'

fifo_dir=/run/syncguard/iqn.2026-11.org.syncguard:fifo-$$
mkdir -p "$fifo_dir" && mkfifo "$fifo_dir/lun1.stats"
timeout 10 "$top/tools/syncguard-stat" "${fifo_dir##*/}" 1 >/dev/null 2>&1; rc=$?
rm -rf "$fifo_dir"
expect "syncguard-stat does not hang on a FIFO named like a counters file" '[ $rc -eq 1 ]'
mkdir -p "$fifo_dir"
ver=$(awk '$2 == "SYNCGUARD_STATS_VERSION" { print $3 }' "$top/include/syncguard_stats.h")
{ printf "SGTS\\$(printf %03o "$ver")\0\0\0\0\0\0\0"; head -c 4096 /dev/zero | tr '\0' '\377'; } >"$fifo_dir/lun1.stats"
out=$("$top/tools/syncguard-stat" "${fifo_dir##*/}" 1 2>&1); rc=$?
rm -rf "$fifo_dir"
expect "syncguard-stat: a counters header with garbage after it is no counters file (not counters of 2^64-1)" \
	'[ $rc -eq 1 ] && grep -q "not a counters file" <<<"$out"'

# a second tgtd exporting the same target name: the counters file of
# that name is the first one's, and says nothing of this LUN
"$tp" start "$work/tgtd2" "$top/bs_syncguard.so" >/dev/null &&
	"$tp" target "$work/tgtd2" 1 "$iqn" && truncate -s 16M "$work/other.img" &&
	"$tp" lun "$work/tgtd2" 1 1 "$work/other.img" mode=write-through || exit 1
"$sb" -t 0.5 -s fua --json --no-progress "$("$tp" url "$work/tgtd2" "$iqn" 1)" >"$work/twin.json"
"$sb" -t 3 -s flush -q 8 --no-progress "$u1" >/dev/null 2>&1 &	# the first one busy
pid=$!
sleep 0.5
"$sb" -t 1 -s fua --json --no-progress "$("$tp" url "$work/tgtd2" "$iqn" 1)" >"$work/twin-busy.json"
wait "$pid"
ctl2=$(cat "$work/tgtd2/ctl")
sock_before=$(ls /var/run/tgtd/socket."$ctl2" /var/run/tgtd/socket."$ctl2".lock 2>/dev/null | wc -l)
"$tp" stop "$work/tgtd2" >/dev/null
expect "tgtd-private stop removes the control socket tgtd leaves (else they pile up, a pair per tgtd)" \
	'[ "$sock_before" -eq 2 ] && ! ls /var/run/tgtd/socket."$ctl2"* >/dev/null 2>&1'
# --cache-off against a target killed mid-run: the restore says the
# target did not answer (an older command's unit attention is not the
# reason)
"$tp" start "$work/tgtd2" "$top/bs_syncguard.so" >/dev/null &&
	"$tp" target "$work/tgtd2" 1 "$iqn" &&
	"$tp" lun "$work/tgtd2" 1 1 "$work/other.img" mode=write-back || exit 1
"$sb" --cache-off -s fua --timeout 3 -t 10 --no-progress "$("$tp" url "$work/tgtd2" "$iqn" 1)" >/dev/null 2>"$work/dead.err" &
pid=$!
sleep 1.5
"$tp" kill "$work/tgtd2"
wait "$pid"; rc=$?
expect "--cache-off on a killed target: the restore says it got no answer ($(grep refused "$work/dead.err"))" \
	'[ $rc -eq 1 ] && grep -q "MODE SELECT WCE=1 refused: no answer from the target" "$work/dead.err"'
expect "another busy tgtd's counters of the same target name are not this LUN's either" \
	'[ "$(jq -r "[.results[0].device_flushes_per_op, .results[0].target_writes, .results[0].target_engine] | @tsv" "$work/twin-busy.json")" = "$(printf "\t\t")" ]'
expect "another tgtd's counters of the same target name are not reported as this LUN's" \
	'[ "$(jq -r "[.results[0].device_flushes_per_op, .results[0].target_writes, .results[0].target_engine] | @tsv" "$work/twin.json")" = "$(printf "\t\t")" ]'

# a sync loop earlier on LUN 1 would make up to 256 more plain writes
# RWF_DSYNC (core/lun.c, loop_note_write): a plain write load ends it
"$sb" --bytes 2m -b 4k -q 8 --no-progress "$u1" >/dev/null 2>&1
# sizes as fio and the docs spell them: 4k, 4kb, 4KiB are 4096 bytes
out=$("$sb" --bytes 8KiB -b 4KiB,4kb -p seq --json --no-progress "$u1" 2>/dev/null |
	jq -c '[.results[].block_size, .results[].ops]')
expect "-b 4KiB,4kb --bytes 8KiB: two points of 2 writes of 4096 bytes: $out" \
	'[ "$out" = "[4096,4096,2,2]" ]'
out=$("$sb" -s end --bytes 16m -b 512 -p seq --json --no-progress "$u1" 2>/dev/null | jq '.results[0].device_flushes_per_op')
expect "one flush in 32768 operations is not 0 in JSON (not 0.0000): $out" \
	'awk -v v="$out" "BEGIN { exit !(v > 0 && v < 0.001) }"'
out=$("$sb" -s end --bytes 16m -b 512 -p seq --no-progress "$u1" 2>/dev/null | grep "device syncs per operation")
expect "one flush in 32768 operations in text: three digits, fixed notation (not 3.05e-05): $out" \
	'grep -Eq "target: 0\.0000[0-9]{3} device syncs" <<<"$out"'
out=$("$sb" -t 0.2 -S 5000 --no-progress "$u1" 2>&1); rc=$?
expect "--span not a multiple of the block size is refused (not cut to 9 blocks): $(head -1 <<<"$out")" \
	'[ $rc -eq 2 ] && grep -q "not a multiple of the LUN" <<<"$out"'
out=$("$sb" -t 0.2 -s flush-only --json --no-progress "$u1" 2>/dev/null | jq -r '.results[0].workload')
expect "a flush-only run is named flush-only (not rand-write)" '[ "$out" = flush-only ]'
out=$("$sb" -t 0.2 -p seq -R 50 --json --no-progress "$u1" 2>/dev/null | jq -r '.results[0].workload')
expect "a half-random run is named rand50-write (not rand-write)" '[ "$out" = rand50-write ]'
out=$("$sb" -t 0 "$u1" 2>&1)
expect "--time 0 says what a time must be" 'grep -q "more than 0" <<<"$out"'

out=$("$sb" -s end --bytes 2m -b 64k -p seq -n 2 --split-span -S 1m --no-progress "$u1" 2>&1 >/dev/null)
out2=$("$sb" -s end --bytes 512k -b 64k -p seq -n 2 --split-span -S 1m --no-progress "$u1" 2>&1 >/dev/null)
expect "--bytes beyond a session's part of the span is said to wrap, and only then (else iozone -e style runs rewrite it silently)" \
	'grep -q "each session moves 2097152 bytes within its part of the span of 524288 bytes: it wraps, 4.0 times over" <<<"$out" &&
	 ! grep -q "wraps" <<<"$out2"'
# --split-span among 3 sessions of a 40 KiB span on a LUN with 512-byte
# logical and 4096-byte physical blocks: each part starts on a physical
# block (an equal share, 13,312 bytes, would start two parts 1 and 2 KiB
# into one): one 4 KiB write each lands in 4 KiB chunks 0, 3 and 6
truncate -s 1M "$work/split.img"
"$tp" lun "$work/tgtd" 1 8 "$work/split.img" "mode=write-back" >/dev/null || bad "LUN 8"
u8=$("$tp" url "$work/tgtd" "$iqn" 8)
"$sb" -s flush --bytes 4k -b 4k -p seq -n 3 --split-span -S 40k --json --no-progress "$u8" >"$work/split.json" 2>/dev/null
chunks=$(for i in $(seq 0 9); do
	dd if="$work/split.img" bs=4k skip="$i" count=1 status=none | tr -d '\0' | grep -q . && echo "$i"
done | tr '\n' ' ')
expect "--split-span parts start on the LUN's physical blocks (4 KiB chunks written: $chunks)" \
	'[ "$(jq -r .target.physical_block_size "$work/split.json")" = 4096 ] && [ "$chunks" = "0 3 6 " ]'
# and the data written does not compress (a compressing backend would
# flatter a repeating pattern: 4 KiB of one compressed to 321 bytes)
packed=$(dd if="$work/split.img" bs=4k count=1 status=none | gzip -9 -c | wc -c)
expect "write data does not compress (4096 bytes gzip to $packed)" '[ "$packed" -ge 4000 ]'
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 8 >/dev/null

out=$("$sb" --bytes 1k --no-progress "$u1" 2>&1); rc=$?
expect "--bytes less than one command is a usage error (not a whole one moved)" \
	'[ $rc -eq 2 ] && grep -q "less than one command" <<<"$out"'
out=$("$sb" --compare "$work/wb.json" "$work/iozone.csv" 2>&1); rc=$?
expect "--compare names a file with no results in it and fails (not skipped)" \
	'[ $rc -eq 1 ] && grep -q "iozone.csv: no iscsi-syncbench --json results" <<<"$out"'
truncate -s 16M "$work/lun3.img"
"$tp" lun "$work/tgtd" 1 3 "$work/lun3.img" "mode=write-back" &&
	"$tp" adm "$work/tgtd" --op update --mode logicalunit --tid 1 --lun 3 --params readonly=1 || exit 1
u3=$("$tp" url "$work/tgtd" "$iqn" 3)
out=$("$sb" -t 5 --no-progress "$u3" 2>&1); rc=$?
expect "writes to a write-protected LUN are refused before they run (not failing for the whole -t)" \
	'[ $rc -eq 2 ] && grep -q "write protected" <<<"$out"'
out=$("$sb" --preset vdbench --no-progress "$u3" 2>&1); rc=$?
expect "a preset that writes is refused on a write-protected LUN (not run with its reads alone)" \
	'[ $rc -eq 2 ] && grep -q "write protected" <<<"$out"'
"$sb" -t 0.2 -r 100 --json --no-progress "$u3" >"$work/wp.json"
expect "reads of a write-protected LUN run, and JSON says write_protected" \
	'[ $? -eq 0 ] && [ "$(jq -r .target.write_protected "$work/wp.json")" = true ] &&
	 [ "$(jq -r .target.write_protected "$work/wb.json")" = false ]'

"$sb" --verify-only --no-progress "$u1" >/dev/null 2>&1
expect "--verify-only without --state is a usage error (it would pass any data)" '[ $? -eq 2 ]'
# sessions out of free blocks (--verify keeps writes to a block apart)
# rated as done at that moment would show per-session IOPS in the
# millions
out=$("$sb" -t 1 -q 64 -n 4 -b 512 --verify --span 16k --json --no-progress "$u2")
expect "no session of a timed run is rated above the whole run (--verify on 16 KiB)" \
	'jq -e ".results[0] | .ops > 0 and .session_iops.max <= .iops * 1.001" <<<"$out" >/dev/null'

# a hung target (stopped, its sockets open): libiscsi times the commands
# out, which is no answer, so a --bytes run gives up instead of issuing
# commands for ever, and a --time one waits on no logout
for mode in "--bytes 1g" "-t 2"; do
	# shellcheck disable=SC2086
	"$sb" $mode -q 4 -s flush --timeout 2 --no-progress "$u1" >/dev/null 2>&1 &
	pid=$!
	sleep 1
	kill -STOP "$(cat "$work/tgtd/pid")"
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		kill -9 "$pid"; bad "$mode: a run against a hung target still runs 10 s later"
	else
		wait "$pid"; rc=$?
		expect "$mode: a hung target: exit 1 within 10 s" '[ $rc -eq 1 ]'
	fi
	kill -CONT "$(cat "$work/tgtd/pid")"
done

# --cache-off, and a second Ctrl-C while the target hangs: the tool quits
# at once, and says that the LUN's write cache may still be off
"$sb" --cache-off -t 10 -q 4 --no-progress "$u1" >/dev/null 2>"$work/wce.err" &
pid=$!
sleep 1
kill -STOP "$(cat "$work/tgtd/pid")"
kill -INT "$pid"; sleep 0.5; kill -INT "$pid"
wait "$pid"; rc=$?
kill -CONT "$(cat "$work/tgtd/pid")"
expect "a second Ctrl-C with the write cache turned off says it may still be off (exit 130)" \
	'[ $rc -eq 130 ] && grep -q "write cache may still be off (WCE=0)" "$work/wce.err"'
"$tp" adm "$work/tgtd" --op update --mode logicalunit --tid 1 --lun 1 --params \
	mode_page=8:0:18:0x14:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0

expect "tgtd.log: the write-through LUN on a sparse file says it is slow, the write-back one does not" \
	'grep -q "lun 2: the file has holes" "$work/tgtd/tgtd.log" && ! grep -q "lun 1: the file has holes" "$work/tgtd/tgtd.log"'

# a plp LUN: its counters and its tgtd.log line say nothing of
# RWF_DSYNC or of flush trials, which it has none of
dd if=/dev/zero of="$work/plp.img" bs=1M count=8 conv=fsync status=none
"$tp" lun "$work/tgtd" 1 6 "$work/plp.img" "mode=plp" >/dev/null || bad "plp LUN 6"
out=$("$top/tools/syncguard-stat" "$iqn" 6)
expect "syncguard-stat on plp: no write_sync or flush batching line ($(grep writes: <<<"$out"))" \
	'grep -q "writes: .*no flushes (plp)" <<<"$out" && grep -q "flush batching: none (plp" <<<"$out" &&
	 ! grep -q "write_sync\|epochs" <<<"$out" && grep -q "median - us" <<<"$out" &&
	 "$top/tools/syncguard-stat" --json "$iqn" 6 | jq -e ".[0] | .write_sync_way == null and .batch_way == null" >/dev/null'
expect "tgtd.log's plp line says no RWF_DSYNC" \
	'grep "lun 6: .*mode=plp" "$work/tgtd/tgtd.log" | grep -q "writes O_DIRECT" &&
	 ! grep "lun 6: .*mode=plp" "$work/tgtd/tgtd.log" | grep -q RWF_DSYNC'
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 6 >/dev/null

# the bsopts that switch a mechanism off, the engine and the worker count
# show in the counters as the LUN runs them (text and JSON); LUN 1, a
# file of this build directory with engine=auto, runs on the ring
dd if=/dev/zero of="$work/off.img" bs=1M count=8 conv=fsync status=none
"$tp" lun "$work/tgtd" 1 7 "$work/off.img" \
	"mode=write-back;flush_batch=off;sync_loop=off;workers=3;engine=threads" >/dev/null ||
	bad "LUN 7 with mechanisms off"
out=$("$top/tools/syncguard-stat" "$iqn" 7)
expect "syncguard-stat says flush_batch=off, sync_loop=off, engine=threads and 3 worker threads ($(grep "worker threads" <<<"$out"))" \
	'grep -q "flush batching: off (bsopts flush_batch=off" <<<"$out" &&
	 grep -q "sync loop: off (bsopts sync_loop=off" <<<"$out" &&
	 grep -q "engine: threads (bsopts engine=threads), 3 worker threads$" <<<"$out" &&
	 "$top/tools/syncguard-stat" --json "$iqn" 7 | jq -e ".[0] | .workers == 3 and .flush_batch == \"off\" and .batch_way == null and .sync_loop == \"off\" and .sync_loop_way == null and .engine == \"threads\" and .ring == \"none\"" >/dev/null &&
	 "$top/tools/syncguard-stat" "$iqn" 1 | grep -q "engine: io_uring (bsopts engine=auto), [0-9]* worker threads$" &&
	 "$top/tools/syncguard-stat" --json "$iqn" 1 | jq -e ".[0] | .workers >= 32 and .flush_batch == \"auto\" and .sync_loop == \"auto\" and .engine == \"auto\" and .ring == \"all\"" >/dev/null'
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 7 >/dev/null

# a unit attention during a run is retried, and said once with its
# sense (not only counted as a retry): here tgtadm turns the write
# cache off and on under the run (MODE PARAMETERS CHANGED)
"$sb" -t 3 -q 4 --json --no-progress "$u1" >"$work/ua.json" 2>"$work/ua.err" &
pid=$!
sleep 1
for wce in 0x10 0x14; do
	"$tp" adm "$work/tgtd" --op update --mode logicalunit --tid 1 --lun 1 --params \
		mode_page=8:0:18:$wce:0:0xff:0xff:0:0:0xff:0xff:0xff:0xff:0x80:0x14:0:0:0:0:0:0
	sleep 0.5
done
wait "$pid"; rc=$?
expect "a unit attention mid-run: exit 0, said once with its ASC/ASCQ ($(head -c 300 "$work/ua.err"))" \
	'[ $rc -eq 0 ] && [ "$(grep -c "unit attention.*0x2a01 MODE PARAMETERS CHANGED" "$work/ua.err")" = 1 ]'
# ... and counted in the result: the unit attentions, the operations
# retried (their latency, backoff included, in the distribution with
# every other operation's, and also apart), and that the mode
# parameters changed under the run
expect "a unit attention mid-run is in the result ($(jq -c '.results[0] | [.unit_attentions, .retried.ops, .ops, .latency_hist.count, .mode_parameters_changed]' "$work/ua.json"))" \
	'jq -e ".results[0] | .unit_attentions >= 1 and .retried.ops >= 1 and .retried.ops <= .ops and
		.latency_hist.count == .ops and .latency_us.max >= .retried.latency_us.max and
		.retried.latency_us.max != null and .mode_parameters_changed" "$work/ua.json" >/dev/null'

# a store stamped earlier with another logical block size: its stale
# stamps are no mismatch of this run (no torn blocks reported, no exit
# 1); a stamp written through the same block size at the wrong LBA
# still is
truncate -s 8M "$work/bs.img"
seed=0
for bsz in 512 4096 256 4096; do	# another seed each: the same one rewrites the same blocks
	seed=$((seed + 1))
	"$tp" lun "$work/tgtd" 1 5 "$work/bs.img" "mode=write-back" "$bsz" >/dev/null || bad "LUN 5 with $bsz-byte blocks"
	out=$("$sb" -s none -b 4k -q 8 --bytes 256k --seed $seed --verify -S 8m --state "$work/bs.state" --no-progress "$("$tp" url "$work/tgtd" "$iqn" 5)" 2>&1); rc=$?
	expect "--verify on a store stamped before with another block size ($bsz now)" \
		'[ $rc -eq 0 ] && grep -q " 0 mismatches" <<<"$out"'
	"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 5
done
"$tp" lun "$work/tgtd" 1 5 "$work/bs.img" "mode=write-back" 512 >/dev/null
"$sb" -s none -b 512 -q 1 -p seq --bytes 512 --verify -S 8m --state "$work/bs.state" \
	--no-progress "$("$tp" url "$work/tgtd" "$iqn" 5)" >/dev/null 2>&1	# LBA 0
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 5
dd if="$work/bs.img" of="$work/bs.img" bs=512 skip=0 seek=300 count=1 conv=notrunc,fsync status=none
"$tp" lun "$work/tgtd" 1 5 "$work/bs.img" "mode=write-back" 512 >/dev/null
out=$("$sb" --verify-only --state "$work/bs.state" --no-progress "$("$tp" url "$work/tgtd" "$iqn" 5)" 2>&1); rc=$?
expect "--verify-only finds a stamp copied to another LBA of the same block size" \
	'[ $rc -eq 1 ] && grep -q "verify: LBA 300: .*torn or misplaced" <<<"$out"'
"$tp" adm "$work/tgtd" --op delete --mode logicalunit --tid 1 --lun 5

# --verify's read-back after a Ctrl-C (the span 4 GiB: it lasts): a
# second Ctrl-C stops it and the results are printed (no quit with
# nothing), and a target that dies during it fails it (no hang for good,
# libiscsi reconnecting)
truncate -s 4G "$work/big.img"
"$tp" lun "$work/tgtd" 1 7 "$work/big.img" "mode=write-back" 4096 >/dev/null || bad "LUN 7"
u7=$("$tp" url "$work/tgtd" "$iqn" 7)
in_readback() {	# PID ERRFILE: once LUN 7 has answered writes (on a busy
	# machine the run may have done none 1 s in, and report no ops), Ctrl-C,
	# then wait for the read-back to begin.  The run keeps 16 in flight,
	# so a 17th write arrives only after one was answered.
	for _ in $(seq 400); do
		"$top/tools/syncguard-stat" --json "$iqn" 7 2>/dev/null |
			jq -e ".[0].writes > 16" >/dev/null && break
		sleep 0.05
	done
	sleep 0.2	# and the tool has had their answers
	kill -INT "$1"
	for _ in $(seq 100); do grep -q "reading back the span" "$2" && return 0; sleep 0.05; done
	return 1
}
"$sb" -t 30 -q 16 -b 64k --verify --span 4g --json --no-progress "$u7" >"$work/rb.json" 2>"$work/rb.err" &
pid=$!
in_readback "$pid" "$work/rb.err" && kill -INT "$pid"
wait "$pid"; rc=$?
expect "a second Ctrl-C in the read-back: exit 130, results printed, verify incomplete (exit $rc, $(jq -c '.results[0] | [.ops, .verify]' "$work/rb.json" 2>&1 | head -c 200); $(tail -n 1 "$work/rb.err"))" \
	'[ $rc -eq 130 ] && grep -q "verify: interrupted at LBA" "$work/rb.err" &&
	 jq -e ".results[0] | .ops > 0 and .verify.ran and (.verify.complete | not)" "$work/rb.json" >/dev/null'

# the last checks: the target dies in the read-back, then mid-run; the
# tool must give up, not hang
ended() {	# PID TENTHS WHAT: PID's exit status in $rc, or a failure
	for _ in $(seq "$2"); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$1" 2>/dev/null; then
		kill -9 "$1"; bad "$3: still running $(($2 / 10)) s later"; return 1
	fi
	wait "$1"; rc=$?
}
"$sb" -t 30 -q 16 -b 64k --verify --span 4g --timeout 3 --no-progress "$u7" >/dev/null 2>"$work/rbdead.err" &
pid=$!
sleep 1
if in_readback "$pid" "$work/rbdead.err"; then
	"$tp" kill "$work/tgtd"
	ended "$pid" 100 "a target killed in the read-back" &&
		expect "a target killed in the read-back: READ fails, exit 130 ($(grep -m1 'READ(16)' "$work/rbdead.err"))" \
			'[ $rc -eq 130 ] && grep -q "verify: READ(16) at .* failed" "$work/rbdead.err"'
	"$tp" start "$work/tgtd" "$top/bs_syncguard.so" >/dev/null &&
		"$tp" target "$work/tgtd" 1 "$iqn" &&
		"$tp" lun "$work/tgtd" 1 1 "$work/lun1.img" "mode=write-back" || exit 1
	u1=$("$tp" url "$work/tgtd" "$iqn" 1)
else
	bad "the read-back did not begin after a Ctrl-C"; kill -9 "$pid"
fi
"$sb" -t 60 -q 4 --timeout 2 --json --no-progress "$u1" >"$work/dead.json" 2>"$work/dead.err" &
pid=$!
sleep 1.5
"$tp" kill "$work/tgtd"
ended "$pid" 150 "a run against a dead target" &&
	expect "a dead target: exit 1, commands counted unanswered, JSON still valid" \
		'[ $rc -eq 1 ] && [ "$(jq ".results[0].unanswered > 0" "$work/dead.json")" = true ] &&
		 [ "$(jq ".results[0].device_flushes_per_op" "$work/dead.json")" = null ]'

if [ "$fails" -eq 0 ]; then say "ok: $checks checks"; else say "$fails of $checks checks FAILED"; fi
[ "$fails" -eq 0 ]
