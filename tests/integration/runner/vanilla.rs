//! The vanilla kubeadm topology: the kubeconfig its nodes publish, its wake-up and its rolling upgrade.

use super::*;

#[tokio::test]
async fn vanilla_apply_publishes_the_kubeconfig_and_destroy_removes_the_bucket() {
    let job = Job::new().await;
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));

    // The cluster publishes its kubeconfig a while after apply finished; the runner polls for it.
    let first_kubeconfig = kubeadm_admin_conf(job.control_plane, API_ENDPOINT, "");
    let publisher = {
        let (mut state_written, command) = (job.moto.aws_command(), job.moto.aws_command());
        state_written.args(["s3api", "head-object", "--bucket", &job.bucket, "--key", "terraform.tfstate"]);
        let parameter = job.kubeconfig_parameter();
        let value = first_kubeconfig.clone();
        tokio::task::spawn_blocking(move || {
            // Once the apply has written its state, and a little later, so that the runner has to wait.
            let started = std::time::Instant::now();
            while !state_written.output().unwrap().status.success() {
                assert!(started.elapsed() < Duration::from_secs(120), "the apply never wrote its state");
                std::thread::sleep(Duration::from_millis(200));
            }
            std::thread::sleep(Duration::from_secs(3));
            let mut command = command;
            let status = command
                .args(["ssm", "put-parameter", "--name", &parameter, "--type", "SecureString", "--value", &value])
                .output()
                .unwrap();
            assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
        })
    };
    let applied = job.run("apply").await;
    publisher.await.unwrap();
    applied.assert_success();
    assert!(applied.output.contains("waiting for the cluster to publish its kubeconfig"), "{}", applied.output);
    // The runner's own lines name the run they belong to.
    assert!(applied.output.contains(&format!("runtime_id={}", job.runtime_id)), "{}", applied.output);
    // Rebuilt from the node's: the same server, CA and client certificate and key, nothing else.
    let published = job.published_kubeconfig().await.expect("the kubeconfig is published");
    assert_eq!(client_certificate(&published), job.control_plane.admin_certificate_and_key().0);
    let parsed = kube::config::Kubeconfig::from_yaml(&published).unwrap();
    assert_eq!(parsed.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some(API_ENDPOINT));

    // The state bucket: created by the runner, protected, holding the state of what was applied.
    let versioning = job.s3api(&["get-bucket-versioning"]);
    assert_eq!(versioning["Status"], "Enabled");
    let encryption = job.s3api(&["get-bucket-encryption"]);
    assert_eq!(
        encryption["ServerSideEncryptionConfiguration"]["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"],
        "AES256"
    );
    let block = &job.s3api(&["get-public-access-block"])["PublicAccessBlockConfiguration"];
    for setting in ["BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets"] {
        assert_eq!(block[setting], true, "{setting}");
    }
    assert_eq!(
        job.object_keys(),
        ["terraform.tfstate", "terraform.tfstate.created.json", "terraform.tfstate.holder.json"],
        "state written, lock released, its holder and what the run created recorded"
    );
    let state = job.moto.aws(&["s3", "cp", &format!("s3://{}/terraform.tfstate", job.bucket), "-"]);
    assert!(state.contains("terraform_data"), "{state}");
    for secret in [ACCESS_KEY_ID, SECRET_ACCESS_KEY] {
        assert!(!state.contains(secret), "a credential in the state");
    }

    // A retried pod runs the whole apply again: the bucket is reused and the Secret overwritten.
    // (The second boot's certificate: any PEM certificate will do, here the CA's.)
    let (_, key) = job.control_plane.admin_certificate_and_key();
    let ca = job.control_plane.ca_pem();
    job.put_kubeconfig_parameter(&kubeadm_admin_conf_with(job.control_plane, API_ENDPOINT, ca, key, ""));
    job.run("apply").await.assert_success();
    assert_eq!(client_certificate(&job.published_kubeconfig().await.unwrap()), ca);

    // What the nodes publish besides the kubeconfig, and a parameter of another cluster that must survive.
    let join_token = format!("{}generation-1/join/token", job.ssm_prefix());
    job.moto.aws(&[
        "ssm",
        "put-parameter",
        "--name",
        &join_token,
        "--type",
        "SecureString",
        "--value",
        "abcdef.0123456789abcdef",
    ]);
    let other_cluster = format!("/kubeopera/{}/generation-1/kubeconfig", Uuid::new_v4());
    job.moto.aws(&["ssm", "put-parameter", "--name", &other_cluster, "--type", "SecureString", "--value", "other"]);
    assert_eq!(job.parameters_under(&job.ssm_prefix()).len(), 2);

    job.write_config("destroy", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    let destroyed = job.run("destroy").await;
    destroyed.assert_success();
    assert!(destroyed.output.contains("Resources: 0 added, 0 changed, 1 destroyed."), "{}", destroyed.output);
    assert!(!job.bucket_exists(), "the state bucket is removed after the destroy");
    assert_eq!(job.parameters_under(&job.ssm_prefix()), Vec::<String>::new(), "the cluster's parameters are removed");
    assert_eq!(job.parameters_under("/kubeopera"), [other_cluster], "another cluster's parameters stay");

    // A destroy retried after it finished finds nothing left to do.
    let again = job.run("destroy").await;
    again.assert_success();
    assert!(again.output.contains("nothing to destroy"), "{}", again.output);
}

/// A vanilla wake-up started the stopped control plane: the run ends only once its API server answers (the real
/// test API server, reached through a proxy that refuses connections until the "boot" is over), and fails, saying
/// so, when it never does.
#[tokio::test]
async fn a_wake_up_waits_until_the_api_server_answers() {
    let job = Job::new().await;
    let upstream = job.control_plane.server_url().trim_start_matches("https://").parse().expect("host:port");
    let proxy = test_support::fault_proxy::FaultProxy::start(upstream).await;
    proxy.cut();
    let server = format!("https://{}", proxy.address());
    job.publish_node_kubeconfig(&server, "");
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, &server));
    job.wait_for_api_server();

    let run = job.command("apply").spawn().expect("start terraform-runner");
    // The control plane "boots" for a few seconds after the apply (which writes the state) has started it.
    let answering = async {
        let mut state_written = tokio::process::Command::from(job.moto.aws_command());
        state_written.args(["s3api", "head-object", "--bucket", &job.bucket, "--key", "terraform.tfstate"]);
        let started = tokio::time::Instant::now();
        while !state_written.output().await.unwrap().status.success() {
            assert!(started.elapsed() < Duration::from_secs(120), "the apply never wrote its state");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_secs(4)).await;
        proxy.restore();
    };
    let (output, ()) = tokio::join!(tokio::time::timeout(Duration::from_secs(180), run.wait_with_output()), answering);
    let output = output.expect("the wake-up finishes within 3 minutes").unwrap();
    let outcome = job.outcome(
        output.status,
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
    );
    outcome.assert_success();
    let (waiting, answers) =
        (outcome.output.find("waiting for the API server to answer"), outcome.output.find("the API server answers"));
    assert!(waiting.is_some() && waiting < answers, "{}", outcome.output);
    assert!(job.published_kubeconfig().await.is_some());

    proxy.cut();
    let timeout = [("RUNNER_KUBECONFIG_TIMEOUT", "3s".to_owned())];
    let outcome = job.run_with("apply", &timeout).await;
    outcome.assert_failure();
    assert!(
        outcome.termination_message.starts_with(&format!("the API server at {server}/ did not answer within 3s")),
        "{}",
        outcome.termination_message
    );
}

/// A vanilla cluster's kubeconfig comes from its nodes, which the tenant controls: on a wake-up (which connects
/// to the API server with it) a planted `exec` runs nothing and a planted `tokenFile` sends nothing anywhere; the
/// run fails naming the refused field and publishes nothing.
#[tokio::test]
async fn a_kubeconfig_planted_in_ssm_runs_nothing_sends_nothing_and_is_not_published() {
    let job = Job::new().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let elsewhere = format!("https://{}", listener.local_addr().unwrap());
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = connections.clone();
    let accepting = tokio::spawn(async move {
        while let Ok((_socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let marker = job.path("exec-ran");
    let exec = format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: /bin/sh\n      args:\n      \
         - -c\n      - touch {} && echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"x\"}}}}'\n      \
         interactiveMode: Never\n",
        marker.display()
    );
    let token_file = job.path("credentials/aws_secret_access_key");
    for (server, extra_user, field) in [
        (API_ENDPOINT.to_owned(), exec, "exec"),
        (elsewhere.clone(), format!("    tokenFile: {}\n", token_file.display()), "tokenFile"),
    ] {
        job.publish_node_kubeconfig(&server, &extra_user);
        job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
        job.wait_for_api_server();
        let outcome = job.run_with("apply", &[("RUNNER_KUBECONFIG_TIMEOUT", "5s".to_owned())]).await;
        outcome.assert_failure();
        assert!(
            outcome.termination_message.starts_with(&format!(
                "the kubeconfig the cluster published to SSM parameter {} is refused",
                job.kubeconfig_parameter()
            )) && outcome.termination_message.contains(field),
            "{field}: {}",
            outcome.termination_message
        );
        outcome.assert_no_secret();
        assert!(job.published_kubeconfig().await.is_none(), "{field}: nothing is published");
    }
    assert!(!marker.exists(), "the planted exec ran in the runner");
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 0, "the runner connected to {elsewhere}");
    accepting.abort();
}

/// A vanilla upgrade's configuration: three control-plane machines (replaced for a new `machine_type`), the
/// resource the nodes watch for the version and the workers (both replaced for a new `version`), each logging
/// when it is created.
fn control_plane_and_workers(job: &Job, machine_type: &str, version: &str) -> String {
    let events = job.path("events.log");
    // `label` is what the creation logs (`machine${count.index}` for the counted machines).
    let resource = |name: &str, label: &str, count: &str, trigger: &str| {
        format!(
            "resource \"terraform_data\" \"{name}\" {{\n{count}  triggers_replace = \"{trigger}\"\n  provisioner \"local-exec\" {{\n    \
             command = \"echo {label} $(date +%s.%N) >> {}\"\n  }}\n}}\n",
            events.display()
        )
    };
    format!(
        "{}\n{}\n{}\n{}",
        resource("machine", "machine${count.index}", "  count = 3\n", machine_type),
        resource("control_plane", "control_plane", "", version),
        resource("workers", "workers", "", version),
        vanilla_outputs(&job.kubeconfig_parameter(), API_ENDPOINT)
    )
}

/// `(resource, time)` of every creation logged by [`control_plane_and_workers`].
fn created(job: &Job) -> Vec<(String, f64)> {
    let events = std::fs::read_to_string(job.path("events.log")).unwrap_or_default();
    events
        .lines()
        .map(|line| {
            let (name, time) = line.split_once(' ').expect("name time");
            (name.to_owned(), time.parse().expect("a timestamp"))
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A vanilla upgrade changes the control plane first, one step at a time, each applied alone and awaited until the
/// nodes say they have taken it: each machine's new type (node 0, 1, 2), then the version; only then the workers
/// roll. Held back for approval, it cannot apply the saved plan file (stale after the first step): the approved
/// run goes ahead only while a new plan makes exactly the approved changes, value by value, and applies each step
/// only as approved. When the control plane never gets there, the workers stay as they are.
#[tokio::test]
async fn a_vanilla_upgrade_rolls_the_workers_only_after_the_control_plane() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &control_plane_and_workers(&job, "m6i.large", "1.34"));
    job.run("apply").await.assert_success();
    assert_eq!(created(&job).len(), 5);

    let upgrade = |machine_type: &str, version: &str| {
        job.write_config("apply", "vanilla_kubeadm", &control_plane_and_workers(&job, machine_type, version));
        let path = job.path("config/runner.json");
        let mut manifest: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["controlPlaneUpgrade"] = json!({
            "machines": "terraform_data.machine", "machineType": machine_type,
            "resource": "terraform_data.control_plane", "lastNode": 2, "version": version,
        });
        std::fs::write(path, manifest.to_string()).unwrap();
    };
    let operation = Uuid::new_v4().to_string();
    let approval = |approved: Option<&str>| {
        job.patch_manifest(json!({ "approvalPolicy": "manual", "approvedPlanSha256": approved }));
        [("RUNNER_OPERATION_ID", operation.clone())]
    };
    upgrade("m6i.xlarge", "1.35");
    let waiting = job.run_with("apply", &approval(None)).await.assert_report();
    let digest = waiting.saved_plan_sha256.expect("the upgrade waits for approval");
    assert_eq!(waiting.plan.replaced.len(), 5, "{:?}", waiting.plan);

    // Meanwhile the modules changed: the same resources replaced, the same counts, other values. Refused before
    // any step, naming the first resource that differs.
    upgrade("m6i.xlarge", "1.36");
    let refused = job.run_with("apply", &approval(Some(&digest))).await;
    assert_eq!(refused.status.code(), Some(EXIT_STALE_PLAN), "{}", refused.output);
    assert!(
        refused.termination_message.contains(
            "a new plan makes other changes than the approved one (terraform_data.control_plane gets another \
             value for triggers_replace)"
        ),
        "{}",
        refused.termination_message
    );
    assert_eq!(created(&job).len(), 5, "nothing was applied");

    upgrade("m6i.xlarge", "1.35");
    approval(Some(&digest));
    let nodes_path = format!("{}generation-1/control-plane", job.ssm_prefix());
    let run = job.command("apply").env("RUNNER_OPERATION_ID", &operation).spawn().expect("start terraform-runner");
    // The "nodes" take each change a second after it was applied, and say so; returns when each was said.
    let nodes = async {
        let mut said = Vec::new();
        let started = tokio::time::Instant::now();
        while said.len() < 4 {
            assert!(started.elapsed() < Duration::from_secs(150), "the control plane's changes were not all applied");
            let events = created(&job);
            if let Some((name, _)) = events.get(5 + said.len()) {
                let marker = match name.strip_prefix("machine") {
                    Some(node) => format!("{nodes_path}/{node}/running/m6i.xlarge"),
                    None => format!("{nodes_path}/2/upgraded/1.35"),
                };
                tokio::time::sleep(Duration::from_secs(1)).await;
                let mut put = tokio::process::Command::from(job.moto.aws_command());
                put.args([
                    "ssm",
                    "put-parameter",
                    "--name",
                    &marker,
                    "--type",
                    "String",
                    "--value",
                    "x",
                    "--overwrite",
                ]);
                assert!(put.output().await.unwrap().status.success());
                said.push(unix_now());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        said
    };
    let (output, said) = tokio::join!(tokio::time::timeout(Duration::from_secs(240), run.wait_with_output()), nodes);
    let output = output.expect("the upgrade finishes within 4 minutes").unwrap();
    let outcome = job.outcome(
        output.status,
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
    );
    outcome.assert_success();
    let events = created(&job);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names[5..], ["machine0", "machine1", "machine2", "control_plane", "workers"], "{events:?}");
    // Each step started only after the nodes had taken the one before.
    for (step, said) in said.iter().enumerate() {
        assert!(events[5 + step + 1].1 > *said, "step {} started before step {step} was taken: {events:?}", step + 1);
    }
    assert!(outcome.output.contains("waiting for the control plane"), "{}", outcome.output);

    assert_eq!(job.json_object(&format!("plans/{operation}.tfplan.json")), None, "the approval was used");

    // A control plane that never gets there: the run fails, naming it, and the workers stay.
    upgrade("m6i.xlarge", "1.36");
    let timeout = [("RUNNER_CONTROL_PLANE_UPGRADE_TIMEOUT", "3s".to_owned())];
    let outcome = job.run_with("apply", &timeout).await;
    outcome.assert_failure();
    assert!(
        outcome.termination_message.starts_with(&format!(
            "the cluster did not publish that its control plane runs 1.36 to SSM parameter {nodes_path}/2/upgraded/1.36 \
             within 3s"
        )),
        "{}",
        outcome.termination_message
    );
    let names: Vec<String> = created(&job).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names[10..], ["control_plane"], "only the unchanged machines were skipped and no worker replaced");
}

/// A vanilla certificate renewal asks the control plane through SSM, refusing at once when a node's bootstrap
/// predates renewals (it would never answer), waits until the last node has renewed and publishes the admin
/// kubeconfig node 0 published again: the renewed one. Nothing Terraform manages changes.
#[tokio::test]
async fn a_certificate_renewal_asks_the_nodes_and_publishes_the_renewed_kubeconfig() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.write_config("apply", "vanilla_kubeadm", &control_plane_and_workers(&job, "m6i.large", "1.34"));
    job.run("apply").await.assert_success();
    let request = Uuid::new_v4().to_string();
    job.patch_manifest(json!({ "certificateRenewal": { "request": request, "lastNode": 2 } }));
    let nodes_path = format!("{}generation-1/control-plane", job.ssm_prefix());
    let put = |name: &str, value: &str| {
        job.moto.aws(&["ssm", "put-parameter", "--name", name, "--type", "String", "--value", value, "--overwrite"]);
    };

    // Nodes 0 and 1 take renewals, node 2 was bootstrapped before them: refused before anything is asked.
    put(&format!("{nodes_path}/0/renews-certificates"), "node-0");
    put(&format!("{nodes_path}/1/renews-certificates"), "node-1");
    let refused = job.run("apply").await;
    refused.assert_failure();
    assert!(
        refused.termination_message.starts_with("control-plane node 2 was bootstrapped before certificate renewals"),
        "{}",
        refused.termination_message
    );
    let asked = || {
        let mut get = job.moto.aws_command();
        get.args(["ssm", "get-parameter", "--name", &format!("{nodes_path}/certificates-renewal")]);
        get.output().unwrap().status.success()
    };
    assert!(!asked(), "a renewal was asked of a control plane that cannot take it");

    // Every node takes them: the "nodes" see the request, node 0 publishes the renewed kubeconfig, each its marker.
    put(&format!("{nodes_path}/2/renews-certificates"), "node-2");
    let run = job.command("apply").spawn().expect("start terraform-runner");
    let (_, key) = job.control_plane.admin_certificate_and_key();
    let renewed = kubeadm_admin_conf_with(job.control_plane, API_ENDPOINT, job.control_plane.ca_pem(), key, "");
    let nodes = async {
        let started = tokio::time::Instant::now();
        while !asked() {
            assert!(started.elapsed() < Duration::from_secs(150), "the renewal was never asked");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let asked_for =
            job.moto.aws(&["ssm", "get-parameter", "--name", &format!("{nodes_path}/certificates-renewal")]);
        let asked_for: Value = serde_json::from_str(&asked_for).unwrap();
        assert_eq!(asked_for["Parameter"]["Value"], request.as_str());
        job.put_kubeconfig_parameter(&renewed);
        for node in 0..3 {
            put(&format!("{nodes_path}/{node}/renewed/{request}"), "2026-12-07T21:00:00Z");
        }
    };
    let (output, ()) = tokio::join!(tokio::time::timeout(Duration::from_secs(240), run.wait_with_output()), nodes);
    let output = output.expect("the renewal finishes within 4 minutes").unwrap();
    let outcome = job.outcome(
        output.status,
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
    );
    outcome.assert_success();
    assert!(outcome.output.contains("the control plane renewed its certificates"), "{}", outcome.output);
    assert_eq!(client_certificate(&job.published_kubeconfig().await.unwrap()), job.control_plane.ca_pem());
    assert_eq!(created(&job).len(), 5, "nothing Terraform manages was replaced");
}
