//! The bearer token: `--token` (or `PROVISIONER_TOKEN`), else `--token-file`, else the current context's user of
//! the kubeconfig kubectl would read (`KUBECONFIG`'s first file, or `~/.kube/config`): its `token` or `tokenFile`.
//! Without any, requests carry none (a server with authentication off).

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
    if user.get("exec").is_some() {
        return Err(unreadable(
            "its current user signs in with an exec plugin, which provisionerctl does not run: pass --token \
             (for example $(kubectl create token ...))"
                .to_owned(),
        ));
    }
    Ok(None)
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
        std::fs::write(
            &path,
            KUBECONFIG.replace("    token: operator-token", "    exec:\n      command: gke-gcloud-auth-plugin"),
        )
        .unwrap();
        let refused = of_kubeconfig(&path).unwrap_err().to_string();
        assert!(refused.contains("exec plugin"), "{refused}");
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
