//! An OpenTelemetry collector stand-in: it receives OTLP/HTTP protobuf spans on loopback (`POST /v1/traces`, as a
//! real collector's `otlphttp` receiver does) and keeps them, so a test can assert the tree of one trace.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message;

/// One span as the collector received it; ids in lower-case hex, as `traceparent` writes them.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The `service.name` of the process that exported it.
    pub service: String,
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// `None` for the root of a trace.
    pub parent_span_id: Option<String>,
    pub attributes: BTreeMap<String, String>,
}

pub struct OtlpCollector {
    /// The base URL to give as `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub url: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpCollector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl OtlpCollector {
    pub async fn start() -> Self {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let router = Router::new().route("/v1/traces", post(receive)).with_state(spans.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("collector port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move { axum::serve(listener, router).await.expect("collector serves") });
        OtlpCollector { url, spans, server }
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until `done` holds for the spans received so far; panics after `timeout`, showing them.
    pub async fn wait_for(&self, timeout: Duration, done: impl Fn(&[ReceivedSpan]) -> bool) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(tokio::time::Instant::now() < deadline, "the collector received only {spans:#?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The spans of `trace_id` as an indented tree, `service: name` per line, children in the order they were
    /// received; a span whose parent the collector never saw is shown at the top level, marked.
    pub fn tree(&self, trace_id: &str) -> String {
        let spans: Vec<ReceivedSpan> = self.spans().into_iter().filter(|span| span.trace_id == trace_id).collect();
        let known = |id: &str| spans.iter().any(|span| span.span_id == id);
        let mut out = String::new();
        for root in spans.iter().filter(|span| span.parent_span_id.as_deref().is_none_or(|parent| !known(parent))) {
            let marker = if root.parent_span_id.is_some() { " (parent not received)" } else { "" };
            out.push_str(&format!("{}: {}{marker}\n", root.service, root.name));
            write_children(&spans, &root.span_id, 1, &mut out);
        }
        out
    }
}

fn write_children(spans: &[ReceivedSpan], parent: &str, depth: usize, out: &mut String) {
    for child in spans.iter().filter(|span| span.parent_span_id.as_deref() == Some(parent)) {
        out.push_str(&format!("{}{}: {}\n", "  ".repeat(depth), child.service, child.name));
        write_children(spans, &child.span_id, depth + 1, out);
    }
}

async fn receive(State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>, body: Bytes) -> Response {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest").into_response();
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let attributes = resource_spans.resource.map(|resource| resource.attributes).unwrap_or_default();
        let service = text_attributes(&attributes).remove("service.name").unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|scope| scope.spans) {
            received.push(ReceivedSpan {
                service: service.clone(),
                name: span.name,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: (!span.parent_span_id.is_empty()).then(|| hex(&span.parent_span_id)),
                attributes: text_attributes(&span.attributes),
            });
        }
    }
    spans.lock().unwrap().extend(received);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

fn text_attributes(attributes: &[opentelemetry_proto::tonic::common::v1::KeyValue]) -> BTreeMap<String, String> {
    attributes
        .iter()
        .filter_map(|pair| {
            let value = match pair.value.as_ref()?.value.as_ref()? {
                Value::StringValue(text) => text.clone(),
                Value::IntValue(number) => number.to_string(),
                Value::BoolValue(flag) => flag.to_string(),
                Value::DoubleValue(number) => number.to_string(),
                _ => return None,
            };
            Some((pair.key.clone(), value))
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}
