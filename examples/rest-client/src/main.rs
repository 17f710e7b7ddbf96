//! Runs the example client's whole lifecycle against a provisioner:
//! `rest-client-example <base URL> <token file> <create body .json> <upgrade body .json>`.

use std::process::ExitCode;
use std::time::Duration;

use rest_client_example::{Client, Step, lifecycle};

/// One step may take this long: a provisioning on a real cloud takes minutes.
const STEP_LIMIT: Duration = Duration::from_secs(30 * 60);

#[tokio::main]
async fn main() -> ExitCode {
    process_support::install_crypto_provider();
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [base_url, token_file, request_file, upgrade_file] = &arguments[..] else {
        eprintln!("usage: rest-client-example <base URL> <token file> <create body .json> <upgrade body .json>");
        return ExitCode::from(2);
    };
    let read = |path: &str| std::fs::read_to_string(path).map_err(|error| format!("{path}: {error}"));
    let inputs = (|| -> Result<_, String> {
        let token = read(token_file)?.trim().to_owned();
        let request = serde_json::from_str(&read(request_file)?).map_err(|error| format!("{request_file}: {error}"))?;
        let upgrade = serde_json::from_str(&read(upgrade_file)?).map_err(|error| format!("{upgrade_file}: {error}"))?;
        Ok((token, request, upgrade))
    })();
    let (token, request, upgrade) = match inputs {
        Ok(inputs) => inputs,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let client = Client::new(base_url.as_str(), token, STEP_LIMIT);
    let print = async |step: &Step| match step {
        Step::Created { id } => println!("created runtime {id}"),
        Step::Settled { change, runtime } => println!("{change}: the runtime is {}", runtime["state"]),
        Step::Kubeconfig { text } => println!("kubeconfig: {} bytes", text.len()),
    };
    match lifecycle(&client, &request, &upgrade, print).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{error}");
            ExitCode::FAILURE
        }
    }
}
