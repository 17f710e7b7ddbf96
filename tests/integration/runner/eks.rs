//! The EKS topology: a kubeconfig that assumes the runtime's role for every token.

use super::*;

#[tokio::test]
async fn eks_kubeconfig_assumes_the_role_for_every_token() {
    let job = Job::new().await;
    let role_arn = "arn:aws:iam::123456789012:role/kubeopera-provisioner";
    job.write_credentials(&[
        ("credential_type", "aws_assume_role"),
        ("role_arn", role_arn),
        ("external_id", EXTERNAL_ID),
        ("session_duration_seconds", "900"),
        ("aws_access_key_id", ACCESS_KEY_ID),
        ("aws_secret_access_key", SECRET_ACCESS_KEY),
    ]);
    // Terraform's EKS module would create the cluster; here it exists in moto and the configuration names it.
    let created = job.moto.aws(&[
        "eks",
        "create-cluster",
        "--name",
        "runner-eks",
        "--role-arn",
        "arn:aws:iam::123456789012:role/eks",
        "--resources-vpc-config",
        "subnetIds=subnet-1",
        "--output",
        "json",
    ]);
    let created: Value = serde_json::from_str(&created).unwrap();
    let endpoint = created["cluster"]["endpoint"].as_str().expect("moto gives the cluster an endpoint").to_owned();
    let ca = created["cluster"]["certificateAuthority"]["data"].as_str().expect("and a CA").to_owned();
    // Terraform runs as the role too, through a profile that assumes it (and renews it in a long run): a command
    // in the apply asks STS who it is.
    let whoami = local_exec(
        "whoami",
        &format!("{} sts get-caller-identity --query Arn --output text", job.moto.aws_cli().display()),
    );
    job.write_config(
        "apply",
        "eks",
        &format!("{CLUSTER_RESOURCE}\n\n{whoami}\noutput \"cluster_name\" {{\n  value = \"runner-eks\"\n}}\n"),
    );

    let applied = job.run("apply").await;
    applied.assert_success();
    let session = format!("assumed-role/kubeopera-provisioner/kubeopera-{}", job.runtime_id);
    assert!(applied.output.contains(&session), "Terraform ran as {session}:\n{}", applied.output);
    // The profile sits in the memory-backed folder, readable by the runner only; the source keys are only there.
    for file in ["config", "credentials"] {
        let metadata = std::fs::metadata(job.path("aws").join(file)).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o777, 0o600, "{file}");
    }
    assert!(!std::fs::read_to_string(job.path("aws/config")).unwrap().contains(SECRET_ACCESS_KEY));

    let kubeconfig = job.published_kubeconfig().await.expect("the kubeconfig is published");
    let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig).expect("a valid kubeconfig");
    let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
    assert_eq!(cluster.server.as_deref(), Some(endpoint.as_str()));
    assert_eq!(cluster.certificate_authority_data.as_deref(), Some(ca.as_str()));
    let user = parsed.auth_infos[0].auth_info.as_ref().unwrap();
    assert!(user.token.is_none() && user.client_key_data.is_none(), "no stored secret in the kubeconfig");
    let exec = user.exec.as_ref().expect("an exec credential plugin");
    assert_eq!(exec.command.as_deref(), Some("aws"));
    let args = exec.args.clone().unwrap();
    assert!(args.windows(2).any(|pair| pair == ["--cluster-name", "runner-eks"]), "{args:?}");
    assert!(args.windows(2).any(|pair| pair == ["--role-arn", role_arn]), "{args:?}");
    for secret in [ACCESS_KEY_ID, SECRET_ACCESS_KEY, EXTERNAL_ID] {
        assert!(!kubeconfig.contains(secret), "a credential in the kubeconfig");
    }
    assert!(job.bucket_exists());
}
