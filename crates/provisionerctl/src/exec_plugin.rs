//! A kubeconfig user's exec plugin (`gke-gcloud-auth-plugin`, `aws eks get-token`, `kubelogin`), run as kubectl
//! runs it: with its arguments and environment and `KUBERNETES_EXEC_INFO`, no input, and a relative command with a
//! `/` relative to the kubeconfig's folder. It prints an `ExecCredential` whose `status.token` is the token.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use secrecy::SecretString;
use serde::Deserialize;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecPlugin {
    command: String,
    args: Option<Vec<String>>,
    env: Option<Vec<Variable>>,
    api_version: Option<String>,
}

#[derive(Deserialize)]
struct Variable {
    name: String,
    value: String,
}

#[derive(Deserialize)]
struct ExecCredential {
    status: Option<ExecCredentialStatus>,
}

#[derive(Deserialize)]
struct ExecCredentialStatus {
    token: Option<SecretString>,
}

impl ExecPlugin {
    /// Runs the plugin and reads the token it prints; a plugin that gives a client certificate instead is refused.
    pub fn token(&self, kubeconfig_folder: &Path) -> Result<SecretString, String> {
        let name = &self.command;
        let output = self
            .command(kubeconfig_folder)
            .output()
            .map_err(|error| format!("its exec plugin {name} cannot run: {error}"))?;
        if !output.status.success() {
            let said: String = String::from_utf8_lossy(&output.stderr).chars().take(300).collect();
            return Err(format!("its exec plugin {name} failed ({}): {}", output.status, said.trim()));
        }
        let credential: ExecCredential = serde_json::from_slice(&output.stdout)
            .map_err(|_| format!("its exec plugin {name} printed no ExecCredential"))?;
        credential.status.and_then(|status| status.token).ok_or_else(|| {
            format!(
                "the ExecCredential of {name} holds no status.token (client certificates are not used): pass --token"
            )
        })
    }

    fn command(&self, kubeconfig_folder: &Path) -> Command {
        let program = if self.command.contains('/') {
            kubeconfig_folder.join(&self.command)
        } else {
            PathBuf::from(&self.command)
        };
        let mut command = Command::new(program);
        command.args(self.args.iter().flatten());
        command.envs(self.env.iter().flatten().map(|variable| (&variable.name, &variable.value)));
        let api_version = self.api_version.as_deref().unwrap_or("client.authentication.k8s.io/v1");
        let info =
            serde_json::json!({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": false}});
        command.env("KUBERNETES_EXEC_INFO", info.to_string()).stdin(Stdio::null());
        command
    }
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    /// A plugin as kubectl runs one: it gets its arguments, its environment and `KUBERNETES_EXEC_INFO`.
    #[test]
    fn an_exec_plugin_prints_the_token_as_kubectl_runs_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let folder = std::env::temp_dir().join(format!("provisionerctl-exec-{}", std::process::id()));
        std::fs::create_dir_all(folder.join("bin")).unwrap();
        let script = r#"#!/bin/sh
case "$KUBERNETES_EXEC_INFO" in *ExecCredential*) ;; *) echo "no exec info" >&2; exit 3 ;; esac
[ "$1" = get-token ] || { echo "no argument" >&2; exit 4; }
printf '{"kind":"ExecCredential","status":{"token":"%s-exec"}}' "$TOKEN_PREFIX"
"#;
        std::fs::write(folder.join("bin/token-plugin"), script).unwrap();
        std::fs::set_permissions(folder.join("bin/token-plugin"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let plugin = "command: ./bin/token-plugin\nargs: [get-token]\nenv:\n- name: TOKEN_PREFIX\n  value: operator\n";
        let exec: ExecPlugin = serde_saphyr::from_str(plugin).unwrap();
        assert_eq!(exec.token(&folder).unwrap().expose_secret(), "operator-exec");

        let without_argument: ExecPlugin = serde_saphyr::from_str(&plugin.replace("[get-token]", "null")).unwrap();
        let refused = without_argument.token(&folder).unwrap_err();
        assert!(refused.contains("./bin/token-plugin failed") && refused.contains("no argument"), "{refused}");
        std::fs::remove_dir_all(&folder).unwrap();
    }
}
