//! State buckets and state locks: a bucket belongs to one runtime and one account, a stop releases the lock,
//! and a lock left by a killed run is taken over only once its holder is gone.

use super::*;

#[tokio::test]
async fn a_stop_signal_interrupts_terraform_which_releases_its_lock() {
    let job = Job::new().await;
    // Stop it the way the kubelet stops a pod, once terraform is inside the apply holding the lock.
    let (mut child, output, readers) = start_slow_apply(&job, job.command("apply")).await;
    assert!(job.object_keys().iter().any(|key| key.ends_with(".tflock")), "terraform holds the state lock");
    // SAFETY: kill(2) on the child we started; no memory is involved.
    unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the runner stops soon after the signal, without waiting for the 120 s command")
        .unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let stopped = job.outcome(status, output.lock().unwrap().clone());
    stopped.assert_failure();
    assert_eq!(stopped.termination_message, "stopped by a signal before the run finished");
    assert!(!job.object_keys().iter().any(|key| key.ends_with(".tflock")), "the lock is released");

    // Nothing is left stuck: the next attempt (with a quick command now) takes the lock and finishes.
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    job.run("apply").await.assert_success();
}

/// Starts `command` on an apply whose only resource takes 120 s, and returns once Terraform is inside the apply,
/// holding the state lock: the child, everything it printed so far and still prints, and the readers of that.
async fn start_slow_apply(job: &Job, command: tokio::process::Command) -> Started {
    job.write_config("apply", "vanilla_kubeadm", &local_exec("slow", "sleep 120"));
    start_until(command, "terraform_data.slow: Creating...").await
}

/// A state bucket belongs to one runtime: a provisioning dry run that reuses a live runtime's name (and so its
/// bucket's name) plans from empty state without reading, locking or recording itself in the live bucket, and a
/// run of another runtime on that bucket is refused before it locks anything.
#[tokio::test]
async fn a_live_runtimes_state_bucket_is_never_touched_by_another_runtime() {
    let job = Job::new().await;
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let config = job.protected_cluster_config("v1", "generation-1");
    job.write_config("apply", "vanilla_kubeadm", &config);
    job.run("apply").await.assert_success();
    let (state, holder) = (job.state_etag(), job.json_object("terraform.tfstate.holder.json"));
    assert_eq!(holder.as_ref().unwrap()["runtimeId"], job.runtime_id.to_string(), "{holder:?}");

    let preview = Uuid::new_v4();
    job.write_config("plan", "vanilla_kubeadm", &config);
    job.patch_manifest(json!({ "runtimeId": preview, "planFromEmptyState": true }));
    let planned = job.run("plan").await.assert_success();
    assert_eq!(
        planned,
        PlanSummary { add: 2, risk: Some(PlanRisk::Safe), ..PlanSummary::default() },
        "planned as a new cluster"
    );
    assert_eq!(job.state_etag(), state, "the live state is untouched");
    assert_eq!(job.json_object("terraform.tfstate.holder.json"), holder, "the live holder record is untouched");
    assert!(!job.object_keys().iter().any(|key| key.ends_with(".tflock")), "no lock is left");

    job.write_config("apply", "vanilla_kubeadm", &config);
    job.patch_manifest(json!({ "runtimeId": preview }));
    let refused = job.run("apply").await;
    refused.assert_failure();
    assert_eq!(
        refused.termination_message,
        format!(
            "state bucket {} holds the state of runtime {}, not this runtime's; nothing was changed",
            job.bucket, job.runtime_id
        )
    );
    assert_eq!(job.state_etag(), state);
}

/// Bucket names are global: someone in another account who creates the state bucket's name first (granting
/// everyone access) never receives a state. The run fails naming the bucket and writes nothing to it.
#[tokio::test]
async fn a_state_bucket_of_another_account_is_refused_and_never_written() {
    let job = Job::new().await;
    let assumed: Value = serde_json::from_str(&job.moto.aws(&[
        "sts",
        "assume-role",
        "--role-arn",
        "arn:aws:iam::210987654321:role/squatter",
        "--role-session-name",
        "squatter",
        "--output",
        "json",
    ]))
    .unwrap();
    let keys = &assumed["Credentials"];
    let squatter = |args: &[&str]| {
        let output = job
            .moto
            .aws_command()
            .env("AWS_ACCESS_KEY_ID", keys["AccessKeyId"].as_str().unwrap())
            .env("AWS_SECRET_ACCESS_KEY", keys["SecretAccessKey"].as_str().unwrap())
            .env("AWS_SESSION_TOKEN", keys["SessionToken"].as_str().unwrap())
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let identity: Value = serde_json::from_str(&squatter(&["sts", "get-caller-identity", "--output", "json"])).unwrap();
    assert_eq!(identity["Account"], "210987654321", "the squatter is another account");
    squatter(&[
        "s3api",
        "create-bucket",
        "--bucket",
        &job.bucket,
        "--create-bucket-configuration",
        &format!("LocationConstraint={REGION}"),
    ]);
    let everyone = json!({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:*",
        "Resource": [format!("arn:aws:s3:::{}", job.bucket), format!("arn:aws:s3:::{}/*", job.bucket)],
    }]});
    squatter(&["s3api", "put-bucket-policy", "--bucket", &job.bucket, "--policy", &everyone.to_string()]);

    job.write_config("apply", "vanilla_kubeadm", &job.protected_cluster_config("v1", "generation-1"));
    let refused = job.run("apply").await;
    refused.assert_failure();
    assert_eq!(
        refused.termination_message,
        format!(
            "state bucket {} exists but does not belong to account 123456789012; nothing was read or written",
            job.bucket
        )
    );
    let listing: Value = serde_json::from_str(&squatter(&[
        "s3api",
        "list-object-versions",
        "--bucket",
        &job.bucket,
        "--output",
        "json",
    ]))
    .unwrap_or(Value::Null);
    assert!(listing["Versions"].as_array().is_none_or(Vec::is_empty), "written to: {listing}");
    job.write_config("plan", "vanilla_kubeadm", &job.protected_cluster_config("v1", "generation-1"));
    job.run("plan").await.assert_failure();
    job.write_config("destroy", "vanilla_kubeadm", &job.protected_cluster_config("v1", "generation-1"));
    job.run("destroy").await.assert_failure();
    // The bucket stays theirs: a destroy never removes someone else's bucket.
    squatter(&["s3api", "head-bucket", "--bucket", &job.bucket]);
}

/// A pod or Job of the run, as the API server knows it: nothing schedules the pod or starts the (suspended) Job
/// here, so the pod stays pending and the Job unfinished.
fn pod_template(name: Option<&str>, operation_id: Uuid) -> (ObjectMeta, PodSpec) {
    let metadata = ObjectMeta {
        name: name.map(str::to_owned),
        labels: Some([(runner_contract::job::OPERATION_LABEL.to_owned(), operation_id.to_string())].into()),
        ..ObjectMeta::default()
    };
    let spec = PodSpec {
        containers: vec![Container {
            name: "terraform-runner".into(),
            image: Some("runner".into()),
            ..Container::default()
        }],
        restart_policy: Some("Never".into()),
        service_account_name: Some("default".into()),
        ..PodSpec::default()
    };
    (metadata, spec)
}

const LOCK: &str = "terraform.tfstate.tflock";
const HOLDER: &str = "terraform.tfstate.holder.json";

#[tokio::test]
async fn a_lock_left_by_a_killed_apply_is_taken_over_only_once_its_holder_is_gone() {
    let job = Job::new().await;
    let admin = job.control_plane.admin_client().unwrap();
    let pods = Api::<Pod>::namespaced(admin.clone(), &job.namespace);
    let jobs = Api::<BatchJob>::namespaced(admin, &job.namespace);
    let first = RunIdentity::new(&job, "first");
    let (metadata, spec) = pod_template(Some(&first.pod), first.operation_id);
    pods.create(&PostParams::default(), &Pod { metadata, spec: Some(spec), ..Pod::default() }).await.unwrap();

    // The first run is killed inside its apply the way a lost node or the OOM killer ends it: the runner and
    // Terraform at once, so nothing releases the lock.
    let mut command = job.command("apply");
    command.envs(first.env()).process_group(0);
    let (mut child, _, readers) = start_slow_apply(&job, command).await;
    // SAFETY: kill(2) on the process group of the child we started; no memory is involved.
    unsafe { libc::kill(-(child.id().unwrap() as libc::pid_t), libc::SIGKILL) };
    child.wait().await.unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let lock = job.json_object(LOCK).expect("the killed apply left its lock");
    let holder = job.json_object(HOLDER).expect("the run recorded itself as the holder");
    assert_eq!(
        (holder["pod"].as_str(), holder["operationId"].as_str()),
        (Some(first.pod.as_str()), Some(first.operation_id.to_string().as_str()))
    );
    assert!(lock["Who"].as_str().unwrap().ends_with(&format!("@{}", holder["hostname"].as_str().unwrap())), "{lock}");

    // Its pod is still there (pending, or stopping): the next run leaves the lock alone and fails waiting for it.
    job.write_config("apply", "vanilla_kubeadm", &vanilla_config(&job, API_ENDPOINT));
    job.publish_node_kubeconfig(API_ENDPOINT, "");
    let second = RunIdentity::new(&job, "second");
    let left_alone = job.run_with("apply", &second.env()).await;
    left_alone.assert_failure();
    assert!(left_alone.output.contains("the state is locked and the lock is left alone"), "{}", left_alone.output);
    let message = &left_alone.termination_message;
    assert!(message.starts_with(&format!("the state is locked by {}", lock["Who"].as_str().unwrap())), "{message}");
    assert!(message.contains(&format!("(its holder pod {} still runs)", first.pod)), "{message}");
    assert_eq!(job.json_object(LOCK).as_ref(), Some(&lock), "the lock is untouched");

    // The pod is gone, but its operation still has an unfinished Job: left alone again.
    pods.delete(&first.pod, &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    let (mut metadata, spec) = pod_template(None, first.operation_id);
    metadata.name = Some(format!("provision-{}", job.runtime_id));
    let unfinished = BatchJob {
        metadata: metadata.clone(),
        spec: Some(JobSpec {
            suspend: Some(true),
            template: PodTemplateSpec { metadata: Some(metadata), spec: Some(spec) },
            ..JobSpec::default()
        }),
        ..BatchJob::default()
    };
    jobs.create(&PostParams::default(), &unfinished).await.unwrap();
    while pods.get_opt(&first.pod).await.unwrap().is_some() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The next run waits (judging the lock again every second), and takes over once nothing of the first run is
    // left: the lock is force-unlocked, in the run's log, and the run goes on.
    let mut waiting = second.env();
    waiting.push(("RUNNER_STATE_LOCK_TIMEOUT", "90s".to_owned()));
    let mut child = job.command("apply").envs(waiting).spawn().expect("start terraform-runner");
    let output = Arc::new(Mutex::new(String::new()));
    let readers =
        [collect(child.stdout.take().unwrap(), output.clone()), collect(child.stderr.take().unwrap(), output.clone())];
    let why = format!("its holder's operation {} still has an unfinished Job", first.operation_id);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !output.lock().unwrap().contains(&why) {
        assert!(tokio::time::Instant::now() < deadline, "the lock was not left alone:\n{}", output.lock().unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(job.json_object(LOCK).as_ref(), Some(&lock), "the lock is untouched");
    let background =
        DeleteParams { propagation_policy: Some(kube::api::PropagationPolicy::Background), ..DeleteParams::default() };
    jobs.delete(unfinished.metadata.name.as_deref().unwrap(), &background).await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(120), child.wait()).await.expect("the run ends").unwrap();
    for reader in readers {
        reader.await.unwrap();
    }
    let took_over = job.outcome(status, output.lock().unwrap().clone());
    took_over.assert_success();
    let lock_id = lock["ID"].as_str().unwrap();
    let unlocked = took_over.take_over_line();
    assert!(
        unlocked.contains(lock_id)
            && unlocked.contains(&first.pod)
            && unlocked.contains(&first.operation_id.to_string()),
        "{unlocked}"
    );
    assert!(job.json_object(LOCK).is_none(), "the lock is released after the run");
    assert_eq!(job.json_object(HOLDER).unwrap()["pod"], second.pod.as_str(), "the run recorded itself as the holder");
}
