#!/bin/sh
# deps.sh — install what headstart needs to build and test: Debian packages (apt) and the
# npm packages pinned in package.json / package-lock.json. Idempotent: installs only what
# is missing. On a machine without apt it prints what to install and stops.
set -eu
DEB_PACKAGES="build-essential clang libclang-rt-14-dev pkg-config git \
libjansson-dev libcriterion-dev libmicrohttpd-dev libpcre2-dev libutf8proc-dev \
libsqlite3-dev libssl-dev libxxhash-dev python3-numpy python3-jinja2 curl nodejs npm \
gnuplot-nox bear clang-format libhiredis-dev redis-server patchelf"

missing=""
for p in $DEB_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# nodejs/npm may come from elsewhere than Debian (as on these machines): accept any node >= 20
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    missing=$(echo "$missing" | tr ' ' '\n' | grep -vx -e nodejs -e npm | tr '\n' ' ')
fi
missing=$(echo "$missing" | xargs)
if [ -n "$missing" ]; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "deps: installing Debian packages: $missing"
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
    else
        echo "deps: this machine has no apt-get; install these (Debian names): $missing" >&2
        exit 1
    fi
fi

# npm packages: reinstall only when the lockfile changed since the last install, or
# package.json was edited after it (a new pin not yet in the lockfile).
stamp=node_modules/.headstart-stamp
if [ ! -f "$stamp" ] || ! cmp -s package-lock.json "$stamp" || [ package.json -nt "$stamp" ]; then
    echo "deps: installing npm packages (package-lock.json)"
    # node-llama-cpp 3.22.1's lockfile lists optional mac/win binaries missing from the
    # registry, so `npm ci` fails; install the exact pins instead and skip its download.
    # Optional packages are omitted and install scripts not run: the native binaries the
    # tests need (node-llama-cpp's, Codex's, Claude Code's; linux-x64) are direct pins in
    # package.json, and tests/e2e/clients.sh runs them from node_modules directly.
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --omit=optional --no-audit --no-fund \
        --ignore-scripts >/dev/null
    cp package-lock.json "$stamp"
fi
