#!/usr/bin/env bash
# Make sure the browser of the browser test suite (tests/browser) is installed, and print
# its version. Idempotent: it installs nothing when everything is already there.
#
# The suite drives Debian's Chromium with Playwright (the PyPI package, from
# requirements.txt) and never downloads a browser of its own: `playwright install` needs
# the network, which CI does not have. RNNBOOK_CHROMIUM names another Chromium binary.
set -euo pipefail

chromium="${RNNBOOK_CHROMIUM:-/usr/bin/chromium}"
packages=()

if [ ! -x "$chromium" ]; then
    if [ -n "${RNNBOOK_CHROMIUM:-}" ]; then
        echo "RNNBOOK_CHROMIUM=$chromium is not an executable file" >&2
        exit 1
    fi
    packages+=(chromium)
fi
# Without recommends, chromium brings no font; the screenshots need at least one.
if [ -z "$(find /usr/share/fonts -name '*.[ot]tf' -print -quit 2>/dev/null)" ]; then
    packages+=(fonts-dejavu-core)
fi

if [ "${#packages[@]}" -gt 0 ]; then
    echo "Installing Debian's ${packages[*]}"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # A fresh machine has no package lists yet; an out-of-date list fails the install.
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${packages[@]}"
fi

# Debian's wrapper script prints harmless noise on stderr; keep only the version line.
"$chromium" --version 2>/dev/null | tail -n 1
