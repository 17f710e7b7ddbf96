//! One provisioning is one trace: the service runs as a process exporting to a collector stand-in (OTLP/HTTP on
//! loopback), a caller's `traceparent` starts it, and the Job's pod is run by the kubelet stand-in with the real
//! `terraform-runner` on moto, which continues the trace from the Job's environment. The test asserts the span
//! tree from the caller's request through the operation's steps to each Terraform command, the trace context
//! sent to auth-service, and the trace ids in the service's JSON log lines.

use std::time::Duration;

use serde_json::Value;
use test_support::engine::Engine;
use test_support::kubelet_stand_in::run_job_pod;
use test_support::moto::MotoServer;
use test_support::otlp_collector::{OtlpCollector, ReceivedSpan};
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
