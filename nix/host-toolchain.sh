#!/usr/bin/env bash
# Collects this host's C toolchain into DIR for nix/toolchain.nix, which
# makes it a store path that runs with no file outside it: gcc, cc1,
# collect2, as and ld, the shared libraries and loader they run on, the
# static C library with its headers, a static busybox (bin/sh and its
# applets), and rustc with the standard library for x86_64 Linux when the
# host has a rustc (the machine's rustup toolchain: hash-order is Rust).
# The tests call it once (tests/tests/nix.rs) on Debian with gcc,
# libc6-dev, binutils, patchelf and busybox-static installed.
#
#   nix/host-toolchain.sh DIR
set -euo pipefail
out=${1:?usage: nix/host-toolchain.sh DIR}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"

# A host file at the same path under $out.
put() { mkdir -p "$out$(dirname "$1")" && cp -L "$1" "$out$1"; }

gcc_dir=$(dirname "$(gcc -print-prog-name=cc1)")
programs=(
    "$(readlink -f "$(command -v gcc)")=/usr/bin/gcc"
    "$(readlink -f "$(command -v as)")=/usr/bin/as"
    "$(readlink -f "$(command -v ld)")=/usr/bin/ld"
    "$(readlink -f "$(command -v patchelf)")=/usr/bin/patchelf"
    "$gcc_dir/cc1=$gcc_dir/cc1"
    "$gcc_dir/collect2=$gcc_dir/collect2"
    "$gcc_dir/lto-wrapper=$gcc_dir/lto-wrapper"
)
for p in "${programs[@]}"; do
    mkdir -p "$out$(dirname "${p#*=}")"
    cp -L "${p%%=*}" "$out${p#*=}"
done
# What gcc links a static program with, and its own headers.
for f in "$gcc_dir"/crt*.o "$gcc_dir"/libgcc.a "$gcc_dir"/libgcc_eh.a "$gcc_dir"/liblto_plugin.so; do
    put "$f"
done
cp -r "$gcc_dir/include" "$out$gcc_dir/"
# The C library's static archives, start files and headers, and the
# kernel's headers they include.
dpkg -L libc6-dev linux-libc-dev | grep -E '^/usr/(include|lib)/' | while read -r f; do
    [ -f "$f" ] && put "$f"
done

# The shared libraries the programs need, and the loader, by soname.
for p in "${programs[@]}"; do
    ldd "${p%%=*}" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}'
done | sort -u | while read -r lib; do
    cp -L "$lib" "$out/lib/$(basename "$lib")"
done

# rustc, when the host has one (rustup's or Debian's), in its sysroot's
# layout with $out as the sysroot: bin/rustc, the libraries it runs on
# (its driver and LLVM among them) in lib/ beside the C toolchain's, and
# for x86_64-unknown-linux-gnu only the standard library's rlibs and the
# linker rustc drives through cc where it has one (rust-lld, gcc-ld/ld.lld).
if command -v rustc >/dev/null; then
    sysroot=$(rustc --print sysroot)
    target=lib/rustlib/x86_64-unknown-linux-gnu
    cp -L "$sysroot/bin/rustc" "$out/bin/rustc"
    mkdir -p "$out/$target/lib"
    # The rlibs and, where this rustc keeps the crates' metadata apart,
    # their .rmeta.
    for f in "$sysroot/$target"/lib/*.rlib "$sysroot/$target"/lib/*.rmeta; do
        if [ -f "$f" ]; then cp "$f" "$out/$target/lib/"; fi
    done
    linkers=()
    for f in bin/rust-lld bin/gcc-ld/ld.lld; do
        if [ -f "$sysroot/$target/$f" ]; then
            mkdir -p "$(dirname "$out/$target/$f")"
            cp -L "$sysroot/$target/$f" "$out/$target/$f"
            linkers+=("$sysroot/$target/$f")
        fi
    done
    for p in "$sysroot/bin/rustc" "${linkers[@]}"; do
        ldd "$p" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}'
    done | sort -u | while read -r lib; do
        cp -L "$lib" "$out/lib/$(basename "$lib")"
    done
fi

busybox=$(command -v busybox)
cp -L "$busybox" "$out/bin/busybox"
for applet in $("$out/bin/busybox" --list); do
    [ -e "$out/bin/$applet" ] || ln -s busybox "$out/bin/$applet"
done
