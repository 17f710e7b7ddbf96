//! `provisionerctl`: the provisioner's REST API from a terminal. Runtimes are listed, read, created, hibernated,
//! woken and deleted, their operations read, their kubeconfig fetched, and a wait follows a runtime until it
//! reaches a state. The server comes from `--server` or `PROVISIONER_SERVER`, else from provisionerctl's config
//! file; a token only from where the user said so (`token.rs`), and never over plain HTTP to another machine unless
//! allowed (`plain_http.rs`).

mod client;
mod commands;
mod completion;
mod examples;
mod exec_plugin;
mod jsonpath;
mod kubeconfig;
mod listing;
mod logs;
mod output;
mod plain_http;
mod render;
mod tls;
mod token;
mod wait;
mod watch;

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use secrecy::SecretString;
use url::{Origin, Url};

pub use client::Client;
pub use output::Output;
pub use token::Locations;

/// The exit codes, as `--help` lists them.
pub mod exit {
    pub const OK: u8 = 0;
    /// A local failure: a file that cannot be read, a token that cannot be found.
    pub const LOCAL: u8 = 1;
    /// The command line is wrong (clap's own code).
    pub const USAGE: u8 = 2;
    /// The server refused the request (4xx): the problem is printed.
    pub const REFUSED: u8 = 3;
    /// The server cannot be reached or failed (5xx).
    pub const UNAVAILABLE: u8 = 4;
    /// A wait ended without the state it waited for: the runtime failed, or the timeout passed.
    pub const NOT_REACHED: u8 = 5;
}

#[derive(Debug, Parser)]
#[command(name = "provisionerctl", version, about = "Runtimes and operations of the cluster provisioner", after_help = examples::ROOT)]
pub struct Cli {
    #[command(flatten)]
    pub connection: Connection,
    /// How results are printed: table, wide, name, json, yaml or jsonpath=TEMPLATE (kubectl's subset: `{.field}`,
    /// `{.items[*].field}`, `[n]`, `[?(@.field=="value")]`, `{"\n"}`).
    #[arg(short, long, value_parser = output::parse, default_value = "table", global = true)]
    pub output: Output,
    #[command(subcommand)]
    pub command: Command,
}

/// Which server is called, and with which token.
#[derive(Debug, Default, Args)]
pub struct Connection {
    /// The provisioner's base URL [default: the server of the config file's current context, else
    /// http://127.0.0.1:3000].
    #[arg(long, env = "PROVISIONER_SERVER", value_parser = client::server_url, global = true)]
    pub server: Option<Url>,
    /// A bearer token for the server.
    #[arg(long, env = "PROVISIONER_TOKEN", hide_env_values = true, value_parser = secret, global = true)]
    pub token: Option<SecretString>,
    /// A file holding the bearer token (a projected ServiceAccount token, for example), read on each run.
    #[arg(long, env = "PROVISIONER_TOKEN_FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// Sends the token of this user of the kubeconfig kubectl reads (its token, tokenFile or exec plugin's).
    #[arg(long, global = true)]
    pub kubeconfig_user: Option<String>,
    /// Sends a token over plain http:// to a host other than this machine's loopback, where anyone on the way can
    /// read it.
    #[arg(long, env = "PROVISIONER_ALLOW_PLAIN_HTTP", global = true)]
    pub allow_plain_http: bool,
    /// The tenant requests act for (the `Tenant` header): only its runtimes are seen and changed [default: the
    /// namespace of the config file's context, on its server].
    #[arg(long, env = "PROVISIONER_TENANT", global = true)]
    pub tenant: Option<String>,
    /// Checks the server's certificate against this CA's (PEM) only, instead of the machine's roots [default: the CA
    /// of the config file's context's cluster, on its server].
    #[arg(long, global = true)]
    pub certificate_authority: Option<PathBuf>,
    /// Does not check the server's certificate: anyone on the way can read and change the requests (a warning
    /// says so).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// The kubeconfig file `--kubeconfig-user` reads, instead of `KUBECONFIG`'s files or `~/.kube/config`.
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// The context of provisionerctl's config file to use, instead of its current-context.
    #[arg(long, global = true)]
    pub context: Option<String>,
}

fn secret(text: &str) -> Result<SecretString, std::convert::Infallible> {
    Ok(SecretString::from(text))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Lists or reads runtimes and operations.
    #[command(subcommand, after_help = examples::GET)]
    Get(Get),
    /// Creates a runtime from a request file (JSON or YAML, the body of `POST /api/v1/runtimes`).
    #[command(after_help = examples::CREATE)]
    Create {
        /// The request; `-` reads standard input.
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// Only plans: nothing is created.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        wait: wait::WaitFlags,
    },
    /// Deprovisions a runtime.
    #[command(after_help = examples::DELETE)]
    Delete {
        id: String,
        /// The runtime's name, when the server asks for a confirmation.
        #[arg(long)]
        confirm: Option<String>,
        #[command(flatten)]
        wait: wait::WaitFlags,
    },
    /// Changes a runtime's cluster (the body of `PATCH /api/v1/runtimes/ID`, JSON or YAML).
    #[command(after_help = examples::UPGRADE)]
    Upgrade {
        id: String,
        /// The change; `-` reads standard input.
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// Only plans: nothing is changed.
        #[arg(long)]
        dry_run: bool,
    },
    /// Hibernates a runtime: its workers stop, its control plane and state stay.
    #[command(after_help = examples::HIBERNATE)]
    Hibernate { id: String },
    /// Wakes a hibernated runtime.
    #[command(after_help = examples::WAKE)]
    Wake { id: String },
    /// Shows a runtime: its configuration, state and conditions, and its last operations.
    #[command(after_help = examples::DESCRIBE)]
    Describe { id: String },
    /// Cancels a queued or running operation.
    #[command(after_help = examples::CANCEL)]
    Cancel { operation: String },
    /// Approves the plan an operation waits with, named by its digest.
    #[command(after_help = examples::APPROVE)]
    Approve {
        operation: String,
        /// The plan's sha256, as the operation shows it (`planSha256`).
        #[arg(long)]
        plan_sha256: String,
    },
    /// Rejects the plan an operation waits with.
    #[command(after_help = examples::REJECT)]
    Reject { operation: String },
    /// Queues a failed operation again.
    #[command(after_help = examples::RETRY)]
    Retry { operation: String },
    /// Prints the runner's log of an operation, or of a runtime's last operation; `-f` follows it while it runs.
    #[command(after_help = examples::LOGS)]
    Logs {
        /// `operation/ID`, `runtime/ID` (its last operation), or an ID: an operation's, else a runtime's.
        target: String,
        #[arg(short, long)]
        follow: bool,
    },
    /// Lists a runtime's operations, newest first.
    #[command(after_help = examples::OPERATIONS)]
    Operations {
        id: String,
        #[command(flatten)]
        pages: listing::Pages,
    },
    /// Prints a runtime's kubeconfig.
    #[command(after_help = examples::KUBECONFIG)]
    Kubeconfig { id: String },
    /// Has a new kubeconfig minted for a runtime whose kubeconfig has a lifetime (vanilla) and prints it; the one
    /// before stays valid until it expires.
    #[command(after_help = examples::ROTATE_KUBECONFIG)]
    RotateKubeconfig { id: String },
    /// Has kubeadm renew a vanilla runtime's control-plane certificates, one node after the other (EKS and GKE
    /// renew their own).
    #[command(after_help = examples::RENEW_CERTIFICATES)]
    RenewCertificates { id: String },
    /// Prints the completion script of a shell (bash, zsh, fish, elvish or powershell) for every command and flag.
    #[command(after_help = examples::COMPLETION)]
    Completion {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Waits until a runtime reaches a state, has a condition, is deleted or a JSONPath finds a value, printing its
    /// progress on standard error.
    #[command(after_help = examples::WAIT)]
    Wait {
        id: String,
        /// What to wait for: `state=<RuntimeState>` (`state=Ready`, `state=Deleted`), `condition=<type>[=True|False]`
        /// (`condition=Ready`, `condition=Progressing=False`), `delete`, or `jsonpath='{.field}'=<value>`.
        #[arg(long = "for", value_parser = wait::parse_condition)]
        condition: wait::Wanted,
        #[command(flatten)]
        timing: wait::Timing,
    },
}

#[derive(Debug, Subcommand)]
pub enum Get {
    /// Lists the runtimes, optionally of one state and with some labels; `-w` prints a row each time one's state or
    /// stage changes, until all have settled.
    #[command(after_help = examples::GET_RUNTIMES)]
    Runtimes {
        #[arg(long)]
        state: Option<String>,
        /// Only runtimes with these labels: `key=value`, comma-separated.
        #[arg(short = 'l', long = "selector", value_parser = listing::parse_selector)]
        selector: Option<Selector>,
        #[command(flatten)]
        pages: listing::Pages,
        #[command(flatten)]
        watch: watch::WatchFlags,
    },
    /// Reads one runtime; `-w` prints a row each time its state or stage changes, until it settles.
    #[command(after_help = examples::GET_RUNTIME)]
    Runtime {
        id: String,
        #[command(flatten)]
        watch: watch::WatchFlags,
    },
    /// Reads one operation.
    #[command(after_help = examples::GET_OPERATION)]
    Operation { id: String },
}

/// `-l`'s pairs.
type Selector = Vec<(String, String)>;

/// Why a command failed; each maps to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Local(String),
    #[error("Error from server ({status}): {message}")]
    Refused { status: u16, message: String },
    #[error("the server at {server} cannot be reached or failed: {message}")]
    Unavailable { server: String, message: String },
    #[error("{0}")]
    NotReached(String),
    #[error(
        "refused to send a token over plain HTTP to {}: use https://, or pass --allow-plain-http \
         (PROVISIONER_ALLOW_PLAIN_HTTP=true) if no one can read the way there",
        .server.ascii_serialization()
    )]
    TokenOverPlainHttp { server: Origin },
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Local(_) | Error::TokenOverPlainHttp { .. } => exit::LOCAL,
            Error::Refused { .. } => exit::REFUSED,
            Error::Unavailable { .. } => exit::UNAVAILABLE,
            Error::NotReached(_) => exit::NOT_REACHED,
        }
    }
}

/// Parses `args` (the program's name first) and runs them with the files of this process's environment, printing
/// results (and `--help`) to `out` and errors and progress to `err`; returns the exit code.
pub async fn run_args<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    run_args_in(&Locations::of_process(), args, out, err).await
}

/// [`run_args`] with the kubeconfig and config file found at `locations`.
pub async fn run_args_in<I, T>(locations: &Locations, args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => run(cli, locations, out, err).await,
        Err(error) => {
            let text = error.render().to_string();
            let _ = if error.use_stderr() { err.write_all(text.as_bytes()) } else { out.write_all(text.as_bytes()) };
            u8::try_from(error.exit_code()).unwrap_or(exit::USAGE)
        }
    }
}

/// Runs `cli`, printing results to `out` and errors and progress to `err`; returns the exit code.
pub async fn run(cli: Cli, locations: &Locations, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let outcome = match cli.command {
        // Needs no server: a broken config file or a missing token does not keep it from the shell.
        Command::Completion { shell } => completion::print(shell, out),
        command => match connect(&cli.connection, locations, err) {
            Ok(client) => commands::run(&client, command, cli.output, out, err).await,
            Err(error) => Err(error),
        },
    };
    match outcome {
        Ok(()) => exit::OK,
        Err(error) => {
            let _ = writeln!(err, "{error}");
            error.exit_code()
        }
    }
}

fn connect(connection: &Connection, locations: &Locations, err: &mut dyn Write) -> Result<Client, Error> {
    // Both flags are refused before any file is read.
    tls::Tls::of_flags(connection).check(&mut std::io::sink())?;
    let named;
    let locations = match &connection.kubeconfig {
        Some(file) => {
            named = Locations { kubeconfig: Some(file.clone().into_os_string()), ..locations.clone() };
            &named
        }
        None => locations,
    };
    let target = token::resolve(connection, locations, err)?;
    target.tls.check(err)?;
    let client = Client::with_tls(target.server, target.token, connection.allow_plain_http, &target.tls)?;
    Ok(client.acting_for(target.tenant))
}
