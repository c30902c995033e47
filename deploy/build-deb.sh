#!/usr/bin/env bash
# Builds strata's Debian package with dpkg-deb (Debian's own packager, so nothing to pin or
# download): the binary with its version stamped, the systemd unit and the environment file.
#
#   bash deploy/build-deb.sh [OUT_DIR]          # VERSION=1.2.3 (default: git describe), ARCH (default: go env GOARCH)
#
# Prints the path of the .deb. Install with `apt install ./strata_<version>_<arch>.deb`, then
# `systemctl enable --now strata` (docs/operations.md, "Install").
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-dist}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo 0.0.0-dev)}
version=${version#v}
case "$version" in [0-9]*) ;; *) version="0.0.0+$version" ;; esac # Debian versions start with a digit
arch=${ARCH:-$(go env GOARCH)}
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

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
mkdir -p "$out"
deb="$out/strata_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
