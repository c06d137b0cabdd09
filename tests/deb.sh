#!/bin/bash
# deb.sh: the Debian package installs, loads and removes.
#
#   tests/deb.sh PACKAGE.deb
#
# Installs PACKAGE.deb with apt, checks that it depends on exactly the
# installed tgt, starts a private tgtd that loads the module from its
# installed path (tgtd's own backing-store directory; a system tgtd is
# not touched), creates a LUN on it and reads its counters with the
# installed syncguard-stat, renders every installed manual page, then
# purges the package and checks that none of its files is left.  A
# module `make install` put in tgtd's directory before is put back.
# Exit 0 when all holds.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
tp=$top/scripts/tgtd-private
# shellcheck source=scripts/leftout.sh
. "$top/scripts/leftout.sh"
deb=$(readlink -f "${1:?usage: deb.sh PACKAGE.deb}")
bsdir=/usr/lib/tgt/backing-store
say() { printf 'deb: %s\n' "$*" >&2; }
fail=0

if dpkg-query -W -f='${db:Status-Status}' tgt-syncguard 2>/dev/null |
   grep -qx installed; then
	left_out "tests/deb.sh" machine \
		"tgt-syncguard is installed here, and the test would remove it"
	exit 0
fi
work=$(mktemp -d "$top/build/deb.XXXXXX") || exit 1
saved=
if [ -e "$bsdir/bs_syncguard.so" ]; then	# make install's, owned by none
	saved=$work/bs_syncguard.so.saved
	cp -p "$bsdir/bs_syncguard.so" "$saved"
fi
cleanup() {
	"$tp" stop "$work/tgtd" >/dev/null 2>&1
	dpkg-query -W tgt-syncguard >/dev/null 2>&1 &&
		apt-get purge -y -qq tgt-syncguard >/dev/null 2>&1
	[ -n "$saved" ] && cp -p "$saved" "$bsdir/bs_syncguard.so"
	rm -rf "$work"
}
trap cleanup EXIT

tgt=$(dpkg-query -W -f='${Version}' tgt)
dep=$(dpkg-deb -f "$deb" Depends)
case ", $dep," in
*", tgt (= $tgt),"*) ;;
*) say "FAIL: Depends does not pin tgt $tgt: $dep"; fail=1 ;;
esac

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >"$work/apt.log" 2>&1 ||
	{ say "FAIL: apt-get install:"; tail -5 "$work/apt.log" >&2; exit 1; }
mapfile -t files < <(dpkg-query -L tgt-syncguard | while read -r f; do
	[ -f "$f" ] && echo "$f"; done)
for f in "$bsdir/bs_syncguard.so" /usr/bin/iscsi-syncbench \
	 /usr/bin/openiscsi-syncbench /usr/bin/syncguard-stat \
	 /usr/share/syncguard/fio/fua.fio /usr/share/syncguard/fio/iozone.fio \
	 /usr/share/man/man8/bs_syncguard.8.gz \
	 /usr/share/man/man1/syncguard-stat.1.gz; do
	printf '%s\n' "${files[@]}" | grep -qxF "$f" ||
		{ say "FAIL: the package has no $f"; fail=1; }
done
for m in $(printf '%s\n' "${files[@]}" | grep '/man/'); do
	out=$(zcat "$m" | groff -man -Tutf8 -ww -z 2>&1)
	[ -z "$out" ] || { say "FAIL: $m renders with warnings: $out"; fail=1; }
done

# tgtd's own module directory: no MODULE.so for tgtd-private
iqn=iqn.2026-11.org.syncguard:deb
truncate -s 16M "$work/lun.img"
"$tp" start "$work/tgtd" >/dev/null && "$tp" target "$work/tgtd" 1 "$iqn" ||
	{ say "FAIL: no private tgtd"; exit 1; }
if "$tp" lun "$work/tgtd" 1 1 "$work/lun.img" mode=write-through; then
	/usr/bin/syncguard-stat "$iqn" 1 | grep -q "write-through, WCE=0" ||
		{ say "FAIL: the installed syncguard-stat does not show the LUN"
		  fail=1; }
else
	say "FAIL: the installed module did not take a LUN:"
	tail -3 "$work/tgtd/tgtd.log" >&2
	fail=1
fi
"$tp" stop "$work/tgtd" >/dev/null 2>&1

DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq tgt-syncguard >"$work/apt.log" 2>&1 ||
	{ say "FAIL: apt-get purge:"; tail -5 "$work/apt.log" >&2; fail=1; }
for f in "${files[@]}"; do
	[ -e "$f" ] && { say "FAIL: $f left after purge"; fail=1; }
done
[ -d /usr/share/doc/tgt-syncguard ] &&
	{ say "FAIL: /usr/share/doc/tgt-syncguard left after purge"; fail=1; }
[ "$fail" -eq 0 ] && say "ok: installed (${#files[@]} files), loaded from" \
	"$bsdir in a private tgtd, purged with nothing left"
exit "$fail"
