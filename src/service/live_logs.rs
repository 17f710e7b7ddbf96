//! A running operation's logs as its pod prints them, redacted by the service too with the run's credential
//! values: a value the runner did not redact (printed before it learnt it, or by the init container) never
//! reaches a caller. Kept logs were redacted when they were kept.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use runner_contract::redact::{HOLD_BACK, LineRedactor, Redactor};

use crate::domain::run_log::ContainerLog;

pub(super) fn redact_logs(logs: Vec<ContainerLog>, redactor: &Redactor) -> Vec<ContainerLog> {
    logs.into_iter().map(|log| ContainerLog { log: redactor.redact(&log.log), container: log.container }).collect()
}

/// `lines` (each ending with its line break) redacted; each line is given out once the next arrived or after
/// [`HOLD_BACK`], so that a value split across two lines is found too.
pub(super) fn redact_stream<E: Send + 'static>(
    lines: BoxStream<'static, Result<String, E>>,
    redactor: Redactor,
) -> BoxStream<'static, Result<String, E>> {
    let state = (lines, LineRedactor::new(redactor), false);
    futures::stream::unfold(state, |(mut lines, mut held, ended)| async move {
        if ended {
            return None;
        }
        loop {
            let ready = match tokio::time::timeout(HOLD_BACK, lines.next()).await {
                Err(_) => held.flush(),
                Ok(Some(Ok(line))) => held.push(line.strip_suffix('\n').unwrap_or(&line)),
                Ok(Some(Err(error))) => return Some((Err(error), (lines, held, false))),
                Ok(None) => return held.flush().map(|last| (Ok(format!("{last}\n")), (lines, held, true))),
            };
            if let Some(line) = ready {
                return Some((Ok(format!("{line}\n")), (lines, held, false)));
            }
        }
    })
    .boxed()
}
