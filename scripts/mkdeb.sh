#!/bin/sh
# Build the Debian package tgt-syncguard from a tree `make` has built:
# the module in tgtd's module directory, the tools and manual pages under
# /usr.  Its tgt dependency is the exact version the module was compiled
# against (the module ABI is tgt's internal structs, with no version
# field), so apt will not upgrade tgt under it without a rebuild.
#
#   BSDIR=DIR scripts/mkdeb.sh VERSION OUTDIR
#
# BSDIR: tgtd's module directory (default /usr/lib/tgt/backing-store).
# Prints the path of the .deb.  `make deb` runs it.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
version=$1
out=$2
bsdir=${BSDIR:-/usr/lib/tgt/backing-store}
tgt=$(dpkg-query -W -f='${Version}' tgt 2>/dev/null) ||
	{ echo "mkdeb: tgt is not installed" >&2; exit 1; }
arch=$(dpkg --print-architecture)
built=$(cat "$top/build/tgt-src/.syncguard-tgt-version" 2>/dev/null || true)
case $built in
*"$tgt"*) ;;
*) echo "mkdeb: the module was built for tgt '$built', not the" \
	"installed $tgt: run make first" >&2; exit 1 ;;
esac
root=$(mktemp -d)
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
make -s -C "$top" install DESTDIR="$root" PREFIX=/usr BSDIR="$bsdir" >/dev/null
doc=$root/usr/share/doc/tgt-syncguard
mkdir -p "$doc" "$root/DEBIAN"
cp "$top/README.md" "$doc/"
cat >"$doc/copyright" <<EOC
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: syncguard
Comment: built from the syncguard source tree; the module is compiled
 against tgt $tgt.
EOC
gzip -9n "$root"/usr/share/man/man*/*
# the packages of the libraries the module and tools link to directly
libs=$(for f in "$root$bsdir/bs_syncguard.so" "$root"/usr/bin/*; do
	[ "$(head -c 4 "$f" | tail -c 3)" = ELF ] || continue
	needed=$(objdump -p "$f" | awk '$1 == "NEEDED" { print $2 }')
	ldd "$f" | awk -v n=" $(echo $needed) " \
		'index(n, " " $1 " ") && $3 ~ /^\// { print $3 }'
done | sort -u)
deps=$(for l in $libs; do
	dpkg-query -S "$(readlink -f "$l")" 2>/dev/null ||
		dpkg-query -S "$l" 2>/dev/null || true
done | cut -d: -f1 | sort -u | tr '\n' ' ')
depends="tgt (= $tgt)"
for d in $deps; do depends="$depends, $d"; done
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<EOC
Package: tgt-syncguard
Version: $version
Architecture: $arch
Maintainer: syncguard <root@localhost>
Installed-Size: $size
Depends: $depends
Suggests: fio, open-iscsi, sdparm
Section: net
Priority: optional
Description: tgt backing store that honours SYNCHRONIZE CACHE and FUA
 bs_syncguard.so is a tgt backing-store module (--bstype syncguard)
 that answers WRITE with FUA, SYNCHRONIZE CACHE and the WCE bit
 according to a per-LUN write-cache mode: write-through, write-back or
 plp.  With iscsi-syncbench and openiscsi-syncbench, which measure what
 sync writes cost, and syncguard-stat, which prints a LUN's counters.
 .
 Built for tgt $tgt exactly: rebuild it for another tgt.
EOC
(cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' |
	xargs -0 md5sum) >"$root/DEBIAN/md5sums"
mkdir -p "$out"
deb=$out/tgt-syncguard_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
