//! The bearer token: `--token` (or `PROVISIONER_TOKEN`), else `--token-file`, else the current context's user of
//! the kubeconfig kubectl would read (`KUBECONFIG`'s first file, or `~/.kube/config`): its `token`, its
//! `tokenFile`, or what its exec plugin prints (an `ExecCredential`, as kubectl runs it: `gke-gcloud-auth-plugin`,
//! `aws eks get-token`, `kubelogin`). Without any, requests carry none (a server with authentication off).

use std::path::{Path, PathBuf};

use secrecy::SecretString;
use serde_json::Value;

use crate::Error;

pub fn resolve(token: Option<&str>, token_file: Option<&Path>) -> Result<Option<SecretString>, Error> {
    if let Some(token) = token.filter(|token| !token.is_empty()) {
        return Ok(Some(SecretString::from(token)));
    }
    if let Some(file) = token_file {
        return read_token(file).map(Some);
    }
    match kubeconfig_path() {
        Some(path) if path.is_file() => of_kubeconfig(&path),
        _ => Ok(None),
    }
}

fn read_token(file: &Path) -> Result<SecretString, Error> {
    let text = std::fs::read_to_string(file)
        .map_err(|error| Error::Local(format!("cannot read the token file {}: {error}", file.display())))?;
    Ok(SecretString::from(text.trim()))
}

fn kubeconfig_path() -> Option<PathBuf> {
    match std::env::var_os("KUBECONFIG").filter(|value| !value.is_empty()) {
        Some(list) => std::env::split_paths(&list).next(),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".kube").join("config")),
    }
}

fn of_kubeconfig(path: &Path) -> Result<Option<SecretString>, Error> {
    let unreadable = |why: String| Error::Local(format!("the kubeconfig {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|error| unreadable(error.to_string()))?;
    let config: Value = serde_saphyr::from_str(&text).map_err(|error| unreadable(error.to_string()))?;
    let Some(user) = current_user(&config) else { return Ok(None) };
    if let Some(token) = user.get("token").and_then(Value::as_str) {
        return Ok(Some(SecretString::from(token)));
    }
    if let Some(file) = user.get("tokenFile").and_then(Value::as_str) {
        return read_token(Path::new(file)).map(Some);
    }
    if let Some(exec) = user.get("exec") {
        return exec_credential(exec, path.parent().unwrap_or(Path::new("."))).map(Some).map_err(unreadable);
    }
    Ok(None)
}

/// Runs the user's exec plugin as kubectl does (its arguments and environment, `KUBERNETES_EXEC_INFO`, no input; a
/// relative command with a `/` is relative to the kubeconfig's folder) and reads the token of the `ExecCredential`
/// it prints.
fn exec_credential(exec: &Value, kubeconfig_dir: &Path) -> Result<SecretString, String> {
    let command = exec.get("command").and_then(Value::as_str).ok_or("its exec plugin names no command")?;
    let program = if command.contains('/') { kubeconfig_dir.join(command) } else { PathBuf::from(command) };
    let list = |key: &str| -> Vec<&Value> { exec.get(key).and_then(Value::as_array).into_iter().flatten().collect() };
    let mut plugin = std::process::Command::new(&program);
    plugin.args(list("args").iter().filter_map(|argument| argument.as_str()));
    for variable in list("env") {
        if let (Some(name), Some(value)) = (variable["name"].as_str(), variable["value"].as_str()) {
            plugin.env(name, value);
        }
    }
    let api_version = exec.get("apiVersion").and_then(Value::as_str).unwrap_or("client.authentication.k8s.io/v1");
    let info = serde_json::json!({"apiVersion": api_version, "kind": "ExecCredential", "spec": {"interactive": false}});
    plugin.env("KUBERNETES_EXEC_INFO", info.to_string()).stdin(std::process::Stdio::null());
    let output = plugin.output().map_err(|error| format!("its exec plugin {command} cannot run: {error}"))?;
    if !output.status.success() {
        let said: String = String::from_utf8_lossy(&output.stderr).chars().take(300).collect();
        return Err(format!("its exec plugin {command} failed ({}): {}", output.status, said.trim()));
    }
    let credential: Value = serde_json::from_slice(&output.stdout)
        .map_err(|_| format!("its exec plugin {command} printed no ExecCredential"))?;
    match credential.pointer("/status/token").and_then(Value::as_str) {
        Some(token) => Ok(SecretString::from(token)),
        None => Err(format!(
            "the ExecCredential of {command} holds no status.token (client certificates are not used): pass --token"
        )),
    }
}

/// The `user` of the current context's user entry.
fn current_user(config: &Value) -> Option<&Value> {
    let named = |list: &str, name: &str| {
        config.get(list)?.as_array()?.iter().find(|entry| entry.get("name").and_then(Value::as_str) == Some(name))
    };
    let context = config.get("current-context")?.as_str()?;
    let user = named("contexts", context)?.get("context")?.get("user")?.as_str()?;
    named("users", user)?.get("user")
}

#[cfg(test)]
mod tests {
    use secrecy::ExposeSecret;

    use super::*;

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\ncurrent-context: ops\ncontexts:\n- name: dev\n  context:\n    user: dev\n- name: ops\n  context:\n    user: operator\nusers:\n- name: dev\n  user:\n    token: dev-token\n- name: operator\n  user:\n    token: operator-token\n";

    #[test]
    fn the_current_contexts_user_gives_the_token() {
        let config: Value = serde_saphyr::from_str(KUBECONFIG).unwrap();
        assert_eq!(current_user(&config).unwrap()["token"], "operator-token");
        let folder = std::env::temp_dir().join(format!("provisionerctl-token-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let path = folder.join("config");
        std::fs::write(&path, KUBECONFIG).unwrap();
        assert_eq!(of_kubeconfig(&path).unwrap().unwrap().expose_secret(), "operator-token");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    /// A plugin as kubectl runs one: it gets its arguments, its environment and `KUBERNETES_EXEC_INFO`.
    #[test]
    fn an_exec_plugin_prints_the_token_as_kubectl_runs_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let folder = std::env::temp_dir().join(format!("provisionerctl-exec-{}", std::process::id()));
        std::fs::create_dir_all(folder.join("bin")).unwrap();
        let plugin = folder.join("bin/token-plugin");
        let script = r#"#!/bin/sh
case "$KUBERNETES_EXEC_INFO" in *ExecCredential*) ;; *) echo "no exec info" >&2; exit 3 ;; esac
[ "$1" = get-token ] || { echo "no argument" >&2; exit 4; }
printf '{"kind":"ExecCredential","status":{"token":"%s-exec"}}' "$TOKEN_PREFIX"
"#;
        std::fs::write(&plugin, script).unwrap();
        std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exec = "    exec:\n      command: ./bin/token-plugin\n      args: [get-token]\n      env:\n      - name: TOKEN_PREFIX\n        value: operator\n";
        let path = folder.join("config");
        std::fs::write(&path, KUBECONFIG.replace("    token: operator-token\n", exec)).unwrap();
        assert_eq!(of_kubeconfig(&path).unwrap().unwrap().expose_secret(), "operator-exec");

        let without_argument = exec.replace("[get-token]", "[]");
        std::fs::write(&path, KUBECONFIG.replace("    token: operator-token\n", &without_argument)).unwrap();
        let refused = of_kubeconfig(&path).unwrap_err().to_string();
        assert!(refused.contains("./bin/token-plugin failed") && refused.contains("no argument"), "{refused}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_token_given_wins_and_an_empty_one_is_none_given() {
        let given = resolve(Some("given"), Some(Path::new("/nonexistent"))).unwrap().unwrap();
        assert_eq!(given.expose_secret(), "given");
        let missing = resolve(Some(""), Some(Path::new("/nonexistent/token"))).unwrap_err().to_string();
        assert!(missing.contains("/nonexistent/token"), "{missing}");
    }
}
