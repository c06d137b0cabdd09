#!/bin/bash
# demo.sh: the main job.  A private tgtd exports one syncguard LUN per
# write-cache mode (files in a temporary directory); iscsi-syncbench
# measures every mode x sync discipline at queue depth 1 and 16 with
# 4 KiB random writes; one table compares them.  Then the short forms of
# iscsi-syncbench's presets: iozone on every mode (compared side by
# side), vdbench and the throughput sweep on write-back, and one plot of
# them all.
#
# Environment: DEMO_SECONDS (per run, default 3), DEMO_MB (LUN size,
# default 128), DEMO_DIR (parent of the temporary directory, default
# /var/tmp: the LUN files must not be on tmpfs), DEMO_OUT (where the
# results go, default build/demo), DEMO_PRESETS=0 (skip the presets).
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
secs=${DEMO_SECONDS:-3}
mb=${DEMO_MB:-128}
out=${DEMO_OUT:-$top/build/demo}
csv=$out/matrix.csv
iqn=iqn.2026-11.org.syncguard:demo
bench=$top/tools/iscsi-syncbench
tgtd_private=$top/scripts/tgtd-private
modes="write-through write-back plp"

parent=${DEMO_DIR:-/var/tmp}
case $(stat -f -c %T "$parent" 2>/dev/null) in
tmpfs|ramfs) parent=$top/build ;;	# syncguard refuses RAM file systems
esac
mkdir -p "$parent" "$out"
work=$(mktemp -d "$parent/syncguard-demo.XXXXXX") || exit 1

cleanup() {
	trap - EXIT INT TERM
	"$tgtd_private" stop "$work/tgtd"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "demo: interrupted" >&2; exit 130' INT TERM

say() { printf 'demo: %s\n' "$*" >&2; }

# preset NAME LUN LABEL: one preset's short form, JSON into $out
preset() {
	local url
	url=$("$tgtd_private" url "$work/tgtd" "$iqn" "$2")
	say "preset $1 on $3"
	"$bench" --preset "$1" --json --no-progress --label "$3" "$url" \
		>"$out/$1-$3.json.tmp" && mv "$out/$1-$3.json.tmp" "$out/$1-$3.json"
}

# the classic studies, short form: iozone on every mode, vdbench and the
# throughput sweep on write-back; a comparison table and a plot
presets() {
	local lun=0 mode rc=0
	echo "== iozone (8 KiB FUA writes, 2 sessions; short form), by mode =="
	for mode in $modes; do
		lun=$((lun + 1))
		preset iozone "$lun" "$mode" || rc=1
	done
	"$bench" --compare "$out"/iozone-{write-through,write-back,plp}.json || rc=1
	echo
	preset vdbench 2 write-back || rc=1
	preset throughput 2 write-back || rc=1
	"$bench" --plot "$out/presets.png" "$out"/iozone-*.json \
		"$out/vdbench-write-back.json" "$out/throughput-write-back.json" >/dev/null &&
		say "plot: $out/presets.png (IOPS and MB/s against transfer size, latency CDF)" ||
		rc=1
	return $rc
}

[ -x "$bench" ] || { say "$bench missing: run make"; exit 1; }
say "private tgtd, LUN files in $work"
"$tgtd_private" start "$work/tgtd" "$top/bs_syncguard.so" || exit 1
"$tgtd_private" target "$work/tgtd" 1 "$iqn" || exit 1

lun=0
for mode in $modes; do
	lun=$((lun + 1))
	# fully written, so mode=plp's allocation check passes
	dd if=/dev/zero of="$work/$mode.img" bs=1M count="$mb" conv=fsync \
		status=none || exit 1
	if ! "$tgtd_private" lun "$work/tgtd" 1 "$lun" "$work/$mode.img" \
		"mode=$mode"; then
		say "cannot create the $mode LUN; tgtd said:"
		tail -n 3 "$work/tgtd/tgtd.log" >&2
		exit 1
	fi
done

# Each LUN runs 2 s unmeasured before the table: the set-up's dd leaves
# the machine busy long enough that the first row runs slow even with
# its own 0.5 s warm-up (write-through none at QD1 can come out at half
# of fua's IOPS, which it matches when measured again)
say "warming up: 2 s per LUN, not measured"
lun=0
for mode in $modes; do
	lun=$((lun + 1))
	"$bench" --no-progress -t 2 -q 16 -s none -b 4k \
		"$("$tgtd_private" url "$work/tgtd" "$iqn" "$lun")" >/dev/null ||
		say "warm-up on $mode failed"
done

runs=$(( $(echo $modes | wc -w) * 2 * 3 ))
say "$runs runs of ${secs}s: 4 KiB random writes, sync none/fua/flush, QD 1 and 16"
final_csv=$csv
csv=$work/results.csv	# moved into place only when the run completes
echo "mode,lun,label,sync,block_size,queue_depth,sessions,read_pct,random_pct,wce,dpofua,seconds,ops,errors,iops,mb_per_s,lat_mean_us,lat_p50_us,lat_p99_us,lat_p99_9_us,lat_max_us,device_flushes_per_op,workload,interrupted,unanswered,verify_checked,verify_mismatches,verify_complete,read_ops,read_lat_mean_us,read_lat_p99_us,write_ops,write_lat_mean_us,write_lat_p99_us,write_fua_ops,write_fua_lat_mean_us,write_fua_lat_p99_us,synchronize_cache_ops,synchronize_cache_lat_mean_us,synchronize_cache_lat_p99_us,asked_iops,arrivals,rate_sustained,unsent,curve_step,curve_pct,retried_ops" >"$csv"
n=0 failed=0
eol='\n'; [ -t 2 ] && eol='\r'
lun=0
for mode in $modes; do
	lun=$((lun + 1))
	url=$("$tgtd_private" url "$work/tgtd" "$iqn" "$lun")
	for qd in 1 16; do
		for sync in none fua flush; do
			n=$((n + 1))
			printf 'demo: [%2d/%d] %-13s QD %-2s sync=%-5s%b' \
				"$n" "$runs" "$mode" "$qd" "$sync" "$eol" >&2
			# 0.5 s unmeasured first: each row after the one
			# before, as fio's ramp_time
			row=$("$bench" --csv --no-header --no-progress -t "$secs" --warmup 0.5 \
				-q "$qd" -s "$sync" -b 4k --label "$mode" "$url") ||
				failed=$((failed + 1))
			[ -n "$row" ] && echo "$mode,$lun,$row" >>"$csv"
		done
	done
done
printf '\n' >&2

awk -F, '
NR == 1 { next }
{
	key = $1 "," $6 "," $4; iops[key] = $15
	if (!($1 in seen)) { order[++n] = $1; seen[$1] = 1 }
	# the WRITE (with or without FUA) and the SYNCHRONIZE CACHE apart:
	# under sync=flush the p99 before them is the pair acknowledged as one
	wp = $34 != "" ? $34 : $37 != "" ? $37 : "-"
	sp = $40 != "" ? $40 : "-"
	rows[++r] = sprintf("%-13s %3s  %-5s  %3s %10.0f %8.1f %9.0f %9.0f %9.0f %10s %9s %6s",
		$1, $6, $4, $10, $15, $16, $17, $19, $20, wp == "-" ? wp : sprintf("%.0f", wp),
		sp == "-" ? sp : sprintf("%.0f", sp), $14)
}
END {
	printf "%-13s %3s  %-5s  %3s %10s %8s %9s %9s %9s %10s %9s %6s\n", "mode", "QD",
		"sync", "WCE", "IOPS", "MB/s", "mean us", "p99 us", "p99.9 us",
		"WRITE p99", "SYNC p99", "errors"
	for (i = 1; i <= r; i++) print rows[i]
	print ""
	for (q = 1; q <= 16; q += 15) {
		wt = "write-through," q
		wb = "write-back," q
		pl = "plp," q
		if (iops[wt ",fua"] > 0)
			printf "QD %-2d write-through: none/fua  = %.2f (every write is already durable)\n", q, iops[wt ",none"] / iops[wt ",fua"]
		if (iops[wb ",flush"] > 0)
			printf "QD %-2d write-back:    none/flush = %.2f (what durability costs with a volatile cache)\n", q, iops[wb ",none"] / iops[wb ",flush"]
		if (iops[pl ",flush"] > 0)
			printf "QD %-2d plp:           none/flush = %.2f (no device flush is ever sent)\n", q, iops[pl ",none"] / iops[pl ",flush"]
	}
}' "$csv"
echo
mv "$csv" "$final_csv" && csv=$final_csv
say "results: $csv"
[ "${DEMO_PRESETS:-1}" = 0 ] || presets || failed=$((failed + 1))
if [ "$failed" -gt 0 ]; then
	say "$failed run(s) reported errors"
	exit 1
fi
