#!/bin/sh
# Fetch micropython-lib's umqtt/simple.py (1.3.4, the one release on PyPI)
# into a git-ignored folder for the MicroPython unix-port tests, pinned by
# sha256.  The sdist has no build metadata, so pip downloads and unpacks it
# and then fails; --no-clean keeps the unpacked tree.
# usage: tools/get_umqtt.sh [dest]   (default build/mplib)
set -eu
dest="${1:-build/mplib}"
py="${PYTHON:-python3}"
sha="8555d2f654deb8eb0d724f79b0811a78cc94029d070f3d96bbd74288653d63a5"
ok() { [ -f "$dest/umqtt/simple.py" ] && echo "$sha  $dest/umqtt/simple.py" | sha256sum -c --status -; }
ok && exit 0
# Parallel test workers fetch at once: one at a time (the others then find it
# there), and the file appears whole or not at all (a rename).
mkdir -p "$dest"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$dest/.get_umqtt.lock"
    flock 9
    ok && exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
TMPDIR="$tmp" "$py" -m pip download --no-clean --no-deps --no-binary :all: \
    -d "$tmp/dl" "micropython-umqtt.simple==1.3.4" >"$tmp/pip.log" 2>&1 || true
src="$(find "$tmp" -path '*/umqtt/simple.py' | head -n 1)"
[ -n "$src" ] || { echo "get_umqtt: umqtt/simple.py not found (see pip log)" >&2; cat "$tmp/pip.log" >&2; exit 1; }
echo "$sha  $src" | sha256sum -c --status - || { echo "get_umqtt: sha256 mismatch" >&2; exit 1; }
mkdir -p "$dest/umqtt"
[ -f "$dest/umqtt/__init__.py" ] || : > "$dest/umqtt/__init__.py"
cp "$src" "$dest/umqtt/simple.py.$$"
mv -f "$dest/umqtt/simple.py.$$" "$dest/umqtt/simple.py"
echo "umqtt.simple 1.3.4 -> $dest/umqtt/simple.py"
