#!/usr/bin/env bash
# `make dist`: the rocks of this version into dist/, for users without a
# Rust toolchain.
#
#   dist/tecs-profile-VERSION-1.src.rock           the source rock (needs cargo to build)
#   dist/tecs-profile-VERSION-1.linux-x86_64.rock   a binary rock: `luarocks install` copies, builds nothing
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

# The source rock: the rockspec and the tracked tree at HEAD.
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
