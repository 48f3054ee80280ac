#!/usr/bin/env bash
# Checks that vendor/hyper is the published hyper crate with vendor/hyper.patch applied, and
# nothing else (vendor/hyper/ZIPWIRE.md says why the copy exists and how to upgrade it).
#
#   vendor/check-hyper.sh          fails if vendor/hyper differs from crate + patch
#   vendor/check-hyper.sh --write  rewrites vendor/hyper.patch from vendor/hyper
#
# The published source comes from cargo's own download of the crate (a throwaway project that
# depends on the exact version vendor/hyper/Cargo.toml names, `cargo fetch`), unpacked from
# the verified .crate file in cargo's cache, so no other host is reached. Needs cargo, git
# and tar.
set -euo pipefail

cd "$(dirname "$0")"
vendored=$(pwd)/hyper
patch_file=$(pwd)/hyper.patch

# Files of the published crate that zipwire's copy leaves out. Cargo writes them when it
# packages or unpacks a crate; none is read when the copy builds as a path dependency
# (the workspace's Cargo.lock, not hyper's, pins the versions).
packaging=(.cargo-ok .cargo_vcs_info.json Cargo.toml.orig Cargo.lock)
# zipwire's files in the copy, which are not hyper's; target/ is a build's output.
ours=(ZIPWIRE.md target)

mode=check
case "${1:-}" in
    "") ;;
    --write) mode=write ;;
    *)
        echo "usage: $0 [--write]" >&2
        exit 2
        ;;
esac

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$vendored/Cargo.toml" | head -n 1)
[ -n "$version" ] || { echo "no version in $vendored/Cargo.toml" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The published crate, through cargo.
mkdir -p "$tmp/fetch/src"
cat > "$tmp/fetch/Cargo.toml" << EOF
[package]
name = "zipwire-hyper-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
hyper = "=$version"

[workspace]
EOF
echo 'fn main() {}' > "$tmp/fetch/src/main.rs"
cargo fetch -q --manifest-path "$tmp/fetch/Cargo.toml"
crate=$(find "${CARGO_HOME:-$HOME/.cargo}/registry/cache" -name "hyper-$version.crate" | head -n 1)
[ -n "$crate" ] || { echo "cargo fetch left no hyper-$version.crate in its cache" >&2; exit 1; }

# a/: published, less the packaging files. b/: zipwire's copy, less zipwire's own files.
mkdir "$tmp/unpacked"
tar -xzf "$crate" -C "$tmp/unpacked"
mv "$tmp/unpacked/hyper-$version" "$tmp/a"
for f in "${packaging[@]}"; do rm -rf "${tmp:?}/a/$f"; done
excludes=()
for f in "${ours[@]}"; do excludes+=(--exclude "$f"); done

if [ "$mode" = write ]; then
    mkdir "$tmp/b"
    tar -C "$vendored" "${excludes[@]}" -cf - . | tar -C "$tmp/b" -xf -
    # Plain git diff, whatever the user's configuration; the a/ and b/ directories give
    # the paths the a/ and b/ prefixes that `git apply` and `patch -p1` expect.
    status=0
    (cd "$tmp" && git -c core.quotepath=off -c diff.noprefix=false diff --no-index --no-prefix \
        --no-color --no-ext-diff --no-renames --diff-algorithm=myers -U3 a b) \
        > "$patch_file" || status=$?
    [ "$status" = 1 ] || { echo "git diff found no difference (status $status)" >&2; exit 1; }
    echo "wrote $patch_file ($(grep -c '^diff --git' "$patch_file") files)"
    exit 0
fi

(cd "$tmp/a" && git apply --whitespace=nowarn "$patch_file") \
    || { echo "vendor/hyper.patch does not apply to hyper $version" >&2; exit 1; }
if ! diff -r "${excludes[@]}" "$tmp/a" "$vendored" > "$tmp/diff"; then
    sed "s|$tmp/a|hyper-$version+patch|g; s|$vendored|vendor/hyper|g" "$tmp/diff" >&2
    echo "vendor/hyper is not hyper $version with vendor/hyper.patch (above: patched, then" \
        "vendor/hyper). Mark the change \`zipwire patch\` and run vendor/check-hyper.sh" \
        "--write, or undo it (vendor/hyper/ZIPWIRE.md)." >&2
    exit 1
fi
# Every change is marked, so a reader of vendor/hyper finds them: each hunk of the patch has a
# `zipwire patch` comment among its lines.
unmarked=$(awk '/^diff --git/ { file = substr($3, 3); next }
    /^@@/ { if (hunk != "" && !marked) print hunk; hunk = file " " $0; marked = 0; next }
    /zipwire patch/ { marked = 1 }
    END { if (hunk != "" && !marked) print hunk }' "$patch_file")
if [ -n "$unmarked" ]; then
    echo "$unmarked" >&2
    echo "these hunks of vendor/hyper.patch have no \`zipwire patch\` comment: mark them" >&2
    exit 1
fi
echo "vendor/hyper is hyper $version with vendor/hyper.patch ($(grep -c '^diff --git' "$patch_file") files)"
