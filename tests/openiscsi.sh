#!/bin/bash
# openiscsi.sh: tools/openiscsi-syncbench in --dry-run (this machine has
# no kernel initiator; tests/guest.sh runs it for real in a QEMU guest):
# the commands come in the order open-iscsi needs (the node record for
# the portal given, login, the by-path device, WCE read), one fio run per
# job file of conf/fio with the device and durations in its environment,
# WCE restored and the session logged out last -- also when a step fails
# -- and usage errors exit 2; the job files hold the engine and options
# each sync discipline promises, and fio parses them.  Exit 0 when all
# hold.
set -u

top=$(cd "$(dirname "$0")/.." && pwd)
ob=$top/tools/openiscsi-syncbench
fails=0 checks=0
say() { printf 'openiscsi: %s\n' "$*" >&2; }
expect() {
	checks=$((checks + 1))
	eval "$2" || { fails=$((fails + 1)); say "FAIL: $1"; }
}
dry() { "$ob" --dry-run --portal 192.0.2.7 --target iqn.2026-11.org.example:t "$@" 2>&1; }

# each command as "iscsiadm:LAST-ARGUMENT", "fio:JOB-FILE" or its first two words
steps() {
	sed -n 's/^+ //p' | awk '
		$1 == "iscsiadm" { print "iscsiadm:" $NF; next }
		$1 == "env" { n = split($NF, p, "/"); print "fio:" p[n]; next }
		{ print $1 " " $2 }' | tr '\n' '|'
}
jobs=$top/conf/fio

out=$(dry --preset all --wce off); rc=$?
expect "a dry run exits 0" '[ $rc -eq 0 ]'
order=$(steps <<<"$out")
expect "node record, login, device, WCE read and cleared once (Linux rescans the disk), the presets' job files, WCE restored (a rescan), logout, node deleted" \
	'[ "$order" = "iscsiadm:new|iscsiadm:--login|readlink -f|sdparm --get=WCE|sdparm --clear=WCE|sh -c|fio:iozone.fio|fio:vdbench.fio|fio:throughput.fio|sdparm --set=WCE|sh -c|iscsiadm:--logout|iscsiadm:delete|" ] &&
	 grep -q "^+ sh -c echo 1 >/sys/block/sdX/device/rescan$" <<<"$out"'
expect "the node record is made for the portal given (no SendTargets discovery), before the login; logout, then the record's deletion, come last" \
	'! grep -q discovery <<<"$out" &&
	 grep "^+ iscsiadm" <<<"$out" | head -1 | grep -q "^+ iscsiadm -m node -T iqn.2026-11.org.example:t -p 192.0.2.7:3260 -o new$" &&
	 tail -2 <<<"$out" | head -1 | grep -q "^+ iscsiadm -m node -T iqn.2026-11.org.example:t -p 192.0.2.7:3260 --logout$" &&
	 tail -1 <<<"$out" | grep -q "^+ iscsiadm -m node -T iqn.2026-11.org.example:t -p 192.0.2.7:3260 -o delete$"'
expect "the device is found through /dev/disk/by-path" \
	'grep -q "^+ readlink -f /dev/disk/by-path/ip-192.0.2.7:3260-iscsi-iqn.2026-11.org.example:t-lun-1$" <<<"$out"'
expect "every fio run gets the device, its seconds, the ramp and a log prefix in its environment, and a job file of conf/fio" \
	'[ "$(grep -c "^+ env SYNCBENCH_DEV=/dev/sdX SYNCBENCH_SECONDS=[0-9]* SYNCBENCH_RAMP=1 SYNCBENCH_LOG=./[a-z]* .*fio --output-format=json $jobs/[a-z]*\.fio$" <<<"$out")" = 3 ] &&
	 grep -q "SYNCBENCH_SECONDS=3 .* SYNCBENCH_SIZE=16m .*iozone.fio$" <<<"$out" &&
	 grep -q "SYNCBENCH_SECONDS=1 .*vdbench.fio$" <<<"$out"'
out=$(dry --preset vdbench --full --output /o)
expect "--full: vdbench's 30-minute points; --output: JSON and logs in DIR" \
	'grep -q "SYNCBENCH_SECONDS=1800 .*SYNCBENCH_LOG=/o/vdbench fio --output-format=json --output=/o/vdbench.json " <<<"$out"'

for pair in none:none.fio fua:fua.fio flush:flush.fio every:8:every.fio end:end.fio \
	    dsync:blk-dsync.fio fsync:blk-fsync.fio; do
	out=$(dry --sync "${pair%:*}" --lun 3 --seconds 7 --ramp 2)
	expect "--sync ${pair%:*} runs ${pair##*:} alone, 7 s after a 2 s ramp; --lun picks the by-path LUN" \
		'[ "$(grep -c "^+ env " <<<"$out")" = 1 ] &&
		 grep -q "^+ env SYNCBENCH_DEV=/dev/sdX SYNCBENCH_SECONDS=7 SYNCBENCH_RAMP=2 .*fio --output-format=json $jobs/${pair##*:}$" <<<"$out" &&
		 grep -q "lun-3$" <<<"$out"'
done
expect "--sync every:8 passes N to the job file" \
	'dry --sync every:8 | grep -q " SYNCBENCH_EVERY=8 fio "'
mine=$(mktemp --suffix=.fio)
trap 'rm -f "$mine"' EXIT
out=$(dry --job "$mine")
expect "--job FILE runs that file, 3 s by default" \
	'grep -q "^+ env SYNCBENCH_DEV=/dev/sdX SYNCBENCH_SECONDS=3 SYNCBENCH_RAMP=1 SYNCBENCH_LOG=./$(basename "$mine" .fio) fio --output-format=json $mine$" <<<"$out"'

# the job files promise what each discipline puts on the wire
field() { sed -n "s/^$2=//p" "$jobs/$1.fio" | tail -1; }
for f in none fua flush every end blk-dsync blk-fsync iozone vdbench throughput; do
	expect "$f.fio: the device, durations and histogram log from the environment, direct=1" \
		'[ "$(field $f filename)" = "\${SYNCBENCH_DEV}" ] && [ "$(field $f direct)" = 1 ] &&
		 [ "$(field $f ramp_time)" = "\${SYNCBENCH_RAMP}" ] && [ "$(field $f runtime)" = "\${SYNCBENCH_SECONDS}" ] &&
		 [ "$(field $f write_hist_log)" = "\${SYNCBENCH_LOG}" ] && [ -n "$(field $f log_hist_msec)" ]'
done
expect "the CDB disciplines go through fio's sg engine: fua writefua=1, none writefua=0, flush fsync=1, every fsync=N, end end_fsync=1; iozone's writes FUA" \
	'for f in none fua flush every end iozone; do [ "$(field $f ioengine)" = sg ] || exit 1; done &&
	 [ "$(field fua writefua)" = 1 ] && [ "$(field none writefua)" = 0 ] && [ "$(field flush fsync)" = 1 ] &&
	 [ "$(field every fsync)" = "\${SYNCBENCH_EVERY}" ] && [ "$(field end end_fsync)" = 1 ] && [ "$(field iozone writefua)" = 1 ]'
expect "blk-dsync and blk-fsync go through the block device (psync) with sync=dsync and fsync=1" \
	'[ "$(field blk-dsync ioengine)" = psync ] && [ "$(field blk-dsync sync)" = dsync ] &&
	 [ "$(field blk-fsync ioengine)" = psync ] && [ "$(field blk-fsync fsync)" = 1 ]'
if command -v fio >/dev/null; then
	expect "fio parses every job file with the environment openiscsi-syncbench sets" \
		'for f in "$jobs"/*.fio; do SYNCBENCH_DEV=/dev/null SYNCBENCH_SECONDS=1 SYNCBENCH_RAMP=0 \
		 SYNCBENCH_LOG=x SYNCBENCH_EVERY=8 SYNCBENCH_SIZE=16m fio --parse-only "$f" >/dev/null 2>&1 || exit 1; done'
	expect "fio refuses a job file whose environment is missing (it does not run with no duration)" \
		'! SYNCBENCH_DEV=/dev/null fio --parse-only "$jobs/fua.fio" >/dev/null 2>&1'
fi

out=$(dry --chap alice:s3cret)
expect "--chap sets CHAP on the node before the login" \
	'grep -n "" <<<"$out" | grep -E "authmethod -v CHAP|username -v alice|password -v \*\*\*|--login" | cut -d: -f1 | tr "\n" " " | awk "{ exit !(\$1 < \$4 && \$2 < \$4 && \$3 < \$4) }"'
expect "--dry-run does not print the CHAP secret" '! grep -q s3cret <<<"$out"'

out=$(SYNCGUARD_DRYRUN_FAIL="$jobs/iozone.fio" dry --preset all --wce on); rc=$?
expect "a failed fio run: exit 1, no later job, WCE restored, logged out" \
	'[ $rc -eq 1 ] && ! grep -q vdbench <<<"$out" &&
	 [ "$(tail -4 <<<"$out" | head -1)" = "+ sdparm --set=WCE /dev/sdX" ] && tail -2 <<<"$out" | head -1 | grep -q -- "--logout$"'
# a restore that fails: said, the run exits 1, the session still logged out
out=$(SYNCGUARD_DRYRUN_FAIL=--set=WCE dry --sync fua --wce off); rc=$?
expect "a failed WCE restore: exit 1, said, logged out all the same (exit $rc)" \
	'[ $rc -eq 1 ] && grep -q "could not restore WCE=1" <<<"$out" && grep -q "^+ iscsiadm .* --logout$" <<<"$out"'
out=$(SYNCGUARD_DRYRUN_FAIL=--login dry); rc=$?
expect "a failed login: exit 1, no logout, the node record made deleted" \
	'[ $rc -eq 1 ] && ! grep -q -- --logout <<<"$out" && tail -1 <<<"$out" | grep -q -- "-o delete$"'

for args in "" "--target iqn.x:y" "--portal 192.0.2.7" "--portal 192.0.2.7 --target iqn.x:y --lun x" \
	    "--portal 192.0.2.7 --target iqn.x:y --preset bonnie" "--portal 192.0.2.7 --target iqn.x:y --sync maybe" \
	    "--portal 192.0.2.7 --target iqn.x:y --wce sometimes" "--portal 192.0.2.7 --target iqn.x:y --lun" \
	    "--portal 192.0.2.7 --target iqn.x:y --bogus" "--portal 192.0.2.7:99999 --target iqn.x:y" \
	    "--portal 192.0.2.7:0 --target iqn.x:y" "--portal [::1]:x --target iqn.x:y" \
	    "--portal 192.0.2.7 --target iqn.x:y --preset throughput --wce on" \
	    "--portal 192.0.2.7 --target iqn.x:y --sync fua --preset iozone" \
	    "--portal 192.0.2.7 --target iqn.x:y --sync fua --job /etc/hostname" \
	    "--portal 192.0.2.7 --target iqn.x:y --sync every:0" \
	    "--portal 192.0.2.7 --target iqn.x:y --sync every:x" \
	    "--portal 192.0.2.7 --target iqn.x:y --job /nonexistent.fio" \
	    "--portal 192.0.2.7 --target iqn.x:y --sync fua --seconds 0" \
	    "--portal 192.0.2.7 --target iqn.x:y --sync fua --ramp x"; do
	# shellcheck disable=SC2086
	err=$("$ob" --dry-run $args 2>&1 >/dev/null); rc=$?
	expect "usage error '$args': exit 2 with a message and the usage" \
		'[ $rc -eq 2 ] && head -1 <<<"$err" | grep -q "^openiscsi-syncbench: " && sed -n 2p <<<"$err" | grep -q "^usage:"'
done
help_opts=$("$ob" --help | grep -oE '^  (-[a-z], )?--[a-z-]*' | sed 's/.*--/--/' | sort | tr '\n' ' ')
parse_opts=$(sed -n '/^parse()/,/^}/p' "$ob" | grep -o '^\s*--[a-z-]*[|)]' | tr -d ' \t|)' | sort -u | tr '\n' ' ')
expect "--help lists exactly the options the script parses" '[ "$help_opts" = "$parse_opts" ]'

if [ "$fails" -eq 0 ]; then say "ok: $checks checks"; else say "$fails of $checks checks FAILED"; fi
[ "$fails" -eq 0 ]
