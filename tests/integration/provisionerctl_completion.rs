//! `provisionerctl completion bash|zsh|fish` prints a completion script naming every command (issue #54 item 4):
//! bash parses it and registers it for provisionerctl. It needs no server: a config file that is missing, which
//! every other command refuses, does not keep it from the shell.

use std::process::Command;

use crate::provisionerctl_support::{ctl_in, nowhere};

const COMMANDS: [&str; 6] = ["get", "runtimes", "create", "wait", "logs", "completion"];

/// `bash -c script` with the completion script at `$1`; returns whether it succeeded, and its output and errors.
fn bash(script: &str, file: &std::path::Path) -> (bool, String) {
    let ran = Command::new("bash").args(["-c", script, "bash"]).arg(file).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    (ran.status.success(), said)
}

#[tokio::test]
async fn provisionerctl_prints_completion_scripts_that_bash_loads() {
    let folder = tempfile::tempdir().unwrap();
    let broken = provisionerctl::Locations { config: Some(folder.path().join("missing")), ..nowhere() };
    let (code, script, err) = ctl_in(&broken, &["completion", "bash"]).await;
    assert_eq!(code, 0, "{err}");
    for command in COMMANDS {
        assert!(script.contains(command), "bash: no {command}");
    }
    let file = folder.path().join("provisionerctl.bash");
    std::fs::write(&file, &script).unwrap();
    assert_eq!(bash("bash -n \"$1\"", &file), (true, String::new()));
    let (loaded, said) = bash("source \"$1\" && complete -p provisionerctl", &file);
    assert!(loaded && said.contains("provisionerctl"), "{said}");

    for shell in ["zsh", "fish"] {
        let (code, script, err) = ctl_in(&broken, &["completion", shell]).await;
        assert_eq!(code, 0, "{shell}: {err}");
        for command in COMMANDS {
            assert!(script.contains(command), "{shell}: no {command}");
        }
    }
    let (code, _, refused) = ctl_in(&nowhere(), &["completion", "tcsh"]).await;
    assert_eq!(code, provisionerctl::exit::USAGE, "{refused}");
}
