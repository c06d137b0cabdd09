#!/bin/bash
# lifecycle.sh: the module under a changing configuration, and the soak.
#
# Default (chaos, ASan/UBSan build of the module in tgtd):
#   - journaled mixed workloads (tools/iscsi-crashtest) on one LUN per
#     mode, 64 sessions on the write-back one, for SECONDS;
#   - meanwhile: a spare LUN deleted and re-created under load, the target
#     taken offline and online, thin provisioning toggled;
#   - then every acknowledged write must read back (no power was lost);
#   - tgtd killed mid-run and restarted on the same files: again every
#     acknowledged write must be there;
#   - tgtd must survive, the sanitizers stay silent, and LeakSanitizer
#     at tgtd's exit must find no leak allocated by syncguard code.
# --soak SECONDS: the normal build, no chaos, load in 60-second rounds
#   against all three modes; every command must succeed, every write
#   read back, and tgtd's resident memory (sampled each round) stay flat:
#   the last sample within 16 MiB of the first.
#
# usage: lifecycle.sh [--seconds N] | --soak SECONDS
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
seconds=8
soak=0
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=$2; shift 2 ;;
	--soak) soak=$2; shift 2 ;;
	*) echo "usage: lifecycle.sh [--seconds N] | --soak SECONDS" >&2; exit 2 ;;
	esac
done

tp=$top/scripts/tgtd-private
crash=$top/tools/iscsi-crashtest
bench=$top/tools/iscsi-syncbench
iqn=iqn.2026-11.org.syncguard:life
modes="write-through write-back plp"
if [ "$soak" -gt 0 ]; then
	module=$top/bs_syncguard.so
else
	module=$top/build/san/bs_syncguard.so
	export TGTD_SANITIZE=1	# tgtd-private: libasan, halt on a report
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
fi
[ -f "$module" ] && [ -x "$crash" ] || { echo "lifecycle: run make first" >&2; exit 1; }
work=$(mktemp -d "$top/build/life.XXXXXX") || exit 1
trap '"$tp" stop "$work/tgtd"; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
fail=0
say() { printf 'lifecycle: %s\n' "$*" >&2; }
adm() { "$tp" adm "$work/tgtd" --lld iscsi "$@"; }

start_tgtd() {
	"$tp" start "$work/tgtd" "$module" >/dev/null &&
	"$tp" target "$work/tgtd" 1 "$iqn" || return 1
	local lun=0
	for mode in $modes; do
		lun=$((lun + 1))
		"$tp" lun "$work/tgtd" 1 "$lun" "$work/$mode.img" "mode=$mode" || return 1
	done
	"$tp" lun "$work/tgtd" 1 4 "$work/spare.img" "mode=write-back"
}

url() { "$tp" url "$work/tgtd" "$iqn" "$1"; }

# check LUN $1 against journal $2: every acknowledged write is there
verify() {
	local out
	out=$("$crash" check --all-acked --journal "$2" "$(url "$1")" 2>"$work/check.err")
	say "LUN $1: $out"
	case $out in *" lost 0 bad_blocks 0 "*) ;; *) fail=1; head -5 "$work/check.err" >&2 ;; esac
	case $out in *" durable 0 "*) say "LUN $1: no durable write to check"; fail=1 ;; esac
	[ "$soak" -eq 0 ] || case $out in *" failed 0") ;; *) say "LUN $1: commands failed"; fail=1 ;; esac
}

run_loads() {		# $1 seconds; journals j1..j3; pids in $pids
	local lun=0 sess
	pids=
	for mode in $modes; do
		lun=$((lun + 1)) sess=4
		[ "$mode" = write-back ] && sess=64
		rm -f "$work/j$lun"	# never verify an earlier round's journal
		"$crash" run --sessions "$sess" --qd $((sess == 64 ? 2 : 8)) \
			--time "$1" --seed "$RANDOM" --journal "$work/j$lun" \
			"$(url "$lun")" 2>>"$work/run.err" &
		pids="$pids $!"
	done
}

wait_loads() {		# every workload of run_loads must have run
	local p
	for p in $pids; do
		wait "$p" || { say "a workload failed:"; tail -n 3 "$work/run.err" >&2; fail=1; }
	done
}

chaos() {		# until the workloads $@ have ended
	local i=0
	while kill -0 "$@" 2>/dev/null; do
		i=$((i + 1))
		"$bench" -t 1 -q 8 --no-progress "$(url 4)" >/dev/null 2>&1 &
		sleep 0.3
		adm --op delete --mode logicalunit --tid 1 --lun 4 2>/dev/null &&
			"$tp" lun "$work/tgtd" 1 4 "$work/spare.img" "mode=write-back"
		wait $! 2>/dev/null
		adm --op update --mode logicalunit --tid 1 --lun 2 \
			--params thin_provisioning=$((i % 2)) || fail=1
		if [ $((i % 3)) -eq 0 ]; then
			adm --op update --mode target --tid 1 -n state -v offline
			sleep 0.2
			adm --op update --mode target --tid 1 -n state -v ready
		fi
		sleep 0.3
	done
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$(cat "$work/tgtd/pid")/status"; }

sanitizer_clean() {
	if grep -q "AddressSanitizer\|runtime error:" "$work/tgtd/tgtd.log"; then
		grep -A 12 "AddressSanitizer\|runtime error:" "$work/tgtd/tgtd.log" | head -30 >&2
		fail=1
	fi
}

for f in $modes spare; do
	dd if=/dev/zero of="$work/$f.img" bs=1M count=16 conv=fsync status=none
done
start_tgtd || { say "cannot start tgtd"; exit 1; }

if [ "$soak" -gt 0 ]; then
	rounds=$(( (soak + 59) / 60 )) first=
	for r in $(seq "$rounds"); do
		run_loads 60
		wait_loads
		for lun in 1 2 3; do verify "$lun" "$work/j$lun"; done
		rss=$(rss_kb); first=${first:-$rss}
		say "round $r/$rounds: tgtd resident $((rss / 1024)) MiB"
	done
	if [ $((rss - first)) -gt $((16 * 1024)) ]; then
		say "resident memory grew from $((first / 1024)) to $((rss / 1024)) MiB"
		fail=1
	fi
else
	run_loads "$seconds"
	chaos $pids
	wait_loads
	for lun in 1 2 3; do verify "$lun" "$work/j$lun"; done
	sanitizer_clean
	# tgtd dies mid-run (no power cut: the page cache survives)
	"$crash" run --sessions 4 --qd 8 --time 30 --journal "$work/jr" \
		"$(url 2)" 2>>"$work/run.err" &
	w=$!
	sleep 1.5
	"$tp" kill "$work/tgtd"
	wait "$w"
	start_tgtd || { say "tgtd did not restart"; exit 1; }
	verify 2 "$work/jr"
	sanitizer_clean
	kill -0 "$(cat "$work/tgtd/pid")" 2>/dev/null || { say "tgtd died"; fail=1; }
	# a clean exit runs LeakSanitizer: no leak may come from our code
	"$tp" stop "$work/tgtd"
	leaks=$(awk '/leak of/ {frame = 0; next} /^ *#1 / && !frame {frame = 1;
		if ($0 ~ /syncguard/) n++} END {print n + 0}' "$work/tgtd/tgtd.log")
	total=$(grep -c "leak of" "$work/tgtd/tgtd.log")
	say "LeakSanitizer: $total leak(s) in tgtd, $leaks from syncguard"
	[ "$leaks" -eq 0 ] || { grep -A 6 "leak of" "$work/tgtd/tgtd.log" | head -40 >&2; fail=1; }
fi
[ "$fail" -eq 0 ] && say ok || { say FAILED; trap '"$tp" stop "$work/tgtd"' EXIT; say "kept $work"; }
exit "$fail"
