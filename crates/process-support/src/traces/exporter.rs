//! The tracer provider: spans batched and sent as OTLP protobuf to `<endpoint>/v1/traces`, over the process's own
//! HTTP stack (reqwest on tokio) rather than a second one.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};

use super::TraceSettings;

/// How long one export may take; a collector that does not answer costs a batch, never the process.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends the exporter's requests. The SDK's batch thread polls the future outside any tokio runtime, so the
/// request runs as a task of the process's runtime and the thread waits for its answer.
#[derive(Debug)]
struct RuntimeClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for RuntimeClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let answer = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let status = response.status();
            Ok::<_, reqwest::Error>((status, response.bytes().await?))
        });
        let (status, body) = answer.await??;
        Ok(Response::builder().status(status).body(body)?)
    }
}

/// The provider and its tracer for `settings` (whose endpoint is set); needs a tokio runtime.
pub(crate) fn tracer_provider(settings: &TraceSettings) -> Result<(SdkTracerProvider, Tracer), String> {
    let endpoint = settings.endpoint.as_ref().ok_or("no OTLP endpoint")?;
    let runtime = tokio::runtime::Handle::try_current().map_err(|error| error.to_string())?;
    let client = reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build().map_err(|error| error.to_string())?;
    let exporter = SpanExporter::builder()
        .with_http()
        .with_http_client(RuntimeClient { client, runtime })
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{}/v1/traces", endpoint.as_str().trim_end_matches('/')))
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|error| error.to_string())?;
    let resource = Resource::builder_empty().with_service_name(settings.service_name.clone()).build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(settings.sampler.sdk())
        .with_resource(resource)
        .build();
    let tracer = provider.tracer(settings.service_name.clone());
    Ok((provider, tracer))
}
