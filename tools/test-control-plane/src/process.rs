//! The server processes of a control plane and their cleanup.
//!
//! Rust never drops statics, and `PR_SET_PDEATHSIG` fires when the spawning *thread* exits, so
//! neither can stop the servers of the shared instance. Instead a janitor shell reads the server
//! pids from a pipe that only this process holds; the pipe reaches end-of-file when this process
//! exits in any way (even SIGKILL) or drops the [`Processes`], and the janitor then kills the
//! servers and removes the working folder. A real node brings a janitor of its own
//! ([`Processes::with_janitor`]), since its servers leave containers, mounts and host state behind.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::Result;

/// SIGKILL is enough: every server's state lives in the folder removed right after.
/// `rm` is retried once in case a dying server was still creating a file.
const JANITOR: &str = r#"pids=$(cut -d' ' -f1)
[ -z "$pids" ] || kill -KILL $pids 2>/dev/null
rm -rf "$1" 2>/dev/null || { sleep 1; rm -rf "$1"; }"#;

const LOG_TAIL_LINES: usize = 20;

struct Server {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

pub(crate) struct Processes {
    dir: PathBuf,
    janitor: Child,
    servers: Mutex<Vec<Server>>,
}

impl Processes {
    /// Creates a fresh working folder, removed again by the janitor.
    pub fn new() -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("test-control-plane-{}", unique_suffix()));
        Self::with_janitor(dir, JANITOR, &[])
    }

    /// Creates the fresh working folder `dir` and a janitor shell running `script` with `dir` and `args` as
    /// its arguments. At end-of-file on its stdin the script has read one `<pid> <name>` line per server, in
    /// the order they were started; it must stop them and remove `dir`.
    pub fn with_janitor(dir: PathBuf, script: &'static str, args: &[&OsStr]) -> Result<Self> {
        fs::create_dir(&dir)?;
        let janitor = Command::new("sh")
            .args(["-c", script, "janitor"])
            .arg(&dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Its own process group, so that a Ctrl-C in the terminal cannot kill it before it cleans up.
            .process_group(0)
            .spawn();
        match janitor {
            Ok(janitor) => Ok(Self { dir, janitor, servers: Mutex::default() }),
            Err(error) => {
                let _ = fs::remove_dir_all(&dir);
                Err(format!("starting the janitor shell: {error}").into())
            }
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts `program` with its output in `<dir>/<name>.log`.
    pub fn spawn(&mut self, name: &'static str, program: &Path, args: &[String]) -> Result<()> {
        self.spawn_with_env(name, program, args, &[])
    }

    /// [`Processes::spawn`] with `env` added to this process's environment.
    pub fn spawn_with_env(
        &mut self,
        name: &'static str,
        program: &Path,
        args: &[String],
        env: &[(&str, &OsStr)],
    ) -> Result<()> {
        let log = self.dir.join(format!("{name}.log"));
        let out = File::create(&log)?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            // Ctrl-C reaches only the owning process, which then tears everything down in order.
            .process_group(0)
            .spawn()
            .map_err(|error| format!("starting {}: {error}", program.display()))?;
        let pid = child.id();
        self.servers.get_mut().expect("no panic while locked").push(Server { name, child, log });
        let janitor = self.janitor.stdin.as_mut().expect("janitor stdin is open");
        writeln!(janitor, "{pid} {name}")?;
        Ok(())
    }

    /// Fails with the logs' tail if a server has exited.
    pub fn check_running(&self) -> Result<()> {
        let mut servers = self.servers.lock().expect("no panic while locked");
        let exited = servers.iter_mut().find_map(|server| {
            let status = server.child.try_wait().transpose()?;
            Some(status.map(|status| (server.name, status)))
        });
        match exited {
            None => Ok(()),
            Some(exited) => {
                let (name, status) = exited?;
                drop(servers);
                Err(format!("{name} exited ({status})\n{}", self.log_tail()).into())
            }
        }
    }

    /// The last lines of every server's log.
    pub fn log_tail(&self) -> String {
        let mut tail = String::new();
        for server in self.servers.lock().expect("no panic while locked").iter() {
            let log = fs::read_to_string(&server.log).unwrap_or_else(|error| error.to_string());
            let lines: Vec<_> = log.lines().collect();
            let start = lines.len().saturating_sub(LOG_TAIL_LINES);
            let _ = writeln!(tail, "==> {} <==", server.log.display());
            for line in &lines[start..] {
                let _ = writeln!(tail, "{line}");
            }
        }
        tail
    }
}

/// `<pid>-<n>`: unique among the folders of all processes on this machine.
pub(crate) fn unique_suffix() -> String {
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    format!("{}-{}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed))
}

impl Drop for Processes {
    fn drop(&mut self) {
        // End-of-file tells the janitor to stop the servers; reap them, last started first (a janitor stopping
        // them one by one waits for each to be gone), then wait for the folder's removal.
        drop(self.janitor.stdin.take());
        for server in self.servers.get_mut().expect("no panic while locked").iter_mut().rev() {
            let _ = server.child.wait();
        }
        let _ = self.janitor.wait();
    }
}
