# A C toolchain as a store path that needs no file outside it, made from
# the host's (nix/host-toolchain.sh collects it into a directory, `host`):
# its programs are patched to run on its own loader and libraries, and
# bin/cc compiles with it as the system root; bin/rustc, when the host had
# one, has this path as its sysroot and links through bin/cc. bin/ has
# busybox's applets too, so a derivation can use it as its builder and its
# PATH:
#
#   builder = "${toolchain}/bin/sh"; PATH = "${toolchain}/bin";
#
# Made offline where no nixpkgs is reachable (the tests); with nixpkgs,
# nix/examples.nix takes stdenv instead.
{ host, system ? "x86_64-linux" }:
derivation {
  name = "host-toolchain";
  inherit system;
  builder = "${host}/bin/sh";
  PATH = "${host}/bin";
  args = [ "-e" "-c" ''
    cp -a ${host} $out
    chmod -R u+w $out
    # The loader and libraries are this path's; patchelf runs on the
    # host directory's through its loader, named here (nothing is at
    # /lib64 in a build).
    patchelf="${host}/lib/ld-linux-x86-64.so.2 --library-path ${host}/lib ${host}/usr/bin/patchelf"
    for p in usr/bin/gcc usr/bin/as usr/bin/ld usr/bin/patchelf \
        usr/lib/gcc/x86_64-linux-gnu/*/cc1 usr/lib/gcc/x86_64-linux-gnu/*/collect2 \
        usr/lib/gcc/x86_64-linux-gnu/*/lto-wrapper \
        bin/rustc lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld \
        lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld/ld.lld; do
      # rustc and its linker are there when the host had them.
      [ -e $out/$p ] || continue
      $patchelf --set-interpreter $out/lib/ld-linux-x86-64.so.2 \
        --force-rpath --set-rpath $out/lib $out/$p
    done
    ln -s ../usr/bin/as ../usr/bin/ld ../usr/bin/patchelf $out/bin/
    printf '#!%s\nexec %s --sysroot=%s "$@"\n' $out/bin/sh $out/usr/bin/gcc $out > $out/bin/cc
    chmod +x $out/bin/cc
    ln -s cc $out/bin/gcc
  '' ];
}
