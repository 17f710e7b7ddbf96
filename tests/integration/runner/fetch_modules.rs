//! The init container's module fetch: a pinned ref checked against its commit, a private CA and credentials.

/// The init container clones the pinned ref and checks its commit: a tag moved to another commit fails the
/// fetch (so the Job's runner never starts) and leaves no modules behind; a URL carrying credentials is refused.
#[tokio::test]
async fn fetch_modules_refuses_a_moved_tag() {
    let folder = tempfile::tempdir().unwrap();
    let repo = folder.path().join("modules");
    let git = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .args(["-c", "user.name=test", "-c", "user.email=test@example.invalid", "-C"])
            .arg(&repo)
            .args(args)
            .output()
            .expect("git runs");
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    std::fs::create_dir(&repo).unwrap();
    git(&["init", "--quiet"]);
    std::fs::write(repo.join("main.tf"), "# pinned\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "--quiet", "-m", "pinned"]);
    git(&["tag", "v1"]);
    let pinned = git(&["rev-parse", "HEAD"]);
    std::fs::write(repo.join("main.tf"), "# moved\n").unwrap();
    git(&["commit", "--quiet", "-am", "moved"]);

    let fetch = |url: &str, target: &str| {
        let termination = folder.path().join(format!("{target}.termination"));
        let output = std::process::Command::new(test_support::terraform_runner_bin())
            .arg("fetch-modules")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("MODULES_REPO_URL", url)
            .env("MODULES_REPO_REF", "v1")
            .env("MODULES_REPO_COMMIT", &pinned)
            .env("MODULES_REPO_ALLOW_LOCAL", "true")
            .env("MODULES_DIR", folder.path().join(target))
            .env("RUNNER_TERMINATION_LOG", &termination)
            .output()
            .unwrap();
        (output.status.code(), std::fs::read_to_string(termination).unwrap_or_default())
    };
    let url = format!("file://{}", repo.display());
    let (code, message) = fetch(&url, "first");
    assert_eq!(code, Some(0), "{message}");
    assert_eq!(std::fs::read_to_string(folder.path().join("first/main.tf")).unwrap(), "# pinned\n");

    git(&["tag", "-f", "v1"]);
    let moved = git(&["rev-parse", "HEAD"]);
    let (code, message) = fetch(&url, "second");
    assert_eq!(code, Some(1), "{message}");
    assert_eq!(
        message,
        format!(
            "the modules repository's v1 is commit {moved}, not the pinned {pinned}: the ref was moved; nothing was run"
        )
    );
    assert!(!folder.path().join("second").exists(), "nothing is left for Terraform");

    let (code, message) = fetch("https://user:token@git.example.invalid/modules.git", "third");
    assert_eq!(code, Some(2), "{message}");
    assert!(message.starts_with("MODULES_REPO_URL:") && !message.contains("token@"), "{message}");
}

/// A modules repository behind HTTPS with a private CA and basic credentials: the init container clones it with
/// the CA (`ca.crt`) and the credentials of the mounted Secret; without the CA the clone is refused as untrusted,
/// without the credentials the server refuses it, and neither ever reaches Terraform. (Multi-threaded: the runner
/// runs as a blocking child process while this runtime serves the repository.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_modules_trusts_the_repositorys_private_ca_and_sends_its_credentials() {
    let folder = tempfile::tempdir().unwrap();
    let files = folder.path().join("files");
    std::fs::create_dir(&files).unwrap();
    std::fs::write(files.join("main.tf"), "# pinned\n").unwrap();
    let (bare, pinned) = test_support::git_server::bare_repository(&files, "v1", folder.path());
    let server = test_support::git_server::GitServer::start(&bare, Some(("reader", "s3cret-token"))).await;

    let fetch = |secret: &[(&str, &str)], target: &str| {
        let credentials = folder.path().join(format!("{target}.credentials"));
        std::fs::create_dir(&credentials).unwrap();
        for (file, text) in secret {
            std::fs::write(credentials.join(file), text).unwrap();
        }
        let termination = folder.path().join(format!("{target}.termination"));
        let output = std::process::Command::new(test_support::terraform_runner_bin())
            .arg("fetch-modules")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("MODULES_REPO_URL", server.url())
            .env("MODULES_REPO_REF", "v1")
            .env("MODULES_REPO_COMMIT", &pinned)
            .env("MODULES_REPO_CREDENTIALS_DIR", &credentials)
            .env("MODULES_DIR", folder.path().join(target))
            .env("RUNNER_TERMINATION_LOG", &termination)
            .output()
            .unwrap();
        (output.status.code(), std::fs::read_to_string(termination).unwrap_or_default())
    };
    let (username, password, ca) = (("username", "reader"), ("password", "s3cret-token"), ("ca.crt", server.ca_pem()));
    let ((fetched, message), target) = (fetch(&[username, password, ca], "all"), folder.path().join("all"));
    assert_eq!(fetched, Some(0), "{message}");
    assert_eq!(std::fs::read_to_string(target.join("main.tf")).unwrap(), "# pinned\n");

    let (untrusted, message) = fetch(&[username, password], "no-ca");
    assert_eq!(untrusted, Some(1));
    assert!(message.contains("certificate"), "{message}");
    let (refused, message) = fetch(&[ca], "no-credentials");
    assert_eq!(refused, Some(1));
    assert!(!message.contains("s3cret-token"), "{message}");
    for target in ["no-ca", "no-credentials"] {
        assert!(!folder.path().join(target).join("main.tf").exists(), "{target}: nothing is left for Terraform");
    }
}
