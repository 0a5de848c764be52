{
  description = "Rewind: a Linux program's run, thread schedule included, as a pure function of its inputs";

  # No flake.lock is committed: it is made on your first `nix build` (these
  # machines reach no nixpkgs). What evaluates without nixpkgs is
  # nix/examples.nix with a local toolchain (README, "Nix builds").
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = nixpkgs.legacyPackages.${system};
      rewind = pkgs.rustPlatform.buildRustPackage {
        pname = "rewind";
        version = "0.1.0";
        src = self;
        cargoLock.lockFile = ./Cargo.lock;
        cargoBuildFlags = [ "-p" "rewind-adapter" ];
        # The examples are built static by adapter/build.rs.
        nativeBuildInputs = [ pkgs.glibc.static ];
        # The tests drive KVM, which a build sandbox does not have.
        doCheck = false;
      };
      examples = import ./nix/examples.nix { inherit (pkgs) stdenv rustc; inherit system; };
    in
    {
      packages.${system} = examples // { default = rewind; inherit rewind; };

      # `nix run .# -- check .#bank`
      apps.${system}.default = {
        type = "app";
        program = "${rewind}/bin/rewind";
      };

      devShells.${system}.default = pkgs.mkShell {
        inputsFrom = [ rewind ];
        packages = with pkgs; [ cargo rustc clippy rustfmt gdb sqlite busybox nix nodejs glibc.static ];
      };

      # Each fixed example builds and passes its checkPhase.
      checks.${system} = nixpkgs.lib.filterAttrs (n: _: nixpkgs.lib.hasSuffix "-fixed" n) examples;
    };
}
