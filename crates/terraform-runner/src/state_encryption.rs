//! Client-side encryption of the state and of saved plans (OpenTofu's `encryption`, given as `TF_ENCRYPTION`):
//! AES-GCM with a key derived from the operator's passphrase (PBKDF2). Whoever reads the state bucket without the
//! passphrase reads no resource attribute (the state holds the cluster's join token, keys and passwords). A state
//! or plan written before encryption was configured is still read (the `unencrypted` fallback) and written back
//! encrypted, so turning it on needs no migration step.

use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

/// OpenTofu's pbkdf2 key provider refuses a shorter passphrase.
pub(crate) const MIN_PASSPHRASE_CHARS: usize = 16;

/// The variable and its value for every OpenTofu command of the run. JSON, so that any passphrase needs no
/// escaping; references to the key provider and methods must be bare traversals, not `${...}` templates.
pub(crate) fn terraform_env(passphrase: &SecretString) -> (String, String) {
    let encrypted = "method.aes_gcm.state";
    let fallback = json!({ "method": "method.unencrypted.before_encryption" });
    let configuration = json!({
        "key_provider": { "pbkdf2": { "state": { "passphrase": passphrase.expose_secret() } } },
        "method": {
            "aes_gcm": { "state": { "keys": "key_provider.pbkdf2.state" } },
            "unencrypted": { "before_encryption": {} },
        },
        "state": { "method": encrypted, "fallback": fallback },
        "plan": { "method": encrypted, "fallback": fallback },
    });
    ("TF_ENCRYPTION".to_owned(), configuration.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_is_json_with_the_passphrase_escaped() {
        let (name, value) = terraform_env(&SecretString::from("a \"quoted\" passphrase\\"));
        assert_eq!(name, "TF_ENCRYPTION");
        let configuration: serde_json::Value = serde_json::from_str(&value).unwrap();
        assert_eq!(configuration["key_provider"]["pbkdf2"]["state"]["passphrase"], "a \"quoted\" passphrase\\");
        assert_eq!(configuration["state"]["method"], "method.aes_gcm.state");
        assert_eq!(configuration["plan"]["fallback"]["method"], "method.unencrypted.before_encryption");
    }
}
