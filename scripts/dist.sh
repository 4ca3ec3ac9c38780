#!/usr/bin/env bash
# `make dist`: the rocks of this version into dist/, for users without a
# Rust toolchain.
#
#   dist/tecs-profile-VERSION-1.src.rock             the source rock (needs cargo to build)
#   dist/tecs-profile-VERSION-1.linux-x86_64.rock     a binary rock: `luarocks install` copies, builds nothing
#   dist/tecs-profile-VERSION-1.linux-aarch64.rock    the same for Linux arm64 (cross-built)
#   dist/tecs-profile-VERSION-1.windows-x86_64.rock   the same for Windows (cross-built with mingw-w64)
#   dist/tecs-profile-VERSION-love.zip                for a LÖVE game: the Lua package and the native
#                                                     libraries of the three platforms, to unpack into
#                                                     the game's folder (docs/integrations.md says how)
#
# DIST_TARGETS chooses (default: all of "host aarch64 windows love"; "host"
# is the source rock and this machine's binary rock), DIST_LOVE_PLATFORMS
# the libraries in the LÖVE zip (default: "linux-x86_64 linux-aarch64
# windows-x86_64"). The cross builds need what scripts/arm64.sh and
# scripts/windows.sh install.
#
# A binary rock is a zip of the files `make install` puts in a tree (lib/,
# lua/, bin/, and the rock's own plugin/ for Neovim), the rockspec, and a
# rock_manifest holding each file's MD5, which `luarocks install` checks.
# The native library is the release build, stripped.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
rev=1
name="tecs-profile-$version-$rev"
spec="rockspec/$name.rockspec"
[ -f "$spec" ] || { echo "dist: $spec is missing (the versioned rockspec of Cargo.toml's version)" >&2; exit 1; }
mkdir -p dist
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The rock_manifest of the files under $1, as luarocks writes it.
manifest() {
  python3 - "$1" "$name.rockspec" <<'EOF'
import hashlib, os, sys
root, rockspec = sys.argv[1], sys.argv[2]
def md5(p):
    with open(p, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()
def tree(d, indent):
    out = []
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        if os.path.isdir(p):
            out.append('%s["%s"] = {\n%s%s}' % (indent, n, ",\n".join(tree(p, indent + "   ")) + "\n", indent))
        else:
            out.append('%s["%s"] = "%s"' % (indent, n, md5(p)))
    return out
entries = []
for top in sorted(os.listdir(root)):
    p = os.path.join(root, top)
    if top == "rock_manifest":
        continue
    if os.path.isdir(p):
        entries.append('   %s = {\n%s\n   }' % (top, ",\n".join(tree(p, "      "))))
    else:
        entries.append('   ["%s"] = "%s"' % (top, md5(p)))
print("rock_manifest = {\n" + ",\n".join(entries) + "\n}")
EOF
}

# zip $2 from the directory $1 (its contents at the top of the archive).
zipdir() {
  python3 - "$1" "$2" <<'EOF'
import os, sys, zipfile
root, out = sys.argv[1], os.path.abspath(sys.argv[2])
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            z.write(p, os.path.relpath(p, root))
EOF
}

targets=" ${DIST_TARGETS:-host aarch64 windows love} "
wants() { [[ "$targets" == *" $1 "* ]]; }

# The Lua files of the package, as `make install` lays them out, into $1.
lua_tree() {
  make --no-print-directory -s print-lua-files | while read -r f; do
    rel=${f#lua/}; mkdir -p "$1/$(dirname "$rel")"; cp "$f" "$1/$rel"
  done
}

# A binary rock for ARCH from the native library LIB (named NATIVE in it).
cross_rock() { # arch lib native strip
  local arch=$1 lib=$2 native=$3 strip=$4 stage="$work/rock-$1"
  mkdir -p "$stage/lib/tecs/profile" "$stage/bin"
  lua_tree "$stage/lua"
  "$strip" -o "$stage/lib/tecs/profile/$native" "$lib"
  cp bin/tecs-profile "$stage/bin/tecs-profile"
  cp -r plugin "$stage/plugin"
  cp "$spec" "$stage/"
  manifest "$stage" > "$stage/rock_manifest"
  rm -f "dist/$name.$arch.rock"
  zipdir "$stage" "dist/$name.$arch.rock"
  echo "dist/$name.$arch.rock"
}

if ! wants host; then skip_host=1; fi

# The source rock: the rockspec and the tracked tree at HEAD.
if [ -z "${skip_host:-}" ]; then
git archive --format=tar.gz --prefix="tecs-profile-$version/" -o "$work/tecs-profile-$version.tar.gz" HEAD
mkdir -p "$work/src"
cp "$spec" "$work/tecs-profile-$version.tar.gz" "$work/src/"
rm -f "dist/$name.src.rock"
zipdir "$work/src" "dist/$name.src.rock"
echo "dist/$name.src.rock"

# The binary rock for this machine: what `make install` puts in a tree.
make --no-print-directory build >/dev/null
stage="$work/bin-rock"
make --no-print-directory install INST_LIBDIR="$stage/lib" INST_LUADIR="$stage/lua" INST_BINDIR="$stage/bin" >/dev/null
# The launcher as the source has it: in a luarocks tree, the wrapper
# luarocks writes sets the tree's paths (bin/tecs-profile says so).
cp bin/tecs-profile "$stage/bin/tecs-profile"
cp -r plugin "$stage/plugin"
cp "$spec" "$stage/"
manifest "$stage" > "$stage/rock_manifest"
arch="linux-$(uname -m)"
rm -f "dist/$name.$arch.rock"
zipdir "$stage" "dist/$name.$arch.rock"
echo "dist/$name.$arch.rock"
fi

aarch64_lib=target/aarch64-unknown-linux-gnu/release/libtecs_profile.so
windows_lib=target/x86_64-pc-windows-gnu/release/tecs_profile.dll
love_platforms=" ${DIST_LOVE_PLATFORMS:-linux-x86_64 linux-aarch64 windows-x86_64} "
love_has() { wants love && [[ "$love_platforms" == *" $1 "* ]]; }
if wants aarch64 || love_has linux-aarch64; then
  rustup target add aarch64-unknown-linux-gnu >/dev/null 2>&1
  CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
    cargo build --quiet --release --target aarch64-unknown-linux-gnu -p tecs-profile
fi
if wants windows || love_has windows-x86_64; then
  rustup target add x86_64-pc-windows-gnu >/dev/null 2>&1
  cargo build --quiet --release --target x86_64-pc-windows-gnu -p tecs-profile
fi
if wants aarch64; then cross_rock linux-aarch64 "$aarch64_lib" native.so aarch64-linux-gnu-strip; fi
if wants windows; then cross_rock windows-x86_64 "$windows_lib" native.dll x86_64-w64-mingw32-strip; fi

# For LÖVE: tecs/ with the Lua package, and each platform's library where
# LÖVE's C loader looks for `tecs.profile.native` (love.filesystem's C
# require path, "??" by default: tecs/profile/native.so or .dll), named per
# platform in platforms/ for the game to copy the right one into place.
if wants love; then
  make --no-print-directory build >/dev/null
  stage="$work/love"
  lua_tree "$stage"
  for p in $love_platforms; do mkdir -p "$stage/platforms/$p/tecs/profile"; done
  if love_has linux-x86_64; then
    strip -o "$stage/platforms/linux-x86_64/tecs/profile/native.so" build/lib/tecs/profile/native.so
  fi
  if love_has linux-aarch64; then
    aarch64-linux-gnu-strip -o "$stage/platforms/linux-aarch64/tecs/profile/native.so" "$aarch64_lib"
  fi
  if love_has windows-x86_64; then
    x86_64-w64-mingw32-strip -o "$stage/platforms/windows-x86_64/tecs/profile/native.dll" "$windows_lib"
  fi
  rm -f "dist/tecs-profile-$version-love.zip"
  zipdir "$stage" "dist/tecs-profile-$version-love.zip"
  echo "dist/tecs-profile-$version-love.zip"
fi
