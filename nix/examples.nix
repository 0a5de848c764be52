# Rewind's examples as Nix derivations: each compiles its program inside the
# build and runs it in its checkPhase, where its exit status is the test (0
# passes; bank exits 2 when a deposit was lost). Each has its fixed twin,
# NAME-fixed. `rewind nix` builds one as a run and `rewind check` looks for
# the schedule that fails its checkPhase.
#
# Plain Nix, a function of a toolchain, so it evaluates with or without
# nixpkgs:
#   import ./nix/examples.nix { inherit (pkgs) stdenv rustc; }   # nixpkgs (flake.nix)
#   import ./nix/examples.nix { toolchain = /nix/store/...; }    # offline: a store
#     path with bin/sh and a static-capable bin/cc (and bin/rustc for hash-order)
{ stdenv ? null
, rustc ? null
, toolchain ? null
, system ? "x86_64-linux"
}:
let
  src = ../guest/examples;
  programs = {
    bank = "c";
    philosophers = "c";
    waiter = "c";
    config-reload = "c";
    pool = "c";
    hash-order = "rs";
  };
  compile = name: lang:
    if lang == "c"
    then "cc -static -O1 -g -pthread -Wall ${samePlace} -o ${name} ${src}/${name}.c"
    else "rustc -C target-feature=+crt-static -O -g --remap-path-prefix=$NIX_BUILD_TOP=/build -o ${name} ${src}/${name}.rs";
  # The debug info names the build's directory: /build in a sandbox and in
  # `rewind nix`, /tmp/nix-build-... in a build without one. Named /build
  # everywhere, the output is the same bytes wherever it was built.
  samePlace = "-ffile-prefix-map=$NIX_BUILD_TOP=/build";
  install = name: "mkdir -p $out/bin && cp ${name} $out/bin/";

  withStdenv = name: lang: stdenv.mkDerivation {
    inherit name;
    dontUnpack = true;
    nativeBuildInputs = if lang == "rs" then [ rustc ] else [ ];
    buildPhase = compile name lang;
    doCheck = true;
    checkPhase = "./${name}";
    installPhase = install name;
  };

  offline = name: lang: derivation {
    inherit name system;
    builder = "${toolchain}/bin/sh";
    PATH = "${toolchain}/bin";
    args = [ "-e" "-c" ''
      ${compile name lang}
      ./${name}
      ${install name}
    '' ];
  };

  one = if stdenv != null then withStdenv
    else if toolchain != null then offline
    else throw "nix/examples.nix: give stdenv (nixpkgs) or toolchain (a store path)";

  both = name: lang: {
    ${name} = one name lang;
    "${name}-fixed" = one "${name}-fixed" lang;
  };
in
builtins.foldl' (acc: name: acc // both name programs.${name}) { } (builtins.attrNames programs)
