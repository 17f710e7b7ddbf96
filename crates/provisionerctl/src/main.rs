use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    process_support::install_crypto_provider();
    let code = provisionerctl::run_args(std::env::args_os(), &mut std::io::stdout(), &mut std::io::stderr()).await;
    ExitCode::from(code)
}
