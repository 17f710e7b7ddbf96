//! Each command as its REST calls.

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;

use crate::listing;
use crate::render::{Shape, print};
use crate::{Client, Command, Error, Get, Output};

pub async fn run(
    client: &Client,
    command: Command,
    output: Output,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Error> {
    let (answer, shape) = match command {
        Command::Get(Get::Runtimes { state, selector, pages }) => {
            let query: Vec<(&str, &str)> = state.iter().map(|state| ("state", state.as_str())).collect();
            let selector = selector.unwrap_or_default();
            let runtimes = ("/api/v1/runtimes", "runtimes");
            (listing::list(client, runtimes, &query, &selector, &pages, err).await?, Shape::Runtimes)
        }
        Command::Get(Get::Runtime { id }) => {
            (client.json(Method::GET, &path("runtimes", &id, "")?, &[], None).await?, Shape::Runtime)
        }
        Command::Get(Get::Operation { id }) => {
            (client.json(Method::GET, &path("operations", &id, "")?, &[], None).await?, Shape::Operation)
        }
        Command::Create { file, dry_run } => {
            let request = read_request(&file)?;
            let query: &[(&str, &str)] = if dry_run { &[("dryRun", "true")] } else { &[] };
            (client.json(Method::POST, "/api/v1/runtimes", query, Some(&request)).await?, Shape::Operation)
        }
        Command::Delete { id, confirm } => {
            let query: Vec<(&str, &str)> = confirm.iter().map(|name| ("confirm", name.as_str())).collect();
            (client.json(Method::DELETE, &path("runtimes", &id, "")?, &query, None).await?, Shape::Operation)
        }
        Command::Upgrade { id, file, dry_run } => {
            let change = read_request(&file)?;
            let query: &[(&str, &str)] = if dry_run { &[("dryRun", "true")] } else { &[] };
            (client.json(Method::PATCH, &path("runtimes", &id, "")?, query, Some(&change)).await?, Shape::Operation)
        }
        Command::Describe { id } => {
            let runtime = client.json(Method::GET, &path("runtimes", &id, "")?, &[], None).await?;
            let history = path("provisions", &id, "/operations")?;
            let operations = client.json(Method::GET, &history, &[("first", "5")], None).await?;
            return describe(&runtime, &operations, &output, out);
        }
        Command::Cancel { operation } => {
            (client.json(Method::POST, &path("operations", &operation, "/cancel")?, &[], None).await?, Shape::Operation)
        }
        Command::Approve { operation, plan_sha256 } => {
            let body = serde_json::json!({ "planSha256": plan_sha256 });
            let approve = path("operations", &operation, "/approve")?;
            (client.json(Method::POST, &approve, &[], Some(&body)).await?, Shape::Operation)
        }
        Command::Reject { operation } => {
            (client.json(Method::POST, &path("operations", &operation, "/reject")?, &[], None).await?, Shape::Operation)
        }
        Command::Retry { operation } => {
            (client.json(Method::POST, &path("operations", &operation, "/retry")?, &[], None).await?, Shape::Operation)
        }
        Command::Logs { operation, follow } => {
            let logs = path("operations", &operation, "/logs")?;
            return client.stream(&logs, &[("follow", if follow { "true" } else { "false" })], out).await;
        }
        Command::Hibernate { id } => {
            (client.json(Method::POST, &path("runtimes", &id, "/hibernate")?, &[], None).await?, Shape::Operation)
        }
        Command::Wake { id } => {
            (client.json(Method::POST, &path("runtimes", &id, "/wake")?, &[], None).await?, Shape::Operation)
        }
        Command::Operations { id, pages } => {
            let history = (path("provisions", &id, "/operations")?, "operations");
            (listing::list(client, (&history.0, history.1), &[], &[], &pages, err).await?, Shape::Operations)
        }
        Command::Kubeconfig { id } => {
            let kubeconfig = client.text(&path("provisions", &id, "/kubeconfig")?).await?;
            return out
                .write_all(kubeconfig.as_bytes())
                .map_err(|error| Error::Local(format!("cannot print: {error}")));
        }
        Command::Wait { id, condition, timeout, interval } => {
            return wait(client, &id, &condition, (timeout, interval), err).await;
        }
    };
    print(&answer, shape, &output, out)
}

/// A runtime and its last operations: as one document for `-o json|yaml|jsonpath`, the runtime's name for `-o
/// name`, else its fields, then a table (a wide one for `-o wide`).
fn describe(runtime: &Value, operations: &Value, output: &Output, out: &mut dyn Write) -> Result<(), Error> {
    match output {
        Output::Table | Output::Wide => {}
        Output::Name => return print(runtime, Shape::Runtime, output, out),
        Output::Json | Output::Yaml | Output::JsonPath(_) => {
            let both = serde_json::json!({ "runtime": runtime, "operations": operations["operations"] });
            return print(&both, Shape::Runtime, output, out);
        }
    }
    let mut fields = runtime.clone();
    if let Some(fields) = fields.as_object_mut() {
        fields.remove("lastOperation");
    }
    print(&fields, Shape::Runtime, &Output::Yaml, out)?;
    out.write_all(b"\nOperations:\n").map_err(|error| Error::Local(format!("cannot print: {error}")))?;
    let table = if *output == Output::Wide { Output::Wide } else { Output::Table };
    print(operations, Shape::Operations, &table, out)
}

/// `/api/v1/<collection>/<id><rest>`; an id is checked here, so that it cannot name another path.
fn path(collection: &str, id: &str, rest: &str) -> Result<String, Error> {
    let plain =
        !id.is_empty() && id.chars().all(|character| character.is_ascii_alphanumeric() || "-_.".contains(character));
    if !plain || id.starts_with('.') {
        return Err(Error::Local(format!("{id:?} is not an id (letters, digits, '-', '_' and '.')")));
    }
    Ok(format!("/api/v1/{collection}/{id}{rest}"))
}

/// A request file (`-`: standard input), JSON or YAML.
fn read_request(file: &Path) -> Result<Value, Error> {
    let unreadable = |why: String| Error::Local(format!("cannot read the request {}: {why}", file.display()));
    let mut text = String::new();
    if file == Path::new("-") {
        std::io::stdin().read_to_string(&mut text).map_err(|error| unreadable(error.to_string()))?;
    } else {
        text = std::fs::read_to_string(file).map_err(|error| unreadable(error.to_string()))?;
    }
    match serde_json::from_str(&text) {
        Ok(value) => Ok(value),
        Err(_) => serde_saphyr::from_str(&text).map_err(|error| unreadable(format!("neither JSON nor YAML: {error}"))),
    }
}

/// Follows a runtime until its state is `wanted`, printing each new state and stage with the time since the start
/// on `err`. A runtime that failed (unless that is what is wanted), or the timeout, ends the wait unsatisfied; a
/// server that cannot be reached meanwhile is asked again. A deleted runtime that is no longer found is `Deleted`.
async fn wait(
    client: &Client,
    id: &str,
    wanted: &str,
    (timeout, interval): (Duration, Duration),
    err: &mut dyn Write,
) -> Result<(), Error> {
    let started = Instant::now();
    let runtime_path = path("runtimes", id, "")?;
    let mut shown = String::new();
    let mut state = String::from("unknown");
    loop {
        let elapsed = humantime::format_duration(Duration::from_secs(started.elapsed().as_secs()));
        match client.json(Method::GET, &runtime_path, &[], None).await {
            Ok(runtime) => {
                state = runtime["state"].as_str().unwrap_or("unknown").to_owned();
                if state.eq_ignore_ascii_case(wanted) {
                    let _ = writeln!(err, "{id}: {state} after {elapsed}");
                    return Ok(());
                }
                let operation = &runtime["lastOperation"];
                let line = format!(
                    "state={state} operation={} stage={}",
                    operation["operation"].as_str().unwrap_or("-"),
                    operation["stage"].as_str().unwrap_or("-")
                );
                if line != shown {
                    let _ = writeln!(err, "{id}: {line} ({elapsed})");
                    shown = line;
                }
                if state == "Failed" {
                    let why = operation["lastError"]["errMessage"].as_str().unwrap_or("no message");
                    return Err(Error::NotReached(format!("runtime {id} failed: {why}")));
                }
            }
            Err(Error::Refused { status: 404, .. }) if wanted.eq_ignore_ascii_case("Deleted") => {
                let _ = writeln!(err, "{id}: Deleted after {elapsed}");
                return Ok(());
            }
            Err(error @ Error::Unavailable { .. }) => {
                let _ = writeln!(err, "{error}; asking again");
            }
            Err(error) => return Err(error),
        }
        if started.elapsed() + interval > timeout {
            let timeout = humantime::format_duration(timeout);
            return Err(Error::NotReached(format!("runtime {id} is still {state} after {timeout}")));
        }
        tokio::time::sleep(interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_as_json_or_yaml() {
        let folder = std::env::temp_dir().join(format!("provisionerctl-request-{}", std::process::id()));
        std::fs::create_dir_all(&folder).unwrap();
        let (json, yaml, neither) = (folder.join("r.json"), folder.join("r.yaml"), folder.join("r.txt"));
        std::fs::write(&json, r#"{"runtimeInput": {"name": "a"}}"#).unwrap();
        std::fs::write(&yaml, "runtimeInput:\n  name: a\n").unwrap();
        std::fs::write(&neither, "runtimeInput: [\n").unwrap();
        assert_eq!(read_request(&json).unwrap(), read_request(&yaml).unwrap());
        let refused = read_request(&neither).unwrap_err().to_string();
        assert!(refused.contains("neither JSON nor YAML"), "{refused}");
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn an_id_cannot_name_another_path() {
        assert_eq!(path("runtimes", "0190b8a6-7f3e", "/wake").unwrap(), "/api/v1/runtimes/0190b8a6-7f3e/wake");
        for id in ["", "..", "a/b", "a?b", "a b", ".hidden"] {
            assert!(path("runtimes", id, "").is_err(), "{id:?}");
        }
    }
}
