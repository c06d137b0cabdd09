#!/bin/bash
# fuzz.sh: hostile input against the sanitizer build of the module.
#   1. bsopts fuzzing: random key/value strings to tgtadm --bsopts; every
#      bad one must be refused with a log line, tgtd must stay up;
#   2. the regression corpus (tests/corpus/*.hex) replayed;
#   3. COUNT random and mutated CDBs (tools/iscsi-cdbfuzz) per mode on a
#      thin-provisioned LUN.
# tgtd runs with libasan preloaded; any AddressSanitizer or
# UndefinedBehaviorSanitizer report, tgtd death, hang, or GOOD for an LBA
# range beyond capacity fails the run.  Failing CDBs are saved in
# build/fuzz-findings/ (copy real finds into tests/corpus/).
#
# usage: fuzz.sh [--count N] [--modes "write-through write-back plp"] [--seed N]
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
count=20000
modes="write-through write-back plp"
seed=1
while [ $# -gt 0 ]; do
	case $1 in
	--count) count=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--seed) seed=$2; shift 2 ;;
	*) echo "usage: fuzz.sh [--count N] [--modes LIST] [--seed N]" >&2; exit 2 ;;
	esac
done

module=$top/build/san/bs_syncguard.so
fuzz=$top/tools/iscsi-cdbfuzz
tp=$top/scripts/tgtd-private
iqn=iqn.2026-11.org.syncguard:fuzz
findings=$top/build/fuzz-findings
[ -f "$module" ] && [ -x "$fuzz" ] || { echo "fuzz: run make first" >&2; exit 1; }
export TGTD_SANITIZE=1		# tgtd-private: libasan, halt on a report
mkdir -p "$findings"
work=$(mktemp -d "$top/build/fuzz.XXXXXX") || exit 1
trap '"$tp" stop "$work/tgtd"; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

say() { printf 'fuzz: %s\n' "$*" >&2; }
fail=0

sanitizer_clean() {
	if grep -q "AddressSanitizer\|runtime error:\|LeakSanitizer" "$work/tgtd/tgtd.log"; then
		say "sanitizer report:"
		grep -A 12 "AddressSanitizer\|runtime error:" "$work/tgtd/tgtd.log" | head -30 >&2
		return 1
	fi
	kill -0 "$(cat "$work/tgtd/pid" 2>/dev/null)" 2>/dev/null || { say "tgtd died"; return 1; }
}

"$tp" start "$work/tgtd" "$module" >/dev/null && "$tp" target "$work/tgtd" 1 "$iqn" || exit 1
dd if=/dev/zero of="$work/lun.img" bs=1M count=16 conv=fsync status=none

# 1. bsopts: random strings behind a prefix that makes the first item an
#    unknown key (or not key=value), so every one must be refused
RANDOM=$seed
alphabet='abcdemotwrhglkp=;-_ .:/%01'
tried=0
for i in $(seq 200); do
	len=$((RANDOM % 40)) s=
	for _ in $(seq "$len"); do s=$s${alphabet:$((RANDOM % ${#alphabet})):1}; done
	case $i in		# some near misses
	1) s="=write-back" ;; 2) s=";mode=plp" ;; 3) s="=;=" ;;
	4) s=$(printf '=%0300d' 0) ;;
	esac
	tried=$((tried + 1))
	if "$tp" lun "$work/tgtd" 1 50 "$work/lun.img" "mode$s" 2>/dev/null; then
		case "mode$s" in
		mode=write-back|mode=write-through|mode=plp) ;;	# valid by chance
		*) say "bsopts 'mode$s' was accepted"; fail=1 ;;
		esac
		"$tp" adm "$work/tgtd" --lld iscsi --op delete --mode logicalunit \
			--tid 1 --lun 50 2>/dev/null
		tried=$((tried - 1))
	fi
done
refused=$(grep -c "syncguard: lun 50: bsopts:" "$work/tgtd/tgtd.log")
say "bsopts: $tried bad strings, $refused refusals logged"
[ "$refused" -eq "$tried" ] || { say "some bad bsopts were not logged"; fail=1; }
sanitizer_clean || fail=1

lun=0
for mode in $modes; do
	lun=$((lun + 1))
	dd if=/dev/zero of="$work/$mode.img" bs=1M count=16 conv=fsync status=none
	"$tp" lun "$work/tgtd" 1 "$lun" "$work/$mode.img" "mode=$mode" || { fail=1; continue; }
	# thin (UNMAP) where allowed: plp on a file must stay allocated
	[ "$mode" = plp ] || "$tp" adm "$work/tgtd" --lld iscsi --op update \
		--mode logicalunit --tid 1 --lun "$lun" --params thin_provisioning=1 || fail=1
	url=$("$tp" url "$work/tgtd" "$iqn" "$lun")
	corpus=("$top"/tests/corpus/*.hex)
	if [ -e "${corpus[0]}" ]; then
		"$fuzz" --replay "${corpus[@]}" "$url" >"$work/replay.out" ||
			{ say "$mode: corpus replay failed: $(cat "$work/replay.out")"; fail=1; }
	fi
	out=$("$fuzz" --count "$count" --seed "$seed" --save "$findings" "$url") || fail=1
	say "$mode: $out"
	sanitizer_clean || { fail=1; break; }
done
[ "$fail" -eq 0 ] && say "ok" || say "FAILED (tgtd log: $work/tgtd/tgtd.log kept)"
[ "$fail" -eq 0 ] || trap '"$tp" stop "$work/tgtd"' EXIT
exit "$fail"
