//! Names the commit the service is built from, for `provisioner --version`, `GET /version` and
//! `provisioner_build_info`: `PROVISIONER_COMMIT` when set (image builds without `.git`), else the checkout's HEAD.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PROVISIONER_COMMIT");
    let commit = std::env::var("PROVISIONER_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(head_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PROVISIONER_COMMIT={}", commit.trim());
}

/// HEAD of the checkout, rebuilding when it moves. Only files that exist are watched: Cargo reruns a build script
/// on every build for a watched path that is missing.
fn head_commit() -> Option<String> {
    let mut watched = vec!["HEAD".to_owned(), "packed-refs".to_owned()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    // `--git-path` resolves each name for worktrees too (HEAD is per worktree, branches are shared).
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]).filter(|path| Path::new(path).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    git(&["rev-parse", "HEAD"])
}

fn git(arguments: &[&str]) -> Option<String> {
    let output = Command::new("git").args(arguments).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !text.trim().is_empty()).then(|| text.trim().to_owned())
}
