#!/usr/bin/env bash
# Builds strata's Debian package with dpkg-deb (Debian's own packager, so nothing to pin or
# download): the binary with its version stamped, the systemd unit and the environment file.
#
#   bash deploy/build-deb.sh [OUT_DIR]          # VERSION=1.2.3 (default: from git, below), ARCH (default: go env GOARCH)
#   bash deploy/build-deb.sh --print-version    # only print the version it would use
#
# Prints the path of the .deb. Install with `apt install ./strata_<version>_<arch>.deb`, then
# `systemctl enable --now strata` (docs/operations.md, "Install").
#
# Versions sort as dpkg and apt compare them, so an upgrade is always an upgrade: a tagged
# commit is its tag (v1.4.0 -> 1.4.0); a commit after a tag is <tag>+git<time>.<hash>; a commit
# with no tag before it is 0.0.0~git<time>.<hash>, where <time> is the commit time in UTC
# (YYYYMMDDHHMMSS) and <hash> the abbreviated commit id. The time comes first, so the hash (which
# may start with a digit) never decides the order; "~" sorts before anything, so every tagged
# release sorts after these snapshots. Uncommitted changes add ".dirty".
set -euo pipefail
cd "$(dirname "$0")/.."

git_version() {
	local hash time tag dirty=""
	hash=$(git rev-parse --short=12 HEAD 2>/dev/null) || { echo "build-deb.sh: not a git checkout: give VERSION=x.y.z" >&2; return 1; }
	time=$(TZ=UTC git show -s --format=%cd --date=format-local:%Y%m%d%H%M%S HEAD)
	git diff --quiet HEAD 2>/dev/null || dirty=.dirty
	if tag=$(git describe --tags --exact-match HEAD 2>/dev/null) && [ -z "$dirty" ]; then
		echo "${tag#v}"
	elif tag=$(git describe --tags --abbrev=0 HEAD 2>/dev/null); then
		echo "${tag#v}+git$time.$hash$dirty"
	else
		echo "0.0.0~git$time.$hash$dirty"
	fi
}

version=${VERSION:-$(git_version)}
version=${version#v}
if printf '%s' "$version" | grep -Eqx '[0-9a-f]{7,40}'; then
	echo "build-deb.sh: version \"$version\" is a bare commit hash, which does not sort: use 0.0.0~git<YYYYMMDDHHMMSS>.<hash> or a tag" >&2
	exit 1
fi
case "$version" in
[0-9]*) ;;
*) echo "build-deb.sh: version \"$version\" does not start with a digit, as Debian versions must" >&2; exit 1 ;;
esac
if [ "${1:-}" = --print-version ]; then
	echo "$version"
	exit 0
fi
out=${1:-dist}
arch=${ARCH:-$(go env GOARCH)}
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# mktemp -d makes the directory 0700, and it becomes the package's root entry ("./"): dpkg
# would then carry drwx------ for /. Packages give their directories 0755.
chmod 0755 "$root"

mkdir -p "$root/DEBIAN" "$root/usr/bin" "$root/lib/systemd/system" "$root/etc/strata"
CGO_ENABLED=0 GOARCH="$arch" go build -trimpath \
	-ldflags "-s -w -X 'github.com/stratahq/strata/internal/cli.Version=$version ($commit)'" \
	-o "$root/usr/bin/strata" ./cmd/strata
install -m 0644 deploy/strata.service "$root/lib/systemd/system/strata.service"
install -m 0600 deploy/strata.env "$root/etc/strata/strata.env"
cat >"$root/DEBIAN/control" <<CONTROL
Package: strata
Version: $version
Architecture: $arch
Maintainer: strata <strata@localhost>
Depends: postgresql (>= 15) | postgresql-15
Recommends: ca-certificates
Section: database
Priority: optional
Description: automation data in PostgreSQL
 Resources with labels, Salt pillars, Terraform/OpenTofu state and user kinds with evolving
 schemas, served over HTTP from PostgreSQL. The strata service starts its own PostgreSQL
 cluster unless STRATA_DATABASE_URL names one (/etc/strata/strata.env).
CONTROL
echo /etc/strata/strata.env >"$root/DEBIAN/conffiles"
cat >"$root/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
POSTINST
chmod 0755 "$root/DEBIAN/postinst"
# Under a restrictive umask the directories above would be 0700 too.
find "$root" -type d -exec chmod 0755 {} +
mkdir -p "$out"
deb="$out/strata_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
