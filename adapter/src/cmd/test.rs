//! `rewind test [CHECK OPTIONS] -- TEST-BINARY [ARGS]`: a test binary
//! (libtest, `go test -c`, gtest, a shell test) checked under perturbed
//! schedules, a failing exit in any of them being the failure: `rewind
//! check --property exit=0` unless other properties are given. With
//! `--artifacts DIR` the failing run lands in DIR as a replayable `.rwd`
//! (docs/ci.md).

use super::check::CheckArgs;
use anyhow::Result;

pub fn main(mut args: CheckArgs) -> Result<i32> {
    if args.properties.is_empty() && args.properties_file.is_none() {
        args.properties.push("exit=0".into());
    }
    super::check::main(args)
}
