//! The service as a child process: started with the variables `make run` set plus those of the local cloud, stopped
//! as Kubernetes stops it (SIGTERM, then a grace period).

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Error;

/// How long a stopping service may drain before it is killed.
const GRACE_PERIOD: Duration = Duration::from_secs(30);

pub struct ServiceProcess(Mutex<Child>);

impl ServiceProcess {
    /// Starts `program` with this process's environment and `variables`; its output goes to the terminal.
    pub fn start(program: &Path, variables: &[(&str, OsString)]) -> std::io::Result<Self> {
        let child = Command::new(program).envs(variables.iter().map(|(name, value)| (name, value))).spawn()?;
        Ok(ServiceProcess(Mutex::new(child)))
    }

    /// How it ended, once it has.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        self.0.lock().unwrap().try_wait().ok().flatten()
    }

    /// Waits until it ends (Ctrl-C in the terminal stops it and this program alike).
    pub fn wait(self) -> Result<(), Error> {
        let status = self.0.lock().unwrap().wait()?;
        if status.success() { Ok(()) } else { Err(format!("the service ended ({status})").into()) }
    }

    /// SIGTERM, then SIGKILL after the grace period.
    pub fn stop(self) {
        let mut child = self.0.lock().unwrap();
        if child.try_wait().ok().flatten().is_some() {
            return;
        }
        // SAFETY: kill has no memory preconditions; the pid is our child's, not yet reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + GRACE_PERIOD;
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A service left running by an error is not left behind.
impl Drop for ServiceProcess {
    fn drop(&mut self) {
        let child = self.0.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        if child.try_wait().ok().flatten().is_none() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
