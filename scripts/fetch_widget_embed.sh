#!/usr/bin/env bash
# Fetch the offline widget renderer of the HTML reports: the standalone dist/embed.js of
# @jupyter-widgets/html-manager (pinned, checksum-verified), by `npm pack` from the npm registry into the
# ignored cache data/cache/npm/. Called by scripts/bootstrap.sh and, when the file is missing, by
# spectree.export. Idempotent. Never fails its caller: without npm or the registry it warns and exits 0,
# and reports then show widgets as text and say so.
set -uo pipefail
cd "$(dirname "$0")/.."
VERSION=1.0.15   # pairs with ipywidgets 8.1 (@jupyter-widgets/controls 5, base 6)
SHA256=2b9d65cb7913e1c7d671757a10008b32c9c2448d4429513371e55c07d6107638
dest=data/cache/npm/html-manager-$VERSION
[[ -f $dest/dist/embed.js ]] && exit 0
warn() { echo "fetch_widget_embed: $*; HTML reports will show widgets as text" >&2; exit 0; }
command -v npm >/dev/null || warn "npm not found"
mkdir -p data/cache/npm
tmp=$(mktemp -d data/cache/npm/.fetch.XXXXXX) || warn "cannot create a temporary folder"
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && timeout 180 npm pack --silent --loglevel=error "@jupyter-widgets/html-manager@$VERSION" \
    >/dev/null 2>npm.log ) || warn "npm pack @jupyter-widgets/html-manager@$VERSION failed ($(tail -1 "$tmp/npm.log"))"
tgz=$tmp/jupyter-widgets-html-manager-$VERSION.tgz
[[ -f $tgz ]] || warn "npm pack wrote no $tgz"
echo "$SHA256  $tgz" | sha256sum -c --quiet - || warn "checksum mismatch for $tgz"
mkdir -p "$tmp/out"
tar xzf "$tgz" -C "$tmp/out" --strip-components=1 package/package.json package/dist/embed.js \
    package/dist/embed.js.LICENSE.txt --wildcards 'package/dist/*.woff2' || warn "cannot unpack $tgz"
rm -rf "$dest" && mv "$tmp/out" "$dest" || warn "cannot move the files to $dest"
echo "fetched @jupyter-widgets/html-manager@$VERSION embed.js into $dest"
