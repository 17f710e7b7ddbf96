//! terraform-runner: the main container of a provisioning Job. `terraform-runner --action apply|destroy|plan`;
//! configuration from the environment (see [`RunnerSettings`] and the README). `terraform-runner fetch-modules`
//! is the Job's init container (see [`Fetch`]).
//! Exit codes: 0 done (the termination message is the run's report as JSON: the plan's summary and, for an
//! apply, the digest of the kubeconfig it published), 1 the run failed (the termination
//! message says why), 2 bad usage or configuration, 3 a destructive plan was refused (nothing changed), 4 an approved
//! plan was stale, 5 the cloud refused a change (the message is a `RunFailure`), 6 a deprovisioning found resources
//! left in the cloud (the message is a `Leftovers`).
#![deny(rust_2018_idioms)]
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;

use process_support::install_crypto_provider;
use process_support::logging::{self, LineFilter, LogFormat};
use process_support::traces::{SPAN_TARGET, TraceSettings, continue_trace};
use runner_contract::approval::EXIT_STALE_PLAN;
use runner_contract::failure::{EXIT_CLOUD_FAILURE, EXIT_LEFTOVERS, Leftovers, MAX_LISTED_LEFTOVERS, RunFailure};
use runner_contract::manifest::RunAction;
use runner_contract::plan::EXIT_DESTRUCTIVE_PLAN;
use runner_contract::redact::SharedRedactor;
use terraform_runner::fetch_modules::Fetch;
use terraform_runner::{Error, Runner, RunnerSettings};
use tracing::Instrument;

/// Where Kubernetes reads a container's termination message (the runner's own setting overrides it).
const TERMINATION_LOG: &str = "/dev/termination-log";

enum Command {
    Run(RunAction),
    FetchModules,
}

#[tokio::main]
async fn main() -> ExitCode {
    let action = match parse_command(std::env::args().skip(1)) {
        Ok(Command::Run(action)) => action,
        Ok(Command::FetchModules) => return fetch_modules().await,
        Err(message) => {
            eprintln!(
                "terraform-runner: {message}\nusage: terraform-runner --action apply|destroy|plan | fetch-modules"
            );
            return ExitCode::from(2);
        }
    };
    let settings = match RunnerSettings::load() {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("configuration error: {error}");
            return ExitCode::from(2);
        }
    };
    install_crypto_provider();
    // Plain lines: people read these with `kubectl logs job/provision-<id>`, between Terraform's own.
    // Its own lines too are redacted with every value the run learns.
    let redactor = SharedRedactor::default();
    let filter = redactor.clone();
    let line_filter: LineFilter = Arc::new(move |line| filter.redact(line));
    let traces = logging::init_tracing(&settings.log_level, LogFormat::Text, &settings.traces, Some(line_filter));

    let termination_log = settings.termination_log.clone();
    // The run's spans continue the service's trace: the span of the step that created this Job.
    let job =
        tracing::info_span!(target: SPAN_TARGET, "job", otel.name = format!("terraform-runner {}", action.as_str()));
    if let Some(traceparent) = &settings.traceparent {
        continue_trace(&job, traceparent);
    }
    let result = async {
        let kube = kube::Client::try_default().await?;
        Runner::new(settings, kube).run(action, &redactor).await
    }
    .instrument(job)
    .await;
    traces.shutdown().await;
    let (message, code) = match result {
        Ok(report) => (serde_json::to_string(&report).expect("a report serialises"), ExitCode::SUCCESS),
        Err(error) => {
            let message = Runner::failure_message(&error, &redactor.current());
            eprintln!("terraform-runner: {message}");
            match error {
                Error::DestructivePlan { .. } => (message, ExitCode::from(EXIT_DESTRUCTIVE_PLAN as u8)),
                Error::StalePlan { .. } | Error::BeyondApproval { .. } => {
                    (message, ExitCode::from(EXIT_STALE_PLAN as u8))
                }
                Error::Leftovers { resources } => {
                    let leftovers =
                        Leftovers { message, resources: resources.into_iter().take(MAX_LISTED_LEFTOVERS).collect() };
                    let report = serde_json::to_string(&leftovers).expect("leftovers serialise");
                    (report, ExitCode::from(EXIT_LEFTOVERS as u8))
                }
                Error::Terraform { cloud: Some(cloud), .. } => {
                    let failure = RunFailure { message, cloud };
                    let report = serde_json::to_string(&failure).expect("a failure serialises");
                    (report, ExitCode::from(EXIT_CLOUD_FAILURE as u8))
                }
                _ => (message, ExitCode::FAILURE),
            }
        }
    };
    if let Err(write_error) = std::fs::write(&termination_log, &message) {
        eprintln!("terraform-runner: writing {}: {write_error}", termination_log.display());
    }
    code
}

fn parse_command(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
    match (args.next().as_deref(), args.next().as_deref(), args.next()) {
        (Some("--action"), Some(action), None) => RunAction::parse(action)
            .map(Command::Run)
            .ok_or_else(|| format!("--action {action:?} is not apply, destroy or plan")),
        (Some("fetch-modules"), None, None) => Ok(Command::FetchModules),
        _ => Err("expected exactly --action apply|destroy|plan, or fetch-modules".to_owned()),
    }
}

/// The init container: exit 2 for a bad setting, 1 when the fetch or its check fails, with the reason as the
/// termination message.
async fn fetch_modules() -> ExitCode {
    let traces = logging::init_tracing("info", LogFormat::Text, &TraceSettings::off("terraform-runner"), None);
    let (message, code) = match Fetch::from_env() {
        Err(error) => (error.to_string(), ExitCode::from(2)),
        Ok(fetch) => match fetch.run().await {
            Ok(commit) => (format!("modules at commit {commit}"), ExitCode::SUCCESS),
            Err(error) => (error.to_string(), ExitCode::FAILURE),
        },
    };
    traces.shutdown().await;
    if code != ExitCode::SUCCESS {
        eprintln!("terraform-runner fetch-modules: {message}");
    }
    let termination_log = std::env::var("RUNNER_TERMINATION_LOG").unwrap_or_else(|_| TERMINATION_LOG.to_owned());
    if let Err(write_error) = std::fs::write(&termination_log, &message) {
        eprintln!("terraform-runner: writing {termination_log}: {write_error}");
    }
    code
}
