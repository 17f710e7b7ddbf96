//! `logs`: the runner's log of an operation or of a runtime's last operation. The target is named as kubectl names
//! a pod's: `runtime/ID` or `operation/ID` (as `-o name` prints them), or a bare id, which is an operation's if
//! there is one and else a runtime's.

use std::io::Write;

use reqwest::Method;

use crate::client::path;
use crate::{Client, Error};

/// Prints the log of `target`'s operation; `follow` streams it while the run goes on.
pub async fn print_logs(client: &Client, target: &str, follow: bool, out: &mut dyn Write) -> Result<(), Error> {
    let operation = operation_of(client, target).await?;
    let logs = path("operations", &operation, "/logs")?;
    client.stream(&logs, &[("follow", if follow { "true" } else { "false" })], out).await
}

/// The operation `target` names, itself or as its runtime's last.
async fn operation_of(client: &Client, target: &str) -> Result<String, Error> {
    match target.split_once('/') {
        Some(("runtime" | "runtimes", id)) => last_operation(client, id).await,
        Some(("operation" | "operations", id)) => Ok(id.to_owned()),
        Some(_) => Err(Error::Local(format!("{target:?} is none of runtime/ID, operation/ID or ID"))),
        None => match client.json(Method::GET, &path("operations", target, "")?, &[], None).await {
            Ok(_) => Ok(target.to_owned()),
            Err(Error::Refused { status: 404, .. }) => match last_operation(client, target).await {
                Err(Error::Refused { status: 404, .. }) => Err(Error::Refused {
                    status: 404,
                    message: format!("not_found: no operation and no runtime has the id {target}"),
                }),
                found => found,
            },
            Err(error) => Err(error),
        },
    }
}

/// The id of the runtime `id`'s last operation.
async fn last_operation(client: &Client, id: &str) -> Result<String, Error> {
    let runtime = client.json(Method::GET, &path("runtimes", id, "")?, &[], None).await?;
    let operation = runtime["lastOperation"]["id"].as_str();
    operation.map(str::to_owned).ok_or_else(|| Error::Local(format!("runtime {id} names no last operation")))
}
