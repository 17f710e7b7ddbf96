//! Client-side state encryption: with a passphrase, what the bucket holds of the state is ciphertext.

use super::*;

/// With `RUNNER_STATE_PASSPHRASE` the state object holds no attribute in the clear, though the configuration writes
/// its values into the state; a state written before encryption was configured is read and written back
/// encrypted; a run with the same passphrase reads and changes it; a run without it, or with another, fails naming
/// the encryption, changes nothing and shows no passphrase.
#[tokio::test]
async fn with_a_passphrase_the_state_in_the_bucket_is_encrypted() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let apply = |input: &str| job.write_config("apply", "vanilla_kubeadm", &job.protected_cluster_config(input, "g1"));
    let state = || job.json_object("terraform.tfstate").expect("the state is in the bucket").to_string();
    let passphrase = "correct horse battery staple";
    let encrypted = [("RUNNER_STATE_PASSPHRASE", passphrase.to_owned())];

    apply("written-in-the-clear");
    job.run("apply").await.assert_success();
    assert!(state().contains("written-in-the-clear"), "without a passphrase the state is plain JSON");

    apply("written-encrypted");
    let changed = job.run_with("apply", &encrypted).await.assert_success();
    assert_eq!(changed.change, 2, "the plain state was read: {changed:?}");
    let ciphertext = state();
    for value in ["written-encrypted", "written-in-the-clear", "terraform_data"] {
        assert!(!ciphertext.contains(value), "{value} is in the clear: {ciphertext}");
    }
    let object: Value = serde_json::from_str(&ciphertext).unwrap();
    assert!(object["encrypted_data"].is_string(), "{object}");

    apply("changed-again");
    assert_eq!(job.run_with("apply", &encrypted).await.assert_success().change, 2, "the encrypted state is read");
    let applied_state = job.state_etag();

    apply("never-applied");
    let wrong = [("RUNNER_STATE_PASSPHRASE", "another passphrase entirely".to_owned())];
    for (env, says) in [(&[][..], "This state file is encrypted"), (&wrong[..], "decryption failed")] {
        let refused = job.run_with("apply", env).await;
        refused.assert_failure();
        assert!(refused.termination_message.contains(says), "{}", refused.termination_message);
        assert!(!refused.output.contains("another passphrase"), "{}", refused.output);
        assert_eq!(job.state_etag(), applied_state, "nothing was written");
    }

    let short = [("RUNNER_STATE_PASSPHRASE", "too short".to_owned())];
    let refused = job.run_with("apply", &short).await;
    assert!(refused.output.contains("RUNNER_STATE_PASSPHRASE: must be at least 16 characters"), "{}", refused.output);
}
