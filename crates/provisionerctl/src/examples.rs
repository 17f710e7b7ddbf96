//! The examples block at the end of each command's `--help`, as kubectl's help ends with its examples.

/// An examples block: each line as it is typed, its comment after `#`.
macro_rules! examples {
    ($($line:literal),+ $(,)?) => {
        concat!("Examples:", $("\n  ", $line),+)
    };
}

pub const ROOT: &str = concat!(
    examples!(
        "provisionerctl get runtimes -o wide",
        "provisionerctl create -f request.yaml --wait",
        "provisionerctl wait ID --for condition=Ready",
        "provisionerctl --server https://provisioner.example.com --tenant tenant-a get runtimes",
        "provisionerctl --token-file /var/run/secrets/tokens/provisioner get runtimes   # or PROVISIONER_TOKEN_FILE",
    ),
    "\n\nExit codes: 0 done; 1 a local failure (a file, the token); 2 a wrong command line; 3 the server refused the \
     request (its problem is printed); 4 the server cannot be reached or failed; 5 a wait ended without the state it \
     waited for."
);
pub const GET: &str = examples!(
    "provisionerctl get runtimes",
    "provisionerctl get runtime ID -o yaml",
    "provisionerctl get operation ID -o jsonpath='{.stage}'",
);
pub const GET_RUNTIMES: &str = examples!(
    "provisionerctl get runtimes --state Ready -o wide",
    "provisionerctl get runtimes -l team=blue,tier=1 -o name",
    "provisionerctl get runtimes --all -o jsonpath='{.items[*].name}'",
    "provisionerctl --tenant tenant-a get runtimes",
    "provisionerctl get runtimes -w --interval 5s   # a row for each change, until all have settled",
);
pub const GET_RUNTIME: &str = examples!(
    "provisionerctl get runtime ID",
    "provisionerctl get runtime ID -o jsonpath='{.state}{\"\\n\"}'",
    "provisionerctl get runtime ID -w -o wide   # a row each time its state or stage changes, until it settles",
);
pub const GET_OPERATION: &str =
    examples!("provisionerctl get operation ID", "provisionerctl get operation ID -o jsonpath='{.status} {.stage}'");
pub const CREATE: &str = examples!(
    "provisionerctl create -f request.json",
    "provisionerctl create -f request.yaml --dry-run -o name",
    "provisionerctl create -f - --wait --timeout 40m < request.yaml",
);
pub const DELETE: &str =
    examples!("provisionerctl delete ID", "provisionerctl delete ID --confirm my-cluster --wait --timeout 20m",);
pub const UPGRADE: &str =
    examples!("provisionerctl upgrade ID -f change.yaml", "provisionerctl upgrade ID -f change.yaml --dry-run -o yaml");
pub const HIBERNATE: &str = examples!("provisionerctl hibernate ID", "provisionerctl wait ID --for state=Hibernated");
pub const WAKE: &str = examples!("provisionerctl wake ID", "provisionerctl wait ID --for condition=Ready");
pub const DESCRIBE: &str = examples!("provisionerctl describe ID", "provisionerctl describe ID -o wide");
pub const CANCEL: &str = examples!("provisionerctl cancel OPERATION");
pub const APPROVE: &str = examples!(
    "provisionerctl approve OPERATION --plan-sha256 SHA256",
    "provisionerctl get operation OPERATION -o jsonpath='{.planSha256}'   # the digest to approve",
);
pub const REJECT: &str = examples!("provisionerctl reject OPERATION");
pub const RETRY: &str = examples!("provisionerctl retry OPERATION -o name");
pub const LOGS: &str = examples!(
    "provisionerctl logs runtime/ID                # its last operation's run log",
    "provisionerctl logs operation/OPERATION -f",
);
pub const OPERATIONS: &str =
    examples!("provisionerctl operations ID", "provisionerctl operations ID --all -o jsonpath='{.items[*].operation}'");
pub const KUBECONFIG: &str = examples!("provisionerctl kubeconfig ID > cluster.kubeconfig");
pub const ROTATE_KUBECONFIG: &str = examples!("provisionerctl rotate-kubeconfig ID > cluster.kubeconfig");
pub const RENEW_CERTIFICATES: &str = examples!(
    "provisionerctl renew-certificates ID",
    "provisionerctl get runtime ID -o jsonpath='{.certificates.expiries[0].notAfter}'   # the soonest end",
);
pub const COMPLETION: &str = examples!(
    "provisionerctl completion bash > ~/.local/share/bash-completion/completions/provisionerctl",
    "provisionerctl completion zsh > \"${fpath[1]}/_provisionerctl\"",
    "provisionerctl completion fish > ~/.config/fish/completions/provisionerctl.fish",
);
pub const WAIT: &str = examples!(
    "provisionerctl wait ID --for condition=Ready --timeout 40m",
    "provisionerctl wait ID --for condition=Progressing=False",
    "provisionerctl wait ID --for delete",
    "provisionerctl wait ID --for jsonpath='{.state}'=Hibernated",
);

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use crate::Cli;

    /// A line as a shell splits it: words apart from what single quotes hold, up to a comment or a redirection.
    fn words(line: &str) -> Vec<String> {
        let line = line.split(" #").next().unwrap();
        let (mut words, mut word, mut quoted) = (Vec::new(), String::new(), false);
        for character in line.chars() {
            match character {
                '\'' => quoted = !quoted,
                ' ' if !quoted => words.extend((!word.is_empty()).then(|| std::mem::take(&mut word))),
                '<' | '>' if !quoted => break,
                other => word.push(other),
            }
        }
        words.extend((!word.is_empty()).then_some(word));
        words
    }

    /// Every command's help ends with examples, each of which parses as a command line of that command.
    #[test]
    fn every_command_has_examples_that_parse() {
        let root = Cli::command();
        let mut commands = vec![(String::new(), &root)];
        while let Some((name, command)) = commands.pop() {
            let help = command.get_after_help().map(ToString::to_string).unwrap_or_default();
            assert!(help.starts_with("Examples:\n  provisionerctl"), "{name}: {help}");
            let lines = help.lines().skip(1).take_while(|line| line.starts_with("  provisionerctl"));
            let mut own = 0;
            for line in lines {
                let words = words(line);
                own += usize::from(words.join(" ").contains(&name));
                if let Err(error) = Cli::try_parse_from(&words) {
                    panic!("{line}: {error}");
                }
            }
            assert!(own > 0, "no example of {name:?} uses it: {help}");
            let children = command.get_subcommands().filter(|child| child.get_name() != "help");
            commands.extend(children.map(|child| (format!("{name} {}", child.get_name()).trim().to_owned(), child)));
        }
    }
}
