#!/bin/sh
# Install the Debian packages of PACKAGE... that are missing, so that
# `make demo` and `make check` are the whole set-up of a fresh Debian 12
# (the list is the Makefile's DEB_PACKAGES; `make deps` installs it all).
#
#   scripts/need-deps.sh PACKAGE...
#
# Nothing happens when every package is installed.  Installs with
# apt-get as root; otherwise names what is missing and fails.  Packages
# already installed are not upgraded.  Exit 0 when all are there.
set -eu
if ! command -v dpkg-query >/dev/null; then
	echo "need-deps: no dpkg-query (not Debian?): not checking for" \
	     "$*" >&2
	exit 0
fi
missing=
for p in "$@"; do
	st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "need-deps: missing Debian packages:$missing" >&2
	echo "need-deps: run this as root, or 'make deps' as root first" >&2
	exit 1
fi
echo "need-deps: installing missing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
# shellcheck disable=SC2086
apt-get install -y $missing
