#!/usr/bin/env bash
# scripts/build-packages.sh: builds the Debian packages postgresql-15-dblog and dblog from this
# checkout with Debian's tooling (debian/, dpkg-buildpackage -us -uc -b) into dist/. Installs
# the build dependencies of debian/control first (apt-get build-dep; as root, or through sudo
# when not root). Builds in a copy under a temp dir, so the checkout stays clean and nothing is
# written to its parent directory. Used by the README and tests/packaging/test_packages.sh.
#
#   ./scripts/build-packages.sh        then, as root:   apt-get install -y ./dist/*.deb
#
# DBLOG_JOBS: parallel build jobs (default: every CPU). The project's tests are not run in the
# package build (DEB_BUILD_OPTIONS=nocheck; tests/run.sh runs them).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi

if ! dpkg-checkbuilddeps debian/control >/dev/null 2>&1 || ! command -v dpkg-buildpackage >/dev/null; then
  echo "build-packages: installing the build dependencies of debian/control"
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    build-essential dpkg-dev fakeroot
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -q --no-install-recommends ./
fi

version=$(dpkg-parsechangelog -S Version)
work=$(mktemp -d /tmp/dblog-packages.XXXXXX)
trap 'rm -rf "$work"' EXIT
src=$work/dblog-$version
mkdir -p "$src"
# the checkout as it is (uncommitted changes too), less VCS data and build output
tar -c --exclude=./.git --exclude=./build --exclude=./build-fuzz --exclude=./dist \
  --exclude='./build-[0-9]*' --exclude=./obj-cmake --exclude=./debian/.debhelper \
  --exclude=./debian/dblog --exclude='./debian/postgresql-*-dblog' --exclude=./debian/tmp . |
  tar -x -C "$src"

echo "build-packages: dpkg-buildpackage -us -uc -b in $src"
(cd "$src" && DEB_BUILD_OPTIONS="nocheck noddebs parallel=${DBLOG_JOBS:-$(nproc)}" \
  dpkg-buildpackage -us -uc -b)

mkdir -p dist
rm -f dist/*.deb
cp "$work"/*.deb dist/
echo "build-packages: built"
ls -l "$root"/dist/*.deb
