//! One provisioning is one trace: the service runs as a process exporting to a collector stand-in (OTLP/HTTP on
//! loopback), a caller's `traceparent` starts it, and the Job's pod is run by the kubelet stand-in with the real
//! `terraform-runner` on moto, which continues the trace from the Job's environment. The test asserts the span
//! tree from the caller's request through the operation's steps to each Terraform command, the trace context
//! sent to auth-service, and the trace ids in the service's JSON log lines. Traces start only once the caller is
//! authenticated, and by default the caller's sampled flag decides nothing (issue #52 item 5).

use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::Value;
use test_support::engine::Engine;
use test_support::kubelet_stand_in::run_job_pod;
use test_support::moto::MotoServer;
use test_support::otlp_collector::{OtlpCollector, ReceivedSpan};
use test_support::server_process::ServerProcess;
use test_support::{Backend, eks_body};

const WAIT: Duration = Duration::from_secs(60);
/// The caller's trace and span, as its own tracing would send them.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn named<'a>(spans: &'a [ReceivedSpan], service: &str, name: &str) -> &'a ReceivedSpan {
    let mut matching = spans.iter().filter(|span| span.service == service && span.name == name);
    let span = matching.next().unwrap_or_else(|| {
        let received: Vec<String> = spans
            .iter()
            .map(|span| format!("{}: {} {} parent {:?}", span.service, span.name, span.span_id, span.parent_span_id))
            .collect();
        panic!("no span {service}: {name} among\n{}", received.join("\n"))
    });
    assert!(matching.next().is_none(), "one span {service}: {name}");
    span
}

/// Whether `span` descends from `ancestor` (through spans the collector received).
fn descends(spans: &[ReceivedSpan], span: &ReceivedSpan, ancestor: &ReceivedSpan) -> bool {
    let mut current = span;
    while let Some(parent) = &current.parent_span_id {
        if *parent == ancestor.span_id {
            return true;
        }
        match spans.iter().find(|candidate| candidate.span_id == *parent) {
            Some(next) => current = next,
            None => return false,
        }
    }
    false
}

#[tokio::test]
async fn one_provisioning_is_one_trace_from_the_callers_request_to_each_terraform_command() {
    let collector = OtlpCollector::start().await;
    let moto = MotoServer::start().await;
    let (engine, _api) = Engine::start_api_only(Backend::Postgres, &[]).await;
    let mut service = engine.start_service_process(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url)]).await;

    let answer = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/api/v1/provisions", service.port()))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&eks_body("traced"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), reqwest::StatusCode::ACCEPTED);
    let accepted: Value = answer.json().await.unwrap();
    let runtime_id = accepted["id"].as_str().unwrap().to_owned();
    let applied = run_job_pod(&engine, &moto, &format!("provision-{runtime_id}"), &[]).await;
    assert_eq!(applied.exit_code, 0, "the runner failed: {}\n{}", applied.termination_message, applied.output);
    let done = engine.wait_for_status(&runtime_id, &["succeeded", "failed"], WAIT).await;
    assert_eq!(done["status"], "succeeded", "{done}");

    // Both export in batches: wait for the spans that end last, the run's and the Job's.
    let spans = collector
        .wait_for(WAIT, |spans| {
            let has = |service: &str, name: &str| spans.iter().any(|span| span.service == service && span.name == name);
            has("provisioner", "Provision run") && has("terraform-runner", "terraform-runner apply")
        })
        .await;
    eprintln!("the trace of one provisioning:\n{}", collector.tree(CALLER_TRACE));
    let spans: Vec<ReceivedSpan> = spans.into_iter().filter(|span| span.trace_id == CALLER_TRACE).collect();

    let request = named(&spans, "provisioner", "POST /api/v1/provisions");
    assert_eq!(request.parent_span_id.as_deref(), Some(CALLER_SPAN), "the request continues the caller's trace");
    let queued = named(&spans, "provisioner", "provision_runtime");
    assert!(descends(&spans, queued, request), "{queued:?}");
    let run = named(&spans, "provisioner", "Provision run");
    assert_eq!(run.parent_span_id.as_deref(), Some(queued.span_id.as_str()), "the run continues the request");
    for stage in ["ResolveCredential", "RenderConfig", "CreateJob", "WaitForJob", "Finalize"] {
        let step = named(&spans, "provisioner", stage);
        assert_eq!(step.parent_span_id.as_deref(), Some(run.span_id.as_str()), "{stage} is a step of the run");
    }
    let job = named(&spans, "terraform-runner", "terraform-runner apply");
    let created_by = named(&spans, "provisioner", "CreateJob");
    assert_eq!(job.parent_span_id.as_deref(), Some(created_by.span_id.as_str()), "the Job continues its creator");
    for command in ["init", "plan", "apply", "publish"] {
        let span = named(&spans, "terraform-runner", command);
        assert!(descends(&spans, span, job), "{command} is part of the Job's run: {span:?}");
    }

    // auth-service was asked within the trace, and the service's log lines name it.
    let asked = engine.app.auth.traceparents();
    assert!(!asked.is_empty() && asked.iter().all(|traceparent| traceparent.contains(CALLER_TRACE)), "{asked:?}");
    let log = service.log();
    let traced_line = format!("\"trace_id\":\"{CALLER_TRACE}\"");
    assert!(log.lines().any(|line| line.contains(&traced_line) && line.contains("provisioning queued")), "{log}");
    service.terminate(Duration::from_secs(20)).await;
}

/// Another caller's trace, as its own tracing would send it.
const OTHER_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

/// A service process exporting to `collector` with authentication on, letting in only `host-cluster-controller`
/// (a ServiceAccount of the engine's namespace), and that caller's token.
async fn authenticating_service(
    engine: &Engine,
    collector: &OtlpCollector,
    extra: &[(&str, &str)],
) -> (ServerProcess, String) {
    let caller = "host-cluster-controller";
    let account = ServiceAccount {
        metadata: ObjectMeta { name: Some(caller.to_owned()), ..ObjectMeta::default() },
        ..ServiceAccount::default()
    };
    Api::<ServiceAccount>::namespaced(engine.admin.clone(), &engine.namespace)
        .create(&PostParams::default(), &account)
        .await
        .expect("create ServiceAccount");
    let allowed = format!("system:serviceaccount:{}:{caller}", engine.namespace);
    let mut variables = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()),
        ("APP_AUTH_ENABLED", "true"),
        ("APP_AUTH_ALLOWED_USERS", allowed.as_str()),
    ];
    variables.extend_from_slice(extra);
    let service = engine.start_service_process(&variables).await;
    let token = engine.control_plane.service_account_token(&engine.namespace, caller, &["cluster-provisioner"]);
    (service, token.await.expect("token"))
}

/// A GET of `path` with `traceparent` and, when given, `authorization`.
async fn get(service: &ServerProcess, path: &str, authorization: Option<&str>, traceparent: &str) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .get(format!("http://127.0.0.1:{}{path}", service.port()))
        .header("traceparent", traceparent);
    if let Some(authorization) = authorization {
        request = request.header("authorization", authorization);
    }
    request.send().await.unwrap()
}

/// The spans received once one of `trace_id` has come: spans are exported in the order they ended, so whatever
/// an earlier request exported has come too.
async fn spans_up_to(collector: &OtlpCollector, trace_id: &str) -> Vec<ReceivedSpan> {
    collector.wait_for(WAIT, |spans| spans.iter().any(|span| span.trace_id == trace_id)).await
}

#[tokio::test]
async fn a_request_refused_before_authentication_exports_no_span_and_joins_no_trace() {
    let collector = OtlpCollector::start().await;
    let (engine, _api) = Engine::start_api_only(Backend::Postgres, &[]).await;
    let (mut service, token) = authenticating_service(&engine, &collector, &[]).await;

    let refused = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    for authorization in [None, Some("Bearer not-a-token")] {
        let answer = get(&service, "/api/v1/runtimes", authorization, &refused).await;
        assert_eq!(answer.status(), reqwest::StatusCode::UNAUTHORIZED, "{authorization:?}");
    }
    let bearer = format!("Bearer {token}");
    let let_in = get(&service, "/api/v1/runtimes", Some(&bearer), &format!("00-{OTHER_TRACE}-{CALLER_SPAN}-01")).await;
    assert_eq!(let_in.status(), reqwest::StatusCode::OK);

    let spans = spans_up_to(&collector, OTHER_TRACE).await;
    let joined: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.trace_id == CALLER_TRACE).collect();
    assert!(joined.is_empty(), "a refused request joined the caller's trace: {joined:#?}");
    let requests: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.name == "GET /api/v1/runtimes").collect();
    assert_eq!(requests.len(), 1, "only the authenticated request is traced: {requests:#?}");
    assert_eq!(requests[0].trace_id, OTHER_TRACE, "{requests:#?}");
    // Nor do the refused requests' log lines name the trace.
    let log = service.log();
    let refused_lines: Vec<&str> = log.lines().filter(|line| line.contains("\"status\":401")).collect();
    assert_eq!(refused_lines.len(), 2, "{log}");
    assert!(refused_lines.iter().all(|line| !line.contains("trace_id")), "{refused_lines:#?}");
    service.terminate(Duration::from_secs(20)).await;
}

#[tokio::test]
async fn an_authenticated_callers_trace_is_continued_though_its_flag_says_not_sampled() {
    let collector = OtlpCollector::start().await;
    let (engine, _api) = Engine::start_api_only(Backend::Postgres, &[]).await;
    let (mut service, token) = authenticating_service(&engine, &collector, &[]).await;

    // An unknown runtime: a 404, whose line is logged at info.
    let path = format!("/api/v1/runtimes/{}", uuid::Uuid::new_v4());
    let not_sampled = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00");
    let answer = get(&service, &path, Some(&format!("Bearer {token}")), &not_sampled).await;
    assert_eq!(answer.status(), reqwest::StatusCode::NOT_FOUND);

    let spans = spans_up_to(&collector, CALLER_TRACE).await;
    let spans: Vec<ReceivedSpan> = spans.into_iter().filter(|span| span.trace_id == CALLER_TRACE).collect();
    let request = named(&spans, "provisioner", "GET /api/v1/runtimes/{id}");
    assert_eq!(request.parent_span_id.as_deref(), Some(CALLER_SPAN), "the request continues the caller's trace");
    assert_eq!(request.attributes.get("route").map(String::as_str), Some("/api/v1/runtimes/{id}"), "{request:?}");
    // The request's log line names the trace and the exported span, and still its request span's fields.
    let log = service.log();
    let line = log.lines().find(|line| line.contains("\"status\":404")).unwrap_or_else(|| panic!("{log}"));
    let line: Value = serde_json::from_str(line).unwrap();
    assert_eq!((line["trace_id"].as_str(), line["span_id"].as_str()), (Some(CALLER_TRACE), Some(&*request.span_id)));
    assert_eq!(line["span"]["name"], "request", "{line}");
    assert_eq!(line["span"]["route"], "/api/v1/runtimes/{id}", "{line}");
    service.terminate(Duration::from_secs(20)).await;
}

#[tokio::test]
async fn a_parent_based_sampler_configured_honours_the_callers_decision() {
    let collector = OtlpCollector::start().await;
    let (engine, _api) = Engine::start_api_only(Backend::Postgres, &[]).await;
    let configured = [("OTEL_TRACES_SAMPLER", "parentbased_always_on")];
    let (mut service, token) = authenticating_service(&engine, &collector, &configured).await;

    let bearer = format!("Bearer {token}");
    let not_sampled = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00");
    assert_eq!(get(&service, "/api/v1/runtimes", Some(&bearer), &not_sampled).await.status(), reqwest::StatusCode::OK);
    let sampled = format!("00-{OTHER_TRACE}-{CALLER_SPAN}-01");
    assert_eq!(get(&service, "/api/v1/runtimes", Some(&bearer), &sampled).await.status(), reqwest::StatusCode::OK);

    let spans = spans_up_to(&collector, OTHER_TRACE).await;
    let unsampled: Vec<&ReceivedSpan> = spans.iter().filter(|span| span.trace_id == CALLER_TRACE).collect();
    assert!(unsampled.is_empty(), "the caller said not sampled: {unsampled:#?}");
    let sampled = spans.iter().filter(|span| span.trace_id == OTHER_TRACE);
    let sampled: Vec<&ReceivedSpan> = sampled.filter(|span| span.name == "GET /api/v1/runtimes").collect();
    assert_eq!(sampled.len(), 1, "{spans:#?}");
    assert_eq!(sampled[0].parent_span_id.as_deref(), Some(CALLER_SPAN));
    service.terminate(Duration::from_secs(20)).await;
}
