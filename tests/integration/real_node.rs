//! A container really runs: a Job's pod, bound to test-control-plane's real node (kubelet, containerd, runc) on a
//! control plane of its own (the shared one keeps the fake node, whose pods tests hold in chosen states), prints a
//! line that the API server then serves from the kubelet. Needs root and TEST_NODE_BIN_DIR (`make node`).

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ListParams, LogParams, PostParams};
use serde_json::json;
use test_control_plane::{BUSYBOX_IMAGE, ControlPlane, RealNode};

const LINE: &str = "hello from the real node";
const TIMEOUT: Duration = Duration::from_secs(120);
/// Short, as the test reports how long the pod took.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Polls `ready` until it returns `Some`; panics with the node's logs after [`TIMEOUT`].
async fn wait_for<T>(what: &str, node: &RealNode<'_>, mut ready: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(value) = ready().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}\n{}", node.log_tail());
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[tokio::test]
async fn a_job_runs_in_a_container_on_the_real_node() {
    let control_plane = ControlPlane::start().await.expect("a control plane of its own");
    let node = RealNode::start(&control_plane).await.expect("the real node starts and becomes Ready");
    node.import_image(&node.busybox_archive()).await.expect("import the busybox image");
    let namespace = control_plane.new_namespace("real-node").await.unwrap();
    let admin = control_plane.admin_client().unwrap();
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "hello"},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            // The node's only network is the host's (loopback).
            "hostNetwork": true,
            "containers": [{
                "name": "hello",
                "image": BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": ["echo", LINE],
            }],
        }}},
    }))
    .unwrap();
    let jobs = Api::<Job>::namespaced(admin.clone(), &namespace);
    jobs.create(&PostParams::default(), &job).await.unwrap();

    let pods = Api::<Pod>::namespaced(admin.clone(), &namespace);
    let of_the_job = ListParams::default().labels("batch.kubernetes.io/job-name=hello");
    let pod = wait_for("the Job's pod", &node, async || pods.list(&of_the_job).await.ok()?.items.pop()).await;
    let created = Instant::now();
    let pod = pod.metadata.name.unwrap();
    // There is no scheduler.
    node.bind_pod(&namespace, &pod).await.unwrap();
    let phase = async |phases: &[&str]| {
        let phase = pods.get(&pod).await.ok()?.status?.phase?;
        phases.contains(&phase.as_str()).then_some(())
    };
    wait_for("the pod to run", &node, async || phase(&["Running", "Succeeded", "Failed"]).await).await;
    let running = created.elapsed();
    wait_for("the pod to succeed", &node, async || phase(&["Succeeded"]).await).await;
    let succeeded = created.elapsed();
    let complete = async || {
        let conditions = jobs.get("hello").await.ok()?.status?.conditions?;
        conditions.iter().any(|condition| condition.type_ == "Complete" && condition.status == "True").then_some(())
    };
    wait_for("the Job to be Complete", &node, complete).await;
    eprintln!(
        "real node {}: pod created → Running {running:.2?}, → Succeeded {succeeded:.2?}, Job Complete {:.2?}",
        node.name(),
        created.elapsed()
    );

    let log = pods.logs(&pod, &LogParams::default()).await.expect("the pod's log through the API server");
    assert_eq!(log, format!("{LINE}\n"));
}
