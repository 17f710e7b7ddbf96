//! Every command of provisionerctl ends its `--help` with examples of itself, as kubectl's do (issue #54 item 4).

use crate::provisionerctl_support::{ctl_in, nowhere};

#[tokio::test]
async fn provisionerctl_every_commands_help_ends_with_its_examples() {
    let commands = [
        "get",
        "get runtimes",
        "get runtime",
        "get operation",
        "create",
        "delete",
        "upgrade",
        "hibernate",
        "wake",
        "describe",
        "cancel",
        "approve",
        "reject",
        "retry",
        "logs",
        "operations",
        "kubeconfig",
        "rotate-kubeconfig",
        "renew-certificates",
        "wait",
        "completion",
    ];
    for command in commands {
        let args: Vec<&str> = command.split(' ').chain(["--help"]).collect();
        let (code, help, err) = ctl_in(&nowhere(), &args).await;
        assert_eq!(code, 0, "{command}: {err}");
        let examples = help.split_once("\nExamples:\n").map(|(_, examples)| examples).unwrap_or_default();
        assert!(examples.starts_with(&format!("  provisionerctl {command} ")), "{command}: {help}");
    }
    let (code, help, _) = ctl_in(&nowhere(), &["--help"]).await;
    assert!(code == 0 && help.contains("\nExamples:\n  provisionerctl get runtimes -o wide\n"), "{help}");
    assert!(help.contains("\n\nExit codes: 0 done;"), "{help}");
}
