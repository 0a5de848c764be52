# A check's shards as Nix derivations (docs/distributed.md): shard I of N is
# a derivation whose builder runs `rewind check --shard I/N --results $out`,
# so Nix's own scheduler (remote builders, Hydra, `--max-jobs`) spreads them,
# and its output is the shard's records. Then, once:
#
#   rewind check --merge $(nix-build shards.nix -A shards --no-out-link ...)
#
# A check is a pure function of its inputs, so Nix may reuse a shard's output
# for the same inputs, as it reuses any build's.
{
  # The `rewind` command: a package's "${rewind}/bin/rewind", or (with
  # sandbox = false) a host path.
  rewind
, # How many shards.
  shards
, # `rewind check` options and, after "--", the program and its arguments
  # (a store path, so every builder has it), e.g.
  # [ "--schedules" "64" "--" "${myTests}/bin/flaky" ].
  checkArgs
, # A POSIX shell for the builder, e.g. "${pkgs.bash}/bin/bash".
  shell
, system ? builtins.currentSystem
}:
let
  shard = i:
    let name = "${toString i}/${toString shards}"; in
    derivation {
      name = "rewind-shard-${toString i}-of-${toString shards}";
      inherit system;
      builder = shell;
      # Only a builder with /dev/kvm takes it.
      requiredSystemFeatures = [ "kvm" ];
      args = [ "-c" ''
        REWIND_HOME=$TMPDIR/rewind-home
        export REWIND_HOME
        # Exit 1 (a violation found) is an answer, not a failed build.
        ${rewind} check --shard ${name} --results "$out" "$@" || test $? -eq 1
      '' "rewind-shard" ] ++ checkArgs;
    };
in
{
  shards = map shard (builtins.genList (i: i + 1) shards);
}
