//! One reconciler at a time: of the provisioner processes reconciling Runtimes, the holder of the Lease
//! `cluster-provisioner-runtimes` in their namespace alone reconciles; another takes the lease over within seconds
//! when the holder dies, at once when it stops gracefully; every process keeps serving the APIs and running its
//! worker. Real child processes on the real control plane, with the production RBAC.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use provisioner::declarative::leadership::{LEASE_DURATION, LEASE_NAME};
use provisioner::declarative::resource::RuntimeResource;
use provisioner::domain::Topology;
use serde_json::Value;
use test_support::Backend;
use test_support::auth_service::aws_credential;
use test_support::engine::Engine;
use test_support::runtimes::{is_ready, recorded_runtime, run_succeeds, runtime, tenant_namespace, wait_for};
use test_support::server_process::ServerProcess;

/// Within how long a killed holder's lease is taken over: its duration, one look of the next process, and slack.
const TAKEOVER: Duration = Duration::from_secs(15);

/// The Lease's holder, when someone holds it.
async fn holder(leases: &Api<Lease>) -> Option<String> {
    let lease = leases.get_opt(LEASE_NAME).await.expect("read the Lease")?;
    lease.spec?.holder_identity.filter(|holder| !holder.is_empty())
}

/// Polls the Lease until `wanted` accepts its holder; returns the holder and how long it took.
async fn wait_for_holder(
    leases: &Api<Lease>,
    what: &str,
    within: Duration,
    wanted: impl Fn(Option<&str>) -> bool,
) -> (Option<String>, Duration) {
    let started = Instant::now();
    loop {
        let holder = holder(leases).await;
        if wanted(holder.as_deref()) {
            return (holder, started.elapsed());
        }
        assert!(started.elapsed() < within, "the Lease did not get {what} within {within:?}: held by {holder:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The JSON log lines of a process whose message starts with `message`.
fn events(log: &str, message: &str) -> Vec<Value> {
    let parsed = log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok());
    parsed.filter(|event| event["message"].as_str().is_some_and(|text| text.starts_with(message))).collect()
}

/// The identity a process leads or waits as, from its log.
fn identity(process: &ServerProcess) -> Option<String> {
    let log = process.log();
    let said = events(&log, "leading").into_iter().chain(events(&log, "waiting for the lease"));
    said.filter_map(|event| event["identity"].as_str().map(str::to_owned)).next()
}

/// Polls a process's log until it names its identity.
async fn identity_of(process: &ServerProcess) -> String {
    let started = Instant::now();
    loop {
        if let Some(identity) = identity(process) {
            return identity;
        }
        assert!(started.elapsed() < TAKEOVER, "the process never said its identity:\n{}", process.log_tail(40));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many log lines a process wrote while reconciling a Runtime (within the reconciler's `reconcile` span).
fn reconciled(process: &ServerProcess) -> usize {
    process.log().lines().filter(|line| line.contains(r#""name":"reconcile""#)).count()
}

/// Two processes reconcile one tenant's Runtimes: the first holds the Lease and alone reconciles, the second waits;
/// the holder is SIGKILLed while the Runtime's provisioning runs, and the second takes the Lease within
/// [`TAKEOVER`], finishes the provisioning with its worker and makes the Runtime Ready, with one operation. Then a
/// third process joins and the holder stops gracefully (SIGTERM): it releases the Lease, which the third takes
/// at once, well within the lease's duration.
#[tokio::test]
async fn one_process_reconciles_and_another_takes_the_lease_over_when_it_dies_or_stops() {
    let (_, admin, tenant) = tenant_namespace("leadership").await;
    let worker = [("APP_WORKER_LEASE", "2s"), ("APP_WORKER_POLL_INTERVAL", "100ms")];
    let (engine, api) = Engine::start_api_only(Backend::Postgres, &worker).await;
    engine.app.auth.add_tenant_credential(&tenant, "cred-aws-1", aws_credential());
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &engine.namespace);
    let reconciling = [("APP_RUNTIME_RESOURCES", tenant.as_str())];

    // The first process takes the free Lease; the second waits for it.
    let mut first = engine.start_service_process(&reconciling).await;
    let (holder_one, _) = wait_for_holder(&leases, "a holder", TAKEOVER, |holder| holder.is_some()).await;
    let holder_one = holder_one.unwrap();
    assert_eq!(identity_of(&first).await, holder_one, "the first process holds the Lease");
    let mut second = engine.start_service_process(&reconciling).await;
    let waiting = identity_of(&second).await;
    assert_ne!(waiting, holder_one);
    assert!(events(&second.log(), "leading").is_empty(), "the second process does not lead:\n{}", second.log());

    // A Runtime: only the holder reconciles it.
    let runtimes: Api<RuntimeResource> = Api::namespaced(admin.clone(), &tenant);
    let object: RuntimeResource = serde_json::from_value(runtime("blue", Topology::VanillaKubeadm)).unwrap();
    runtimes.create(&PostParams::default(), &object).await.expect("created");
    let runtime_id = recorded_runtime(&runtimes, "blue").await;
    engine.wait_for_status(&runtime_id.to_string(), &["running"], Duration::from_secs(60)).await;
    assert_eq!(holder(&leases).await.as_deref(), Some(holder_one.as_str()));
    assert!(reconciled(&first) > 0, "the holder reconciled:\n{}", first.log_tail(40));
    assert_eq!(reconciled(&second), 0, "only the holder reconciles:\n{}", second.log());

    // The holder dies while the provisioning runs: the second takes over within seconds.
    first.kill();
    let (holder_two, took) =
        wait_for_holder(&leases, "a new holder", TAKEOVER, |holder| holder.is_some_and(|holder| holder != holder_one))
            .await;
    assert_eq!(holder_two.as_deref(), Some(waiting.as_str()), "the waiting process took the Lease");
    println!("a killed holder's Lease was taken over after {took:?} (lease duration {LEASE_DURATION:?})");
    let lease = leases.get(LEASE_NAME).await.unwrap().spec.unwrap();
    assert_eq!(lease.lease_transitions, Some(1), "{lease:?}");

    // The provisioning finishes and the Runtime is Ready (written by the new holder: the only reconciler left),
    // and nothing was queued twice.
    run_succeeds(&engine, "provision", runtime_id).await;
    wait_for(&runtimes, "blue", "Ready", is_ready).await;
    let operations = engine.app.get(&format!("/api/v1/provisions/{runtime_id}/operations")).await.json();
    assert_eq!(operations["operations"].as_array().map(Vec::len), Some(1), "one provisioning: {operations}");

    // A graceful stop hands the Lease over at once.
    let mut third = engine.start_service_process(&reconciling).await;
    let next = identity_of(&third).await;
    let stopping = Instant::now();
    let status = second.terminate(Duration::from_secs(40)).await.expect("the holder stops on SIGTERM");
    assert!(status.success(), "exit {status}:\n{}", second.log_tail(20));
    assert!(!events(&second.log(), "stopped leading").is_empty(), "released:\n{}", second.log_tail(20));
    wait_for_holder(&leases, "the third process", TAKEOVER, |holder| holder == Some(next.as_str())).await;
    let handed_over = stopping.elapsed();
    println!("a gracefully stopped holder's Lease was taken over {handed_over:?} after SIGTERM");
    assert!(handed_over < LEASE_DURATION / 2, "handed over after {handed_over:?}, not at once");
    third.terminate(Duration::from_secs(40)).await;
    api.stop().await;
}
