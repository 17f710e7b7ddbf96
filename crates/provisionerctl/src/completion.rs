//! `provisionerctl completion SHELL`: the shell's completion script for every command and flag, as clap_complete
//! writes it from the command line's own definition (so it never falls behind). It needs no server and no token.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::{Cli, Error};

/// Prints `shell`'s completion script for provisionerctl on `out`.
pub fn print(shell: Shell, out: &mut dyn Write) -> Result<(), Error> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "provisionerctl", &mut script);
    out.write_all(&script).map_err(|error| Error::Local(format!("cannot print: {error}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shells_script_names_the_commands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            print(shell, &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            for command in ["get", "runtimes", "wait", "completion", "token-file"] {
                assert!(script.contains(command), "{shell}: no {command} in {script}");
            }
        }
    }
}
