#!/usr/bin/env bash
# tests/packaging/test_packages.sh: the Debian packages end to end (issue 26 item 1), on the
# machine itself, as root or through sudo:
#   1. builds postgresql-15-dblog and dblog with scripts/build-packages.sh (debian/,
#      dpkg-buildpackage -us -uc -b), and runs lintian on both .debs: every tag, pedantic
#      included, fails the test unless an override in debian/*.lintian-overrides explains it;
#   2. installs them: apt-get install -y ./dist/*.deb; checks what dpkg installed (the
#      extension where PostgreSQL 15 looks for it, the unit, the conffile root:dblog 0640, the
#      system user dblog) and that the conffile lists every setting of `dblogd --help`;
#   3. systemd-analyze verify on the installed unit;
#   4. the README's quick start on the INSTALLED files: a throwaway cluster (tests/cluster.sh)
#      with CREATE EXTENSION dblog from the package, /etc/dblog/dblogd.conf edited as
#      docs/operations.md says, dblogd --check, then the unit's ExecStart line run as the unit
#      would (its User, Group and Environment; there is no systemd here to start it), a row
#      inserted reaching `dblog tail`, `dblog status` showing the consumer streaming, the unit's
#      ExecReload (SIGHUP) reloading, a clean stop (SIGTERM, exit 0);
#   5. drops the consumer's slot as operations.md says (a package never drops slots), purges
#      both packages (apt-get purge -y) and checks that nothing they installed or made is
#      left: every file of their `dpkg -L` lists, /etc/dblog, the user and group dblog, the
#      statoverride, no replication slot in the cluster.
# It refuses to start when the packages, /etc/dblog or the user dblog are there already.
# Installing replaces the files a `make install` of the extension put under
# /usr/lib/postgresql/15 and purging removes them: run `make install` again afterwards.
# Runs in tests/run.sh with DBLOG_TEST_PACKAGES=1, and in CI (.ci/run). About 12 minutes on
# 2 cores, most of it the C++ build. DBLOG_JOBS: parallel build jobs. DBLOG_PACKAGES_NO_BUILD=1
# tests the .debs already in dist/ (while working on the test itself).
set -euo pipefail
cd "$(dirname "$0")/../.."

source tests/cluster.sh

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
as_root() { "${sudo_cmd[@]}" "$@"; }
apt_root() { as_root env DEBIAN_FRONTEND=noninteractive "$@"; }
step() { echo "== packaging: $*"; }
fail() { echo "packaging: FAIL: $*" >&2; exit 1; }

unit=/lib/systemd/system/dblogd.service
conf=/etc/dblog/dblogd.conf
work=$(mktemp -d /tmp/dblog-packaging.XXXXXX)
chmod 755 "$work"
dblogd_pid=
tail_pid=
installed=0

cleanup() {
  local rc=$?
  set +e
  [ -n "$tail_pid" ] && kill "$tail_pid" 2>/dev/null && wait "$tail_pid" 2>/dev/null
  if [ -n "$dblogd_pid" ]; then
    as_root kill "$dblogd_pid" 2>/dev/null
    for _ in $(seq 75); do kill -0 "$dblogd_pid" 2>/dev/null || break; sleep 0.2; done
    as_root kill -KILL "$dblogd_pid" 2>/dev/null
    wait "$dblogd_pid" 2>/dev/null
  fi
  cluster_stop
  if [ "$installed" = 1 ]; then
    echo "packaging: purging the packages after a failure"
    apt_root apt-get purge -y -q dblog postgresql-15-dblog >/dev/null 2>&1 || true
  fi
  if [ "$rc" -ne 0 ] && [ -f "$work/dblogd.log" ]; then
    echo "-- dblogd's log"; tail -n 30 "$work/dblogd.log"
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT

step "a clean machine"
# known_to_dpkg PACKAGE: installed, or removed with its conffiles kept, or half-done
known_to_dpkg() {
  local st
  st=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != not-installed ]
}
for p in dblog postgresql-15-dblog; do
  ! known_to_dpkg "$p" || fail "package $p is installed already: apt-get purge $p first"
done
[ ! -e /etc/dblog ] || fail "/etc/dblog exists already"
! getent passwd dblog >/dev/null || fail "a user dblog exists already"
! getent group dblog >/dev/null || fail "a group dblog exists already"

# systemd-analyze (verify), setpriv (util-linux: runs ExecStart as User/Group, as systemd does,
# without a PAM session in between), lintian
step "test tools"
tools=()
command -v systemd-analyze >/dev/null || tools+=(systemd)
command -v lintian >/dev/null || tools+=(lintian)
command -v setpriv >/dev/null || tools+=(util-linux)
if [ ${#tools[@]} -gt 0 ]; then
  apt_root apt-get update -q
  apt_root apt-get install -y -q --no-install-recommends "${tools[@]}"
fi

step "build (scripts/build-packages.sh)"
start=$(date +%s)
if [ "${DBLOG_PACKAGES_NO_BUILD:-0}" = 1 ]; then
  echo "packaging: DBLOG_PACKAGES_NO_BUILD=1: testing dist/*.deb as they are"
else
  ./scripts/build-packages.sh
fi
echo "packaging: built in $(( $(date +%s) - start )) s"
debs=(dist/*.deb)
[ ${#debs[@]} -eq 2 ] || fail "expected 2 .debs in dist/, got: ${debs[*]}"

step "lintian (pedantic; overrides: debian/*.lintian-overrides)"
rc=0
lintian --pedantic --display-info --fail-on error,warning,info,pedantic "${debs[@]}" \
  >"$work/lintian.out" 2>&1 || rc=$?
grep -v 'running with root privileges is not recommended' "$work/lintian.out" || true
[ "$rc" -eq 0 ] || fail "lintian: exit status $rc, tags without an override (above)"

step "install: apt-get install -y ./dist/*.deb"
installed=1
apt_root apt-get install -y ./dist/*.deb
for p in dblog postgresql-15-dblog; do dpkg-query -L "$p" >"$work/$p.files"; done
for p in dblog postgresql-15-dblog; do
  as_root dpkg --verify "$p" || fail "dpkg --verify $p: installed files differ from the package"
done
[ "$(dpkg-query -S /usr/lib/postgresql/15/lib/dblog.so | cut -d: -f1)" = postgresql-15-dblog ] ||
  fail "dblog.so does not belong to postgresql-15-dblog"
[ -f /usr/share/postgresql/15/extension/dblog.control ] || fail "no dblog.control"
[ -f "$unit" ] || fail "no $unit"
[ -x /usr/bin/dblogd ] && [ -x /usr/bin/dblog ] || fail "no /usr/bin/dblogd or /usr/bin/dblog"
getent passwd dblog | grep -q ':/nonexistent:/usr/sbin/nologin$' ||
  fail "user dblog: $(getent passwd dblog)"
[ "$(id -u dblog)" -lt 1000 ] || fail "user dblog is not a system user"
[ "$(stat -c '%U:%G %a' "$conf")" = "root:dblog 640" ] ||
  fail "$conf is $(stat -c '%U:%G %a' "$conf"), not root:dblog 640"
grep -qx "$conf" "$work/dblog.files" || fail "$conf is not in dpkg -L dblog"
dpkg-query -W -f='${Conffiles}\n' dblog | grep -q " $conf " || fail "$conf is not a conffile"
# dh_installsystemd --no-enable: dblogd cannot start before the conffile names a source
if [ -e /etc/systemd/system/multi-user.target.wants/dblogd.service ]; then
  fail "dblogd.service was enabled on installation"
fi

step "the conffile lists every setting of dblogd --help, commented out"
settings=$(/usr/bin/dblogd --help | sed -nE 's/^  (-[a-z] \[ )?--([a-z-]+).*/\2/p' | sort -u)
[ -n "$settings" ] || fail "no settings in dblogd --help"
for s in $settings; do
  case $s in help | version | config | check | ddl-trigger-sql | unsafe-plain-windows) continue ;; esac
  grep -qE "^#$s =( |$)" "$conf" || fail "$conf does not list setting $s"
done
if grep -vE '^(#|$)' "$conf"; then fail "$conf sets something (above): all must be commented"; fi
# as shipped, dblogd refuses to start, naming what is missing (exit status 2)
rc=0; /usr/bin/dblogd --config "$conf" 2>"$work/unconfigured.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'source: required' "$work/unconfigured.err" ||
  fail "dblogd with the shipped conffile: exit $rc, $(cat "$work/unconfigured.err")"

step "systemd-analyze verify $unit"
# It runs without systemd as PID 1 (no container special case needed): it loads the unit and
# the units it names from disk. Lines about other units (not ours) are ignored.
rc=0
systemd-analyze verify "$unit" >"$work/verify.out" 2>&1 || rc=$?
cat "$work/verify.out"
[ "$rc" -eq 0 ] || fail "systemd-analyze verify: exit status $rc"
if grep -i 'dblogd' "$work/verify.out"; then fail "systemd-analyze verify complains about the unit"; fi
# the unit as the quick start below runs it
exec_start=$(sed -nE 's/^ExecStart=//p' "$unit")
exec_reload=$(sed -nE 's/^ExecReload=//p' "$unit")
unit_user=$(sed -nE 's/^User=//p' "$unit")
unit_group=$(sed -nE 's/^Group=//p' "$unit")
unit_env=$(sed -nE 's/^Environment=//p' "$unit")
[ "$exec_start" = "/usr/bin/dblogd --config $conf" ] || fail "ExecStart=$exec_start"
[ "$exec_reload" = '/bin/kill -HUP $MAINPID' ] || fail "ExecReload=$exec_reload"
[ "$unit_user" = dblog ] && [ "$unit_group" = dblog ] || fail "User=$unit_user Group=$unit_group"

step "quick start on the installed files: a throwaway cluster, CREATE EXTENSION dblog"
cluster_start
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION dblog;                 -- from the package: /usr/share/postgresql/15/extension
SELECT * FROM dblog.check_setup();
CREATE TABLE items (id int PRIMARY KEY, name text);
INSERT INTO items VALUES (1, 'one');
SQL
[ "$(psql -X -At -c "SELECT probin FROM pg_proc WHERE proname = 'encode_row'")" = '$libdir/dblog' ] ||
  fail "the extension's functions are not from \$libdir/dblog"

step "edit $conf (source, consumer, listen, metrics-listen)"
listen_port=$(free_port)
metrics_port=$(free_port)
as_root sed -i \
  -e "s|^#source = .*|source = host=127.0.0.1 port=$PGPORT user=postgres dbname=postgres|" \
  -e "0,/^#consumer = /s|^#consumer = .*|consumer = demo=public.*|" \
  -e "s|^#listen = .*|listen = 127.0.0.1:$listen_port|" \
  -e "s|^#metrics-listen = .*|metrics-listen = 127.0.0.1:$metrics_port|" "$conf"
grep -vE '^(#|$)' "$conf"
export DBLOG_METRICS_ADDRESS=127.0.0.1:$metrics_port DBLOG_PORT=$listen_port

# As the unit: its User and Group, its Environment, the ExecStart line, stderr to a file (the
# journal's part). env and setpriv exec, so $! below is dblogd itself (through sudo: sudo,
# which relays signals to it).
# shellcheck disable=SC2206  # Environment= may hold several assignments
as_unit=("${sudo_cmd[@]}" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin $unit_env
         setpriv --reuid="$unit_user" --regid="$unit_group" --init-groups --)
step "dblogd --check as the unit's user"
# shellcheck disable=SC2086
"${as_unit[@]}" $exec_start --check || fail "dblogd --check failed"

step "start dblogd as the unit would: $exec_start (User=$unit_user)"
# shellcheck disable=SC2086
"${as_unit[@]}" $exec_start 2>"$work/dblogd.log" &
dblogd_pid=$!
wait_for() {  # wait_for PATTERN FILE: up to 30 s
  for _ in $(seq 150); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.2; done
  return 1
}
wait_for 'event=metrics_listening' "$work/dblogd.log" || fail "dblogd did not start"
kill -0 "$dblogd_pid" 2>/dev/null || fail "dblogd exited at start"

step "dblog tail --consumer demo, then a row inserted"
/usr/bin/dblog tail --consumer demo --port "$listen_port" >"$work/tail.out" 2>"$work/tail.err" &
tail_pid=$!
wait_for '"op":"bootstrap_end"' "$work/tail.out" ||
  fail "no bootstrap_end in dblog tail: $(cat "$work/tail.out" "$work/tail.err")"
psql -X -q -v ON_ERROR_STOP=1 -c "INSERT INTO items VALUES (2, 'two')"
wait_for '"op":"insert","table":"public.items".*"row":{"id":2,"name":"two"}' "$work/tail.out" ||
  fail "the inserted row did not reach dblog tail: $(cat "$work/tail.out")"
grep '"op":"insert"' "$work/tail.out"

step "dblog status"
rc=0
/usr/bin/dblog status >"$work/status.out" 2>&1 || rc=$?
cat "$work/status.out"
[ "$rc" -eq 0 ] || fail "dblog status: exit status $rc"
grep -qE '^demo +streaming ' "$work/status.out" || fail "dblog status does not show demo streaming"

step "reload as ExecReload does (SIGHUP)"
# $MAINPID: dblogd (as root setpriv execs it; through sudo, sudo relays the signal)
as_root kill -HUP "$dblogd_pid"
wait_for 'event=config_reloaded' "$work/dblogd.log" || fail "no config_reloaded after SIGHUP"

step "stop (SIGTERM, as systemctl stop): exit status 0"
kill "$tail_pid"; wait "$tail_pid" 2>/dev/null || true; tail_pid=
as_root kill -TERM "$dblogd_pid"
rc=0; wait "$dblogd_pid" || rc=$?; dblogd_pid=
[ "$rc" -eq 0 ] || fail "dblogd exited $rc on SIGTERM"
! pgrep -u dblog >/dev/null || fail "processes of user dblog are still running"
tail -n 5 "$work/dblogd.log"

step "drop the consumer (operations.md: Removing the packages)"
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
SELECT pg_drop_replication_slot('dblog_demo');
DELETE FROM dblog.consumers WHERE name = 'demo';
SQL

step "purge: apt-get purge -y dblog postgresql-15-dblog"
apt_root apt-get purge -y -q dblog postgresql-15-dblog
installed=0
slots=$(psql -X -At -c "SELECT count(*) FROM pg_replication_slots")
[ "$slots" = 0 ] || fail "$slots replication slots are left in the cluster"
cluster_stop
left=()
while IFS= read -r f; do
  [ "$f" != /. ] || continue
  [ -e "$f" ] || [ -L "$f" ] || continue
  # directories other packages own too (/usr/bin, /lib/systemd/system, ...) stay
  if [ -d "$f" ] && dpkg-query -S "$f" >/dev/null 2>&1; then continue; fi
  left+=("$f")
done < <(cat "$work/dblog.files" "$work/postgresql-15-dblog.files")
[ ${#left[@]} -eq 0 ] || fail "left after purge: ${left[*]}"
[ ! -e /etc/dblog ] || fail "/etc/dblog is left after purge: $(ls -la /etc/dblog)"
! getent passwd dblog >/dev/null || fail "the user dblog is left after purge"
! getent group dblog >/dev/null || fail "the group dblog is left after purge"
! as_root dpkg-statoverride --list "$conf" >/dev/null || fail "the statoverride of $conf is left"
for f in /etc/systemd/system/multi-user.target.wants/dblogd.service \
         /var/lib/systemd/deb-systemd-helper-enabled/dblogd.service \
         /var/lib/systemd/deb-systemd-helper-masked/dblogd.service; do
  [ ! -e "$f" ] || fail "$f is left after purge"
done
for p in dblog postgresql-15-dblog; do
  ! known_to_dpkg "$p" || fail "dpkg still knows $p after purge"
done

echo "packaging: OK in $(( $(date +%s) - start )) s (the extension files of a make install, if any, are gone: make install again)"
