//! The CI recipes in contrib/ci are valid by their engines' schemas:
//! check-jsonschema (from PyPI, in tests/tools/check-jsonschema, installed
//! by scripts/setup-tests) and the GitHub workflow and GitLab CI schemas it
//! carries, so no network is needed. A broken copy is refused, so the
//! validator is seen to judge. (The Kubernetes Job has no schema this
//! validator carries offline: it is untested, docs/distributed.md says so.)

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `check-jsonschema --builtin-schema SCHEMA FILE`: whether it validates, and what it said.
fn validate(schema: &str, file: &Path) -> (bool, String) {
    let bin = root().join("tests/tools/check-jsonschema/bin/check-jsonschema");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/setup-tests",
        bin.display()
    );
    let out = std::process::Command::new(&bin)
        .args(["--builtin-schema", schema])
        .arg(file)
        .output()
        .expect("check-jsonschema runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn github_and_gitlab_recipes_are_valid() {
    let ci = root().join("contrib/ci");
    for (schema, file) in [
        ("vendor.github-workflows", "github-actions.yml"),
        ("vendor.gitlab-ci", "gitlab-ci.yml"),
        ("vendor.gitlab-ci", "gitlab-shards.yml"),
    ] {
        let (ok, said) = validate(schema, &ci.join(file));
        assert!(ok, "contrib/ci/{file} is not a valid {schema}:\n{said}");
    }
    // The same recipes, broken where a user could break them: refused.
    let dir = tempfile::tempdir().unwrap();
    let gitlab = std::fs::read_to_string(ci.join("gitlab-shards.yml")).unwrap();
    let broken = dir.path().join("gitlab-shards.yml");
    std::fs::write(&broken, gitlab.replace("parallel: 4", "parallel: many")).unwrap();
    let (ok, said) = validate("vendor.gitlab-ci", &broken);
    assert!(!ok, "`parallel: many` is refused:\n{said}");
    let github = std::fs::read_to_string(ci.join("github-actions.yml")).unwrap();
    let broken = dir.path().join("github-actions.yml");
    std::fs::write(&broken, github.replace("runs-on:", "runs_on:")).unwrap();
    let (ok, said) = validate("vendor.github-workflows", &broken);
    assert!(!ok, "a job without runs-on is refused:\n{said}");
}
