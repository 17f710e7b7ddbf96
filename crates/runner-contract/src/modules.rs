//! Where the Terraform modules come from, pinned: the init container clones `ref` (a tag or branch) of the
//! repository and checks that it is exactly the configured commit before Terraform may run, so a moved tag or a
//! force-pushed branch fails the run instead of changing what it applies. Repository credentials come from a
//! Secret mounted into the init container only ([`mount::CREDENTIALS_DIR`]), never from the URL.

/// The init container's variables (the service sets them from its own settings of the same names).
pub mod var {
    pub const URL: &str = "MODULES_REPO_URL";
    pub const REF: &str = "MODULES_REPO_REF";
    pub const COMMIT: &str = "MODULES_REPO_COMMIT";
    /// Where the clone goes; the Job leaves it unset (the workspace's modules folder), tests set it.
    pub const DIR: &str = "MODULES_DIR";
    /// Test installations only: lets `file://` URLs and local paths through.
    pub const ALLOW_LOCAL: &str = "MODULES_REPO_ALLOW_LOCAL";
    /// Where the credentials are; the Job leaves it unset ([`super::mount::CREDENTIALS_DIR`]), tests set it.
    pub const CREDENTIALS_DIR: &str = "MODULES_REPO_CREDENTIALS_DIR";
}

/// Where the init container finds the repository's credentials, when the installation has a Secret for them.
pub mod mount {
    /// Files `username` and `password` (HTTPS; the password may be a token).
    pub const CREDENTIALS_DIR: &str = "/var/run/secrets/provisioner/modules-repo";
    pub const USERNAME_FILE: &str = "username";
    pub const PASSWORD_FILE: &str = "password";
    /// PEM certificates of the authorities the repository's HTTPS certificate chains to, for a git server with a
    /// private CA; the system's authorities are not trusted for it then.
    pub const CA_FILE: &str = "ca.crt";
}

/// A pinned modules repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModulesSource {
    pub url: String,
    pub git_ref: String,
    /// 40 hexadecimal digits, lower case.
    pub commit: String,
}

/// What is wrong with a setting; names the variable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct InvalidSource {
    pub variable: &'static str,
    pub message: String,
}

impl ModulesSource {
    /// Checks the three settings: an `https://` or `ssh://` URL without credentials in it (`file://` and local
    /// paths only with `allow_local`), a ref that git takes as a name, and a full commit id.
    pub fn new(url: &str, git_ref: &str, commit: &str, allow_local: bool) -> Result<Self, InvalidSource> {
        check_url(url, allow_local)?;
        let ref_ok = !git_ref.is_empty()
            && !git_ref.starts_with('-')
            && git_ref.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/-".contains(&b));
        if !ref_ok {
            return Err(InvalidSource {
                variable: var::REF,
                message: format!("{git_ref:?} is not a tag or branch name"),
            });
        }
        let commit = commit.to_ascii_lowercase();
        if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(InvalidSource {
                variable: var::COMMIT,
                message: "must be the full 40-digit commit id the ref is expected to point at".to_owned(),
            });
        }
        Ok(ModulesSource { url: url.to_owned(), git_ref: git_ref.to_owned(), commit })
    }
}

fn check_url(url: &str, allow_local: bool) -> Result<(), InvalidSource> {
    let invalid = |message: &str| Err(InvalidSource { variable: var::URL, message: message.to_owned() });
    let Some((scheme, rest)) = url.split_once("://") else {
        return if allow_local && url.starts_with('/') { Ok(()) } else { invalid("must be an https:// or ssh:// URL") };
    };
    match scheme {
        "https" | "ssh" => {}
        "file" if allow_local => return Ok(()),
        _ => return invalid("must be an https:// or ssh:// URL (file:// and other schemes are refused)"),
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let user_info = authority.rsplit_once('@').map(|(user_info, _)| user_info);
    // ssh://git@host names a user, not a secret; a password (or any HTTPS user info) belongs in the Secret.
    let has_credentials = match scheme {
        "https" => user_info.is_some(),
        _ => user_info.is_some_and(|user_info| user_info.contains(':')),
    };
    if authority.is_empty() || has_credentials {
        return invalid("must name a host and carry no credentials (put them in the modules repository Secret)");
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) || rest.starts_with('-') {
        return invalid("must not contain spaces or control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn pinned_https_and_ssh_sources_pass() {
        let source = ModulesSource::new("https://git.example.com/modules.git", "v1.0.0", COMMIT, false).unwrap();
        assert_eq!(source.commit, COMMIT);
        ModulesSource::new("ssh://git@git.example.com/team/modules.git", "release/1", COMMIT, false).unwrap();
        ModulesSource::new("file:///srv/modules.git", "v1", COMMIT, true).unwrap();
    }

    #[test]
    fn local_urls_credentials_and_loose_pins_are_refused_by_variable() {
        for (url, git_ref, commit, variable) in [
            ("file:///srv/modules.git", "v1", COMMIT, var::URL),
            ("/srv/modules.git", "v1", COMMIT, var::URL),
            ("http://git.example.com/m.git", "v1", COMMIT, var::URL),
            ("https://user:token@git.example.com/m.git", "v1", COMMIT, var::URL),
            ("ssh://git:pw@git.example.com/m.git", "v1", COMMIT, var::URL),
            ("https://git.example.com/m.git", "--upload-pack=sh", COMMIT, var::REF),
            ("https://git.example.com/m.git", "v1", "0123456", var::COMMIT),
        ] {
            let refused = ModulesSource::new(url, git_ref, commit, false).unwrap_err();
            assert_eq!(refused.variable, variable, "{url} {git_ref} {commit}: {refused}");
        }
    }
}
