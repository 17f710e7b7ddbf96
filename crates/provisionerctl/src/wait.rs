//! Waiting for a runtime, as `kubectl wait` does: until its state is one (`--for state=Ready`), a condition has a
//! status (`--for condition=Provisioned`, `condition=Progressing=False`; `condition=Ready` is the `Ready` state),
//! it is gone (`--for delete`, the `Deleted` state) or a JSONPath finds a value (`--for jsonpath='{.state}'=Ready`).
//! `create --wait` and `delete --wait` wait the same way.

use std::io::Write;
use std::time::{Duration, Instant};

use clap::Args;
use reqwest::Method;
use serde_json::Value;

use crate::jsonpath::{Template, closing_brace};
use crate::{Client, Error};

/// What a wait waits for.
#[derive(Debug, Clone, PartialEq)]
pub enum Wanted {
    /// `state=<RuntimeState>`.
    State(String),
    /// `condition=<type>[=<status>]`: the runtime's condition of that type has the status (`True` when left out).
    Condition { name: String, status: String },
    /// `delete`: the runtime is deleted, or no longer found.
    Delete,
    /// `jsonpath=<template>[=<value>]`: the template prints the value (anything when left out).
    JsonPath { template: Template, value: Option<String> },
}

/// The forms `--for` takes, for its errors.
const FORMS: &str = "state=<RuntimeState>, condition=<type>[=True|False], delete or jsonpath='{.field}'=<value>";

/// `--for`'s value.
pub fn parse_condition(text: &str) -> Result<Wanted, String> {
    let refused = || format!("{text:?} is none of {FORMS} (for example state=Ready or condition=Ready)");
    if text == "delete" {
        return Ok(Wanted::Delete);
    }
    let (kind, rest) = text.split_once('=').ok_or_else(refused)?;
    match kind {
        "state" if !rest.is_empty() => Ok(Wanted::State(rest.to_owned())),
        "condition" if !rest.is_empty() => {
            let (name, status) = rest.split_once('=').unwrap_or((rest, "True"));
            match status.to_ascii_lowercase().as_str() {
                "true" | "false" if !name.is_empty() => {
                    Ok(Wanted::Condition { name: name.to_owned(), status: status.to_owned() })
                }
                _ => Err(refused()),
            }
        }
        "jsonpath" if rest.starts_with('{') => {
            let end = closing_brace(rest).ok_or_else(|| format!("jsonpath {rest:?}: the '{{' at 0 is not closed"))?;
            let template = Template::parse(&rest[..=end])?;
            let value = match &rest[end + 1..] {
                "" => None,
                other => Some(other.strip_prefix('=').ok_or_else(refused)?.to_owned()),
            };
            Ok(Wanted::JsonPath { template, value })
        }
        _ => Err(refused()),
    }
}

impl Wanted {
    /// Whether `runtime` (the server's answer) is what is waited for.
    fn is_met(&self, runtime: &Value) -> bool {
        let state = runtime["state"].as_str().unwrap_or_default();
        match self {
            Wanted::State(wanted) => state.eq_ignore_ascii_case(wanted),
            Wanted::Delete => state == "Deleted",
            Wanted::Condition { name, status } if name.eq_ignore_ascii_case("Ready") => {
                (state == "Ready").to_string().eq_ignore_ascii_case(status)
            }
            Wanted::Condition { name, status } => {
                let conditions = runtime["conditions"].as_array().into_iter().flatten();
                let mut found = conditions.filter(|condition| condition["type"].as_str() == Some(name.as_str()));
                found.any(|condition| {
                    condition["status"].as_str().is_some_and(|found| found.eq_ignore_ascii_case(status))
                })
            }
            Wanted::JsonPath { template, value } => {
                let printed = template.render(runtime);
                value.as_ref().map_or(!printed.is_empty(), |value| printed == *value)
            }
        }
    }

    /// A runtime that is no longer found meets it.
    fn is_met_by_absence(&self) -> bool {
        match self {
            Wanted::Delete => true,
            Wanted::State(wanted) => wanted.eq_ignore_ascii_case("Deleted"),
            _ => false,
        }
    }
}

/// How long to wait at most, and how often to ask.
#[derive(Debug, Clone, Copy, Args)]
pub struct Timing {
    /// How long to wait at most.
    #[arg(long, default_value = "40m", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// How often to ask.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub interval: Duration,
}

/// `create --wait` and `delete --wait`.
#[derive(Debug, Clone, Copy, Args)]
pub struct WaitFlags {
    /// Waits until the runtime is Ready (create) or Deleted (delete), printing its progress on standard error.
    #[arg(long)]
    pub wait: bool,
    #[command(flatten)]
    pub timing: Timing,
}

/// Follows a runtime until it meets `wanted`, printing each new state and stage with the time since the start on
/// `err`. A runtime that failed (unless that is what is wanted), or the timeout, ends the wait unsatisfied; a
/// server that cannot be reached meanwhile is asked again. A deleted runtime that is no longer found is `Deleted`.
pub async fn wait(
    client: &Client,
    id: &str,
    wanted: &Wanted,
    timing: Timing,
    err: &mut dyn Write,
) -> Result<(), Error> {
    let started = Instant::now();
    let runtime_path = crate::client::path("runtimes", id, "")?;
    let mut shown = String::new();
    let mut state = String::from("unknown");
    loop {
        let elapsed = humantime::format_duration(Duration::from_secs(started.elapsed().as_secs()));
        match client.json(Method::GET, &runtime_path, &[], None).await {
            Ok(runtime) => {
                state = runtime["state"].as_str().unwrap_or("unknown").to_owned();
                if wanted.is_met(&runtime) {
                    let _ = writeln!(err, "{id}: {state} after {elapsed}");
                    return Ok(());
                }
                show_progress(id, &runtime, &state, &mut shown, &elapsed.to_string(), err);
                if state == "Failed" {
                    let why = runtime["lastOperation"]["lastError"]["errMessage"].as_str().unwrap_or("no message");
                    return Err(Error::NotReached(format!("runtime {id} failed: {why}")));
                }
            }
            Err(Error::Refused { status: 404, .. }) if wanted.is_met_by_absence() => {
                let _ = writeln!(err, "{id}: Deleted after {elapsed}");
                return Ok(());
            }
            Err(error @ Error::Unavailable { .. }) => {
                let _ = writeln!(err, "{error}; asking again");
            }
            Err(error) => return Err(error),
        }
        if started.elapsed() + timing.interval > timing.timeout {
            let timeout = humantime::format_duration(timing.timeout);
            return Err(Error::NotReached(format!("runtime {id} is still {state} after {timeout}")));
        }
        tokio::time::sleep(timing.interval).await;
    }
}

/// Prints the runtime's state, operation and stage on `err` when they changed since `shown`.
fn show_progress(id: &str, runtime: &Value, state: &str, shown: &mut String, elapsed: &str, err: &mut dyn Write) {
    let operation = &runtime["lastOperation"];
    let line = format!(
        "state={state} operation={} stage={}",
        operation["operation"].as_str().unwrap_or("-"),
        operation["stage"].as_str().unwrap_or("-")
    );
    if line != *shown {
        let _ = writeln!(err, "{id}: {line} ({elapsed})");
        *shown = line;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_condition_is_a_state_a_condition_a_deletion_or_a_jsonpath() {
        let ready = json!({"state": "Ready", "conditions": [
            {"type": "Provisioned", "status": "True"}, {"type": "Progressing", "status": "False"}]});
        let met = |text: &str| parse_condition(text).unwrap().is_met(&ready);
        for yes in
            ["state=Ready", "state=ready", "condition=Ready", "condition=Provisioned", "condition=Progressing=False"]
        {
            assert!(met(yes), "{yes}");
        }
        for no in ["state=Failed", "delete", "condition=Ready=False", "condition=Progressing", "condition=Other"] {
            assert!(!met(no), "{no}");
        }
        assert!(met("jsonpath={.state}=Ready") && met("jsonpath={.conditions[0].type}") && !met("jsonpath={.x}"));
        assert!(parse_condition("delete").unwrap().is_met_by_absence());
        assert!(parse_condition("state=Deleted").unwrap().is_met_by_absence());
        for refused in ["state=", "Ready", "condition=Ready=maybe", "jsonpath={.state", "jsonpath={.state}Ready"] {
            assert!(parse_condition(refused).is_err(), "{refused}");
        }
    }
}
