//! The GKE topology: state in a GCS bucket on fake-gcs-server; what carries the runtime's label listed and deleted
//! through the GKE and Compute Engine APIs of [`FakeGoogleApis`].

use runner_contract::failure::RUNTIME_ID_LABEL;
use test_support::google_apis::FakeGoogleApis;

use super::*;

/// Also: what carries the runtime's label though no run recorded creating it (a cluster and a stray instance) is
/// reported as foreign by the apply; once the cluster is in the record (as a run killed before it saved its state
/// leaves it), the next apply reports it as an orphan and the destroy deletes it and names the stray instance as
/// foreign, leaving it; a node of a GKE pool goes with its cluster, and another runtime's cluster is left alone.
#[tokio::test]
async fn gke_apply_keeps_state_in_gcs_and_destroy_removes_the_bucket() {
    let job = Job::new().await;
    let gcs = FakeGcs::start().await;
    let apis = FakeGoogleApis::start().await;
    let this_runtime = json!({RUNTIME_ID_LABEL: job.runtime_id.to_string(), "owner": "team-a"});
    let left_cluster = apis.add_cluster(PROJECT_ID, "europe-west1", "runner-gke-1", this_runtime.clone());
    let stray = apis.add_instance(PROJECT_ID, "europe-west1-b", "stray", this_runtime);
    let pool_node = apis.add_instance(
        PROJECT_ID,
        "europe-west1-b",
        "gke-runner-gke-1-workers-1a2b3c4d-x9z8",
        json!({RUNTIME_ID_LABEL: job.runtime_id.to_string(), "goog-gke-node": ""}),
    );
    let other_runtime = json!({RUNTIME_ID_LABEL: "0190b8a6-0000-7000-8000-000000000002"});
    let others = apis.add_cluster(PROJECT_ID, "europe-west1", "other-gke", other_runtime);
    let token_server = GoogleTokenServer::start(&test_key_pair().public_key_der).await;
    let key = ServiceAccountKey::generate(&token_server.token_uri());
    job.write_credentials(&[
        ("credential_type", "gcp_service_account"),
        ("service_account.json", &key.json),
        ("project_id", PROJECT_ID),
    ]);
    let write_config = |action: &str| {
        let manifest = json!({
            "action": action, "topology": "gke", "cloud": "gcp", "region": "europe-west1",
            "stateBucket": job.bucket, "runtimeId": job.runtime_id, "runtimeName": "runner-test",
            "gcpProject": PROJECT_ID, "provider": ProviderVersion::pinned(Cloud::Gcp),
        });
        std::fs::write(job.path("config/runner.json"), manifest.to_string()).unwrap();
        // Terraform's GCS backend signs in with the same key file (its token_uri is the test's token server).
        let main_tf = format!(
            r#"terraform {{
  backend "gcs" {{
    bucket                  = "{bucket}"
    prefix                  = "terraform"
    storage_custom_endpoint = "{endpoint}/storage/v1/"
  }}
}}

{required}
{CLUSTER_RESOURCE}

output "cluster_name" {{
  value = "runner-gke"
}}

output "cluster_endpoint" {{
  value = "34.1.2.3"
}}

output "cluster_ca_certificate" {{
  value = "Q0EK"
}}

output "location" {{
  value = "europe-west1"
}}
"#,
            bucket = job.bucket,
            endpoint = gcs.base_url(),
            required = required_providers(&ProviderVersion::pinned(Cloud::Gcp)),
        );
        std::fs::write(job.path("config/main.tf"), main_tf).unwrap();
    };
    let mut emulator = vec![("STORAGE_EMULATOR_HOST", gcs.emulator_host())];
    emulator.extend(apis.env());

    // The runner's first token is refused like an expired one: it gets a new one and carries on.
    gcs.expire_first_token();
    write_config("apply");
    let applied = job.run_with("apply", &emulator).await;
    let summary = applied.assert_success();
    assert!(summary.orphans.is_empty(), "no run created them: {:?}", summary.orphans);
    assert_eq!(summary.foreign, [left_cluster.clone(), stray.clone()], "the state knows neither");
    assert!(!applied.output.contains(&key.key.private_key_pem.lines().nth(1).unwrap().to_owned()));

    // The runner signed in as the service account and created a versioned bucket with that token.
    let claims = token_server.accepted_claims();
    assert!(
        claims.iter().any(|claim| claim["iss"] == CLIENT_EMAIL && claim["scope"] == SCOPE_CLOUD_PLATFORM),
        "{claims:?}"
    );
    let issued = token_server.issued_tokens();
    let created = gcs
        .requests()
        .into_iter()
        .find(|request| {
            request.method == "POST" && request.path_and_query.starts_with("/storage/v1/b?project=kubeopera-test")
        })
        .expect("the runner created the bucket in the credential's project");
    let bearer = created.authorization.as_deref().and_then(|value| value.strip_prefix("Bearer ")).unwrap();
    assert!(issued.iter().any(|token| token == bearer), "the bucket was created with an issued token");
    let refused =
        gcs.requests().into_iter().find(|request| request.status == 401).expect("the first token was refused");
    assert_ne!(refused.authorization, created.authorization, "the bucket was created with a renewed token");
    assert_eq!(gcs.bucket(&job.bucket).await.expect("the state bucket")["versioning"]["enabled"], true);
    assert_eq!(
        gcs.object_names(&job.bucket).await,
        ["terraform/default.created.json", "terraform/default.holder.json", "terraform/default.tfstate"],
        "state written, lock released, its holder and what the run created recorded"
    );
    // The cluster as a run killed before it saved its state would have recorded it.
    let record = gcs.object(&job.bucket, "terraform/default.created.json").await.unwrap();
    let mut record: Value = serde_json::from_slice(&record).unwrap();
    assert_eq!(record["created"].as_array().map(Vec::len), Some(1), "the apply created one resource: {record}");
    record["created"].as_array_mut().unwrap().push(json!({
        "type": "google_container_cluster", "address": "module.gke.google_container_cluster.this",
        "id": format!("projects/{PROJECT_ID}/locations/europe-west1/clusters/runner-gke-1"),
    }));
    gcs.put_object(&job.bucket, "terraform/default.created.json", record.to_string()).await;
    for token in &issued {
        assert!(!applied.output.contains(token.as_str()), "the access token was printed");
    }

    // A lock left in GCS by a run whose pod is gone: the next run unlocks it by its generation, as tofu's GCS
    // backend does (the ID inside the object is not what it unlocks by).
    let record: Value =
        serde_json::from_slice(&gcs.object(&job.bucket, "terraform/default.holder.json").await.unwrap()).unwrap();
    let who = format!("runner@{}", record["hostname"].as_str().unwrap());
    let left = json!({
        "ID": "d2b7a7c4-0000-4000-8000-000000000001", "Operation": "OperationTypeApply", "Info": "", "Who": who,
        "Version": "1.12.6", "Created": "2026-12-01T00:00:00Z",
        "Path": format!("gs://{}/terraform/default.tflock", job.bucket),
    });
    let lock = gcs.put_object(&job.bucket, "terraform/default.tflock", left.to_string()).await;
    let generation = lock["generation"].as_str().map(str::to_owned).unwrap_or_else(|| lock["generation"].to_string());
    let mut next_run = RunIdentity::new(&job, "next").env();
    next_run.extend(emulator.clone());
    let took_over = job.run_with("apply", &next_run).await;
    let summary = took_over.assert_success();
    assert_eq!((summary.orphans, summary.foreign), (vec![left_cluster.clone()], vec![stray.clone()]));
    let unlocked = took_over.take_over_line();
    assert!(unlocked.contains(&format!("lock_id=\"{generation}\"")), "{unlocked}");
    assert!(gcs.object(&job.bucket, "terraform/default.tflock").await.is_none(), "the lock is gone");

    let kubeconfig = job.published_kubeconfig().await.expect("the kubeconfig is published");
    let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig).expect("a valid kubeconfig");
    assert_eq!(parsed.current_context.as_deref(), Some("gke_kubeopera-test_europe-west1_runner-gke"));
    assert_eq!(parsed.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("https://34.1.2.3"));
    let exec = parsed.auth_infos[0].auth_info.as_ref().unwrap().exec.as_ref().unwrap();
    assert_eq!(exec.command.as_deref(), Some("gke-gcloud-auth-plugin"));
    assert!(!kubeconfig.contains("PRIVATE KEY"));

    write_config("destroy");
    let destroyed = job.run_with("destroy", &emulator).await;
    let report = destroyed.assert_report();
    assert!(destroyed.output.contains("Resources: 0 added, 0 changed, 1 destroyed."), "{}", destroyed.output);
    assert_eq!(report.plan.swept, [left_cluster], "what a run created is deleted");
    assert_eq!(report.plan.foreign, std::slice::from_ref(&stray), "what none did is named");
    assert_eq!(
        apis.self_links(),
        [others, pool_node, stray],
        "only another runtime's cluster, the pool's node and the foreign instance remain"
    );
    let issued = token_server.issued_tokens();
    assert!(apis.bearer_tokens().iter().all(|bearer| issued.contains(bearer)), "every call carries an issued token");
    assert!(gcs.bucket(&job.bucket).await.is_none(), "the state bucket is removed after the destroy");
}
