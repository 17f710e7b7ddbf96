//! Each command as its REST calls.

use std::io::{Read, Write};
use std::path::Path;

use reqwest::Method;
use serde_json::Value;

use crate::client::path;
use crate::render::{Shape, print};
use crate::wait::{self, WaitFlags, Wanted};
use crate::{Client, Command, Error, Get, Output};
use crate::{listing, logs, watch};

pub async fn run(
    client: &Client,
    command: Command,
    output: Output,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Error> {
    let (answer, shape) = match command {
        Command::Get(get) => return read(client, get, &output, (out, err)).await,
        Command::Create { file, dry_run, wait } => {
            let request = read_request(&file)?;
            let query: &[(&str, &str)] = if dry_run { &[("dryRun", "true")] } else { &[] };
            let created = client.json(Method::POST, "/api/v1/runtimes", query, Some(&request)).await?;
            let ready = Wanted::State("Ready".to_owned());
            return printed_then_waited(client, &created, (ready, wait), &output, (out, err)).await;
        }
        Command::Delete { id, confirm, wait } => {
            let query: Vec<(&str, &str)> = confirm.iter().map(|name| ("confirm", name.as_str())).collect();
            let deleting = client.json(Method::DELETE, &path("runtimes", &id, "")?, &query, None).await?;
            return printed_then_waited(client, &deleting, (Wanted::Delete, wait), &output, (out, err)).await;
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
        Command::Logs { target, follow } => return logs::print_logs(client, &target, follow, out).await,
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
            return write_text(&client.text(Method::GET, &path("provisions", &id, "/kubeconfig")?).await?, out);
        }
        Command::RotateKubeconfig { id } => {
            let rotation = path("runtimes", &id, "/kubeconfig/rotation")?;
            return write_text(&client.text(Method::POST, &rotation).await?, out);
        }
        Command::RenewCertificates { id } => {
            let renewal = path("runtimes", &id, "/certificates/renewal")?;
            (client.json(Method::POST, &renewal, &[], None).await?, Shape::Operation)
        }
        Command::Completion { shell } => return crate::completion::print(shell, out),
        Command::Wait { id, condition, timing } => {
            return wait::wait(client, &id, &condition, timing, err).await;
        }
    };
    print(&answer, shape, &output, out)
}

/// A kubeconfig as the service answered it.
fn write_text(text: &str, out: &mut dyn Write) -> Result<(), Error> {
    out.write_all(text.as_bytes()).map_err(|error| Error::Local(format!("cannot print: {error}")))
}

/// `get`: prints the runtimes, the runtime or the operation; with `-w`, watches the runtimes (`watch.rs`).
async fn read(
    client: &Client,
    get: Get,
    output: &Output,
    (out, err): (&mut dyn Write, &mut dyn Write),
) -> Result<(), Error> {
    match get {
        Get::Runtimes { state, selector, pages, watch } => {
            let query: Vec<(&str, &str)> = state.iter().map(|state| ("state", state.as_str())).collect();
            let selector = selector.unwrap_or_default();
            let runtimes = ("/api/v1/runtimes", "runtimes");
            let listed = listing::list(client, runtimes, &query, &selector, &pages, err).await?;
            if !watch.watch {
                return print(&listed, Shape::Runtimes, output, out);
            }
            // Said once, on the first page: the watch reads the same pages quietly.
            let again = async || listing::list(client, runtimes, &query, &selector, &pages, &mut std::io::sink()).await;
            watch::watch(listed, again, Shape::Runtimes, (output, watch.interval), (out, err)).await
        }
        Get::Runtime { id, watch } => {
            let runtime_path = path("runtimes", &id, "")?;
            let runtime = client.json(Method::GET, &runtime_path, &[], None).await?;
            if !watch.watch {
                return print(&runtime, Shape::Runtime, output, out);
            }
            let again = async || client.json(Method::GET, &runtime_path, &[], None).await;
            watch::watch(runtime, again, Shape::Runtime, (output, watch.interval), (out, err)).await
        }
        Get::Operation { id } => {
            let operation = client.json(Method::GET, &path("operations", &id, "")?, &[], None).await?;
            print(&operation, Shape::Operation, output, out)
        }
    }
}

/// Prints the operation a change queued and, with `--wait`, waits until its runtime meets `wanted`.
async fn printed_then_waited(
    client: &Client,
    operation: &Value,
    (wanted, flags): (Wanted, WaitFlags),
    output: &Output,
    (out, err): (&mut dyn Write, &mut dyn Write),
) -> Result<(), Error> {
    print(operation, Shape::Operation, output, out)?;
    if !flags.wait {
        return Ok(());
    }
    let id = operation["runtimeId"].as_str().ok_or_else(|| Error::Local(format!("no runtimeId in {operation}")))?;
    wait::wait(client, id, &wanted, flags.timing, err).await
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
}
