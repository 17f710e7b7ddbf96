//! `get runtime ID -w` and `get runtimes -w`, as kubectl's `--watch`: the current rows, then a row each time a
//! runtime's state, operation or stage changes, asking the server every `--interval`, until every runtime watched
//! has settled (its `Progressing` condition is False, or its state is Ready, Hibernated, Failed or Deleted) or
//! Ctrl-C stops it.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use crate::render::{Shape, print, print_more};
use crate::{Error, Output};

/// `-w` and how often it asks.
#[derive(Debug, Clone, Copy, Args)]
pub struct WatchFlags {
    /// After the current rows, prints a row each time a runtime's state or stage changes, until it settles
    /// (Progressing=False, or Ready, Hibernated, Failed or Deleted) or Ctrl-C.
    #[arg(short = 'w', long)]
    pub watch: bool,
    /// How often to ask while watching.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
}

/// The states no operation is running in.
const SETTLED_STATES: [&str; 4] = ["Ready", "Hibernated", "Failed", "Deleted"];

/// Whether nothing changes `runtime` any more: its `Progressing` condition is False, or its state is settled.
fn is_settled(runtime: &Value) -> bool {
    let conditions = runtime["conditions"].as_array().into_iter().flatten();
    let mut progressing = conditions.filter(|condition| condition["type"] == "Progressing");
    progressing.any(|condition| condition["status"] == "False")
        || SETTLED_STATES.contains(&runtime["state"].as_str().unwrap_or_default())
}

/// What a new row is printed for: the runtime's state, operation and stage.
fn seen_as(runtime: &Value) -> [String; 3] {
    let text = |value: &Value| value.as_str().unwrap_or("-").to_owned();
    let operation = &runtime["lastOperation"];
    [text(&runtime["state"]), text(&operation["operation"]), text(&operation["stage"])]
}

/// The runtimes of an answer.
fn runtimes(answer: &Value, shape: Shape) -> Vec<&Value> {
    match shape {
        Shape::Runtimes => answer["runtimes"].as_array().map(|list| list.iter().collect()).unwrap_or_default(),
        _ => vec![answer],
    }
}

/// Prints `first` (a table whole, any other output runtime by runtime, as kubectl does), then asks `again` every
/// `interval` and prints a row for each runtime that changed, until all have settled. A server that cannot be
/// reached meanwhile is asked again; a runtime that is no longer found ends the watch.
pub async fn watch(
    first: Value,
    mut again: impl AsyncFnMut() -> Result<Value, Error>,
    shape: Shape,
    (output, interval): (&Output, Duration),
    (out, err): (&mut dyn Write, &mut dyn Write),
) -> Result<(), Error> {
    match output {
        Output::Table | Output::Wide => print(&first, shape, output, out)?,
        _ => runtimes(&first, shape).into_iter().try_for_each(|runtime| print_more(runtime, output, out))?,
    }
    let id = |runtime: &Value| runtime["id"].as_str().unwrap_or_default().to_owned();
    let mut seen: HashMap<String, [String; 3]> =
        runtimes(&first, shape).into_iter().map(|runtime| (id(runtime), seen_as(runtime))).collect();
    let mut current = first;
    while !runtimes(&current, shape).into_iter().all(is_settled) {
        tokio::time::sleep(interval).await;
        current = match again().await {
            Ok(answer) => answer,
            Err(error @ Error::Unavailable { .. }) => {
                let _ = writeln!(err, "{error}; asking again");
                continue;
            }
            Err(Error::Refused { status: 404, message }) if matches!(shape, Shape::Runtime) => {
                let _ = writeln!(err, "{}: no longer found ({message})", id(&current));
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        for runtime in runtimes(&current, shape) {
            let row = seen_as(runtime);
            if seen.get(&id(runtime)) != Some(&row) {
                print_more(runtime, output, out)?;
                seen.insert(id(runtime), row);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_runtime_settles_when_nothing_progresses_or_its_state_is_settled() {
        let progressing = |status: &str| json!([{"type": "Progressing", "status": status}]);
        assert!(is_settled(&json!({"state": "Provisioning", "conditions": progressing("False")})));
        assert!(!is_settled(&json!({"state": "Provisioning", "conditions": progressing("True")})));
        for state in SETTLED_STATES {
            assert!(is_settled(&json!({"state": state})), "{state}");
        }
        for state in ["Provisioning", "Updating", "Hibernating", "Deprovisioning"] {
            assert!(!is_settled(&json!({"state": state})), "{state}");
        }
    }

    #[tokio::test]
    async fn a_row_is_printed_for_each_change_until_it_settles() {
        let state = |state: &str, stage: &str| json!({"id": "r", "name": "a", "state": state, "lastOperation": {"operation": "provision", "stage": stage}});
        let mut answers = vec![state("Ready", "Done"), state("Provisioning", "Apply"), state("Provisioning", "Apply")];
        let first = state("Provisioning", "Queued");
        let again = async || Ok(answers.pop().unwrap());
        let output = crate::output::parse("jsonpath={.state} {.lastOperation.stage}{\"\\n\"}").unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let timing = (&output, Duration::from_millis(1));
        watch(first, again, Shape::Runtime, timing, (&mut out, &mut err)).await.unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "Provisioning Queued\nProvisioning Apply\nReady Done\n");
    }
}
