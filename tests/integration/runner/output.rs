//! What the runner prints and reports: redacted output and termination messages, exit codes of bad usage.

use super::*;

#[tokio::test]
async fn a_failing_apply_reports_a_redacted_termination_message() {
    let job = Job::new().await;
    // A command that prints the credential it runs with, then fails: the runner must redact both its streamed
    // output and its termination message.
    job.write_config(
        "apply",
        "vanilla_kubeadm",
        &local_exec(
            "leaky",
            r#"echo \"key=$AWS_SECRET_ACCESS_KEY id=$AWS_ACCESS_KEY_ID tmp=$TMPDIR\"; echo \"key=$AWS_SECRET_ACCESS_KEY\" >&2; exit 3"#,
        ),
    );
    let failed = job.run("apply").await;
    failed.assert_failure();
    assert!(failed.output.contains("key=[REDACTED] id=[REDACTED]"), "{}", failed.output);
    // Terraform's temporary files go to the writable work folder: the Job's root filesystem is read-only.
    let tmp = format!("tmp={}", job.path("work/.tmp").display());
    assert!(failed.output.contains(&tmp), "{tmp} in\n{}", failed.output);
    assert!(failed.termination_message.starts_with("`tofu apply -input=false"), "{}", failed.termination_message);
    assert!(
        failed.termination_message.contains("run.tfplan"),
        "the saved plan is applied: {}",
        failed.termination_message
    );
    assert!(failed.termination_message.contains("exit status 3"), "{}", failed.termination_message);
    assert!(job.published_kubeconfig().await.is_none(), "nothing is published after a failure");
    assert!(!job.object_keys().iter().any(|key| key.ends_with(".tflock")), "the lock is released");
}

/// A credential value as commands print it: encoded (base64 alone and inside an encoded file, hex, URL- and
/// JSON-escaped) and split across two lines. The runner redacts every form from its output and its termination
/// message.
#[tokio::test]
async fn every_form_of_a_credential_value_is_redacted_from_what_the_runner_prints() {
    use base64::Engine as _;
    let job = Job::new().await;
    let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCY-runner-forms";
    job.write_credentials(&[
        ("credential_type", "aws_access_key"),
        ("aws_access_key_id", ACCESS_KEY_ID),
        ("aws_secret_access_key", secret),
    ]);
    let script = job.path("leaks.sh");
    std::fs::write(
        &script,
        r#"k="$AWS_SECRET_ACCESS_KEY"
echo "base64: $(printf '%s' "$k" | base64 -w0)"
echo "file: $(printf 'key=%s\nregion=eu-west-1\n' "$k" | base64 -w0)"
echo "hex: $(printf '%s' "$k" | od -An -tx1 | tr -d ' \n')"
echo "url: $(printf '%s' "$k" | sed 's|/|%2F|g; s|+|%2B|g')"
echo "json: {\"key\":\"$(printf '%s' "$k" | sed 's|/|\\/|g')\"}"
printf '%s\n' "$k" | cut -c1-12
printf '%s\n' "$k" | cut -c13-
echo "failing with $(printf '%s' "$k" | base64 -w0)" >&2
exit 3
"#,
    )
    .unwrap();
    job.write_config("apply", "vanilla_kubeadm", &local_exec("leaky", &format!("sh {}", script.display())));
    let failed = job.run("apply").await;
    failed.assert_failure();

    let standard = base64::engine::general_purpose::STANDARD;
    let hex: String = secret.bytes().map(|byte| format!("{byte:02x}")).collect();
    let forms = [
        standard.encode(secret),
        standard.encode(format!("key={secret}\nregion=eu-west-1\n")),
        hex,
        secret.replace('/', "%2F").replace('+', "%2B"),
        secret.replace('/', "\\/"),
        secret[..12].to_owned(),
        secret[12..].to_owned(),
    ];
    for form in &forms {
        assert!(!failed.output.contains(form.as_str()), "{form} printed:\n{}", failed.output);
        assert!(!failed.termination_message.contains(form.as_str()), "{form}: {}", failed.termination_message);
    }
    for label in ["base64: [REDACTED]", "hex: [REDACTED]", "url: [REDACTED]", "json: {\"key\":\"[REDACTED]\"}"] {
        assert!(failed.output.contains(label), "{label} in:\n{}", failed.output);
    }
    assert!(failed.termination_message.contains("failing with [REDACTED]"), "{}", failed.termination_message);
}

#[tokio::test]
async fn bad_usage_and_bad_configuration_exit_with_2_and_name_the_problem() {
    let job = Job::new().await;
    let bogus = job.command("bogus").output().await.unwrap();
    assert_eq!(bogus.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("--action \"bogus\" is not apply, destroy or plan"));

    let unconfigured = job.command("apply").env_remove("POD_NAMESPACE").output().await.unwrap();
    assert_eq!(unconfigured.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unconfigured.stderr).contains("POD_NAMESPACE"));

    // The Job's action and the rendered runner.json must agree.
    job.write_config("destroy", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    let mismatch = job.run("apply").await;
    mismatch.assert_failure();
    assert_eq!(mismatch.termination_message, "the Job asked to apply but runner.json says destroy");

    // An incomplete credential fails before anything is created, naming the missing file.
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    job.write_credentials(&[("credential_type", "aws_access_key"), ("aws_access_key_id", ACCESS_KEY_ID)]);
    let incomplete = job.run("apply").await;
    incomplete.assert_failure();
    assert!(
        incomplete.termination_message.ends_with("aws_secret_access_key is missing"),
        "{}",
        incomplete.termination_message
    );
    assert!(!job.bucket_exists(), "nothing is created before the inputs are known to be complete");
}
