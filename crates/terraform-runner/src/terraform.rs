//! Runs Terraform (or OpenTofu) as a child process: output streamed line by line with credentials redacted,
//! the last lines kept for the failure message, and the Job's termination signals passed on as an interrupt
//! so that Terraform stops gracefully and releases its state lock.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Mutex;

use runner_contract::redact::{HOLD_BACK, LineRedactor, SharedRedactor};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::diagnostics::{self, Created, Diagnostic};
use crate::{Error, Result};

/// Lines of output kept to explain a failure.
const TAIL_LINES: usize = 40;
/// The most of Terraform's own words in a failure message, which is bounded to
/// [`runner_contract::redact::MAX_FAILURE_MESSAGE`] as a whole.
const EXCERPT_CHARS: usize = 700;

/// SIGTERM (the kubelet stopping the pod) and SIGINT, received by the runner.
pub struct Signals {
    terminate: Signal,
    interrupt: Signal,
    received: bool,
}

impl Signals {
    pub fn install() -> std::io::Result<Self> {
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
            received: false,
        })
    }

    /// Whether the runner was asked to stop, including by a signal that arrived while no one was waiting for one;
    /// no further step starts after that.
    pub fn received(&mut self) -> bool {
        if !self.received {
            // A signal delivered since installation is pending, so this returns at once when there is one.
            let _ = futures::FutureExt::now_or_never(self.recv());
        }
        self.received
    }

    pub(crate) async fn recv(&mut self) {
        tokio::select! {
            _ = self.terminate.recv() => {},
            _ = self.interrupt.recv() => {},
        }
        self.received = true;
    }
}

pub struct Terraform {
    pub binary: PathBuf,
    pub work_dir: PathBuf,
    /// Added to the runner's own environment: credentials and automation flags.
    pub env: Vec<(String, String)>,
    pub redactor: SharedRedactor,
}

impl Terraform {
    /// Runs one command to completion, streaming its output. Its span, named after the command (`init`, `plan`,
    /// `apply`, `destroy`), is for traces only (`process_support::traces::SPAN_TARGET`).
    pub async fn run(&self, args: &[&str], signals: &mut Signals) -> Result<()> {
        self.run_recording(args, signals, None).await
    }

    /// [`Terraform::run`] of an `apply -json` whose creations `recorder` records as Terraform reports them.
    #[tracing::instrument(target = "traces", name = "terraform", skip_all, fields(otel.name = args.first().copied().unwrap_or("terraform")))]
    pub(crate) async fn run_recording(
        &self,
        args: &[&str],
        signals: &mut Signals,
        recorder: Option<&dyn RecordCreation>,
    ) -> Result<()> {
        let command = self.describe(args);
        if signals.received() {
            return Err(Error::Interrupted);
        }
        tracing::info!(command, "running");
        let mut child = self.spawn(args)?;
        // Kept apart: Terraform reports errors on stderr (on stdout with `-json`), and the two streams arrive
        // interleaved.
        let stdout_tail = Mutex::new(VecDeque::with_capacity(TAIL_LINES));
        let stderr_tail = Mutex::new(VecDeque::with_capacity(TAIL_LINES));
        let errors = Mutex::new(Vec::new());
        let messages = Messages { errors: &errors, recorder };
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let (status, (), ()) = tokio::join!(
            wait_passing_signals(&mut child, signals),
            forward(stdout, tokio::io::stdout(), &self.redactor, &stdout_tail, Some(messages)),
            forward(stderr, tokio::io::stderr(), &self.redactor, &stderr_tail, None),
        );
        let status = status.map_err(|source| Error::Spawn { binary: self.binary.clone(), source })?;
        if signals.received() {
            return Err(Error::Interrupted);
        }
        if !status.success() {
            let errors = errors.lock().expect("errors lock");
            if !errors.is_empty() {
                let excerpt = bounded_excerpt(diagnostics::describe(&errors));
                let cloud = diagnostics::cloud_failure(&errors);
                return Err(Error::Terraform { command, status: status.to_string(), excerpt, cloud });
            }
            let stderr_tail = stderr_tail.lock().expect("tail lock");
            let tail = if stderr_tail.is_empty() {
                stdout_tail.lock().expect("tail lock").clone()
            } else {
                stderr_tail.clone()
            };
            let tail = Vec::from(tail);
            return Err(Error::Terraform { command, status: status.to_string(), excerpt: excerpt(&tail), cloud: None });
        }
        Ok(())
    }

    /// `output -json`: the root module's outputs by name. Read, never printed (an output may be sensitive).
    pub async fn outputs(&self) -> Result<BTreeMap<String, serde_json::Value>> {
        #[derive(serde::Deserialize)]
        struct Output {
            value: serde_json::Value,
        }
        let json = self.capture(&["output", "-json", "-no-color"]).await?;
        let outputs: BTreeMap<String, Output> = serde_json::from_slice(&json)
            .map_err(|error| Error::Outputs(format!("`output -json` printed no valid JSON: {error}")))?;
        Ok(outputs.into_iter().map(|(name, output)| (name, output.value)).collect())
    }

    /// `show -json` of the state: its cloud resources (see [`runner_contract::inventory`]).
    pub async fn cloud_resources(&self) -> Result<Vec<String>> {
        let json = self.capture(&["show", "-json", "-no-color"]).await?;
        runner_contract::inventory::of_state(&json).map_err(Error::Outputs)
    }

    /// Runs a command whose standard output is data (`show -json`, `output -json`): returned, never printed.
    pub async fn capture(&self, args: &[&str]) -> Result<Vec<u8>> {
        let child = self.spawn(args)?;
        let output =
            child.wait_with_output().await.map_err(|source| Error::Spawn { binary: self.binary.clone(), source })?;
        if !output.status.success() {
            let stderr = self.redactor.redact(&String::from_utf8_lossy(&output.stderr));
            return Err(Error::Terraform {
                command: self.describe(args),
                status: output.status.to_string(),
                excerpt: excerpt(&stderr.lines().map(str::to_owned).collect::<Vec<_>>()),
                cloud: None,
            });
        }
        Ok(output.stdout)
    }

    fn spawn(&self, args: &[&str]) -> Result<Child> {
        Command::new(&self.binary)
            .args(args)
            .current_dir(&self.work_dir)
            // The runner alone decides Terraform's cloud identity: nothing ambient from the pod.
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE")
            .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn { binary: self.binary.clone(), source })
    }

    fn describe(&self, args: &[&str]) -> String {
        let name = self.binary.file_name().map(|name| name.to_string_lossy().into_owned()).unwrap_or_default();
        format!("{name} {}", args.join(" "))
    }
}

/// Waits for the child; every signal the runner receives meanwhile is passed on as SIGINT, which Terraform
/// treats as "stop gracefully" (a second one as "stop now").
async fn wait_passing_signals(child: &mut Child, signals: &mut Signals) -> std::io::Result<std::process::ExitStatus> {
    loop {
        tokio::select! {
            status = child.wait() => return status,
            () = signals.recv() => {
                if let Some(pid) = child.id() {
                    tracing::warn!(pid, "stop requested; interrupting terraform so it can release its state lock");
                    // SAFETY: kill(2) with a pid we own and a valid signal number has no memory effects.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
                }
            }
        }
    }
}

/// Keeps, durably, each resource an apply reports created ([`crate::creations`]'s recorder); done when it is kept.
pub(crate) trait RecordCreation: Sync {
    fn record<'a>(&'a self, created: Created) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

/// Where what Terraform's `-json` messages say goes: their errors, redacted, and the resources they say were
/// created, recorded before the next line is read.
struct Messages<'a> {
    errors: &'a Mutex<Vec<Diagnostic>>,
    recorder: Option<&'a dyn RecordCreation>,
}

impl Messages<'_> {
    /// The text of `raw`, after keeping what it says.
    async fn read(&self, raw: &str, redactor: &SharedRedactor) -> String {
        let line = diagnostics::read_line(raw);
        let error = line.error.map(|error| error.redacted(&redactor.current()));
        self.errors.lock().expect("errors lock").extend(error);
        if let (Some(recorder), Some(created)) = (self.recorder, line.created) {
            recorder.record(created).await;
        }
        line.text
    }
}

/// Copies a child's output to ours line by line, redacted, keeping the last lines. Each line is printed once the
/// next one arrived, or after [`HOLD_BACK`], so that a value split across the two is redacted too. With
/// `messages`, the output may be Terraform's `-json` messages: each is turned into its text first (a value inside
/// JSON is escaped, and the halves of a split one sit in two messages) and then redacted, and what it says kept.
async fn forward(
    source: Option<impl AsyncRead + Unpin>,
    mut sink: impl tokio::io::AsyncWrite + Unpin,
    redactor: &SharedRedactor,
    tail: &Mutex<VecDeque<String>>,
    messages: Option<Messages<'_>>,
) {
    let Some(source) = source else { return };
    let mut reader = BufReader::new(source);
    let mut lines = LineRedactor::new(redactor.current());
    let mut buffer = Vec::new();
    let mut ended = false;
    while !ended {
        // A read cut short by the timeout keeps what it read in `buffer` and goes on from there.
        let ready: Vec<String> = match tokio::time::timeout(HOLD_BACK, reader.read_until(b'\n', &mut buffer)).await {
            Err(_) => lines.flush().into_iter().collect(),
            Ok(Ok(0) | Err(_)) => {
                ended = true;
                lines.flush().into_iter().collect()
            }
            Ok(Ok(_)) => {
                let raw = String::from_utf8_lossy(&buffer).trim_end().to_owned();
                buffer.clear();
                let text = match &messages {
                    Some(messages) => messages.read(&raw, redactor).await,
                    None => raw,
                };
                text.lines().filter_map(|line| lines.push(line)).collect()
            }
        };
        for line in ready {
            let _ = sink.write_all(format!("{line}\n").as_bytes()).await;
            let _ = sink.flush().await;
            let mut tail = tail.lock().expect("tail lock");
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
}

/// The part of the output that explains a failure: from Terraform's last `Error:` line on, or else the last
/// non-empty lines; blank lines and box-drawing decoration removed, cut to [`EXCERPT_CHARS`].
fn excerpt(lines: &[String]) -> String {
    let lines: Vec<&str> = lines
        .iter()
        .map(|line| line.trim_start_matches(['│', '╷', '╵', ' ']).trim())
        .filter(|line| !line.is_empty())
        .collect();
    let start = lines.iter().rposition(|line| line.starts_with("Error:")).unwrap_or(lines.len().saturating_sub(5));
    bounded_excerpt(lines[start..].join(" "))
}

/// `text` cut to [`EXCERPT_CHARS`].
fn bounded_excerpt(text: String) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn excerpt_starts_at_the_last_error() {
        let output = lines(
            "Initializing...\n╷\n│ Error: first\n╵\nmore\n╷\n│ Error: No valid credential sources found\n│ \n│   with provider[\"aws\"]\n╵\n",
        );
        assert_eq!(excerpt(&output), "Error: No valid credential sources found with provider[\"aws\"]");
    }

    #[test]
    fn excerpt_without_an_error_line_is_the_last_lines() {
        let output = lines("a\nb\nc\nd\ne\nf\n\n");
        assert_eq!(excerpt(&output), "b c d e f");
    }

    #[test]
    fn excerpt_is_bounded() {
        let output = vec![format!("Error: {}", "x".repeat(5000))];
        assert_eq!(excerpt(&output).chars().count(), EXCERPT_CHARS + 1);
    }
}
