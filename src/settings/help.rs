//! `provisioner --help`: every variable the service reads, with its default, from [`Variables`] itself so that the
//! list cannot drift from what is read.

use std::time::Duration;

use secrecy::SecretString;
use serde::Serializer;

use super::Variables;

/// The text `provisioner --help` prints.
pub fn help() -> String {
    let defaults = serde_json::to_value(Variables::default()).expect("the defaults serialize");
    let serde_json::Value::Object(variables) = defaults else { unreachable!("a struct serializes to an object") };
    let width = variables.keys().map(String::len).max().unwrap_or_default();
    let mut text = String::from(
        "provisioner: provisions, changes and deprovisions Kubernetes clusters (GraphQL and REST API, worker).\n\n\
         Usage: provisioner             serve the API and run the worker\n\
         \x20      provisioner migrate     apply this release's database migrations and exit\n\
         \x20      provisioner --version | --help\n\n\
         Configured by environment variables (or the same names in lower case in the YAML, TOML or JSON file named\n\
         by APP_CONFIG_FILE; the environment wins). A blank value counts as unset. Variables and their defaults:\n\n",
    );
    for (name, default) in variables {
        let default = match default {
            serde_json::Value::Null => "(unset)".to_owned(),
            serde_json::Value::String(text) => text,
            other => other.to_string(),
        };
        text.push_str(&format!("  {:width$}  {default}\n", name.to_uppercase()));
    }
    text
}

pub(super) fn secret<S: Serializer>(_: &SecretString, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str("(secret)")
}

pub(super) fn duration<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*duration))
}

pub(super) fn display<S: Serializer, T: std::fmt::Display>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_lists_every_variable_with_its_default_and_masks_secrets() {
        let help = help();
        for line in
            ["APP_ADDRESS", "127.0.0.1:3000", "APP_PROVISIONING_TIMEOUT", "1h 30m", "APP_DATABASE_PASSWORD", "(secret)"]
        {
            assert!(help.contains(line), "{line} missing from:\n{help}");
        }
        assert!(!help.contains("password\n"), "{help}");
        let listed =
            help.lines().filter(|line| line.starts_with("  ") && line.trim_start().starts_with(char::is_uppercase));
        let fields = serde_json::to_value(Variables::default()).unwrap().as_object().unwrap().len();
        assert_eq!(listed.count(), fields);
        assert!(help.contains("  DATABASE_URL") && help.contains("(unset)"), "{help}");
    }
}
