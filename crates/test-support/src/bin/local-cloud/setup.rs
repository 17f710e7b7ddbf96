//! What the local cluster and cloud need, built by the project's scripts in order, each cached in
//! ~/.cache/kubeopera-provisioner (shared with `make test-really-local`): the first run builds, later ones check
//! and go on. Each step is reported in the log and in the progress file the service shows on `/readyz`, with an
//! estimate from the durations measured on this machine before, or from those of a fresh machine.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use provisioner::api::setup_progress::{SetupProgress, unix_seconds};

use super::Error;
use super::service::ServiceProcess;

/// One step of the set-up.
pub struct Step {
    /// Its name in the file of measured durations.
    key: &'static str,
    title: &'static str,
    /// Measured on a fresh machine of the kind the project is tested on (two cores), for the first estimate.
    fresh_machine_seconds: u64,
}

/// A build: the script in tools/ that makes it and prints its folder or file last, and the variable that names it
/// to the control plane, the node or moto (none for what only the image needs).
struct Build {
    step: Step,
    script: &'static str,
    variable: Option<&'static str>,
}

const BUILDS: [Build; 6] = [
    Build {
        step: Step {
            key: "control-plane",
            title: "building etcd, kube-apiserver and kube-controller-manager",
            fresh_machine_seconds: 265,
        },
        script: "build-control-plane.sh",
        variable: Some(test_control_plane::BIN_DIR_ENV),
    },
    Build {
        step: Step { key: "node", title: "building the node's kubelet and containerd", fresh_machine_seconds: 75 },
        script: "build-node.sh",
        variable: Some(test_control_plane::NODE_BIN_DIR_ENV),
    },
    Build {
        step: Step { key: "aws-tools", title: "installing moto (AWS) and the AWS CLI", fresh_machine_seconds: 60 },
        script: "test-tools.sh",
        variable: Some("TEST_AWS_TOOLS_BIN_DIR"),
    },
    Build {
        step: Step { key: "tofu", title: "building OpenTofu", fresh_machine_seconds: 300 },
        script: "build-tofu.sh",
        variable: None,
    },
    Build {
        step: Step {
            key: "terraform-providers",
            title: "building the Terraform providers hashicorp/aws and hashicorp/google",
            fresh_machine_seconds: 2400,
        },
        script: "build-terraform-providers.sh",
        variable: None,
    },
    Build {
        step: Step { key: "image", title: "building the image", fresh_machine_seconds: 290 },
        script: "build-image.sh",
        variable: None,
    },
];

/// The last step: the control plane, the node, the image into its containerd, moto and the git server.
pub const START: &Step = &Step {
    key: "start",
    title: "starting the cluster (control plane and node) and the cloud (moto, the modules' git server)",
    fresh_machine_seconds: 30,
};

/// What the builds made: the variables naming the programs, and the image's archive.
pub struct Built {
    pub variables: Vec<(&'static str, PathBuf)>,
    pub image: PathBuf,
}

/// Runs the builds in order. The image is built from the binaries beside this program (`make run` built them).
pub fn build(repository: &Path, bin_dir: &Path, progress: &Progress, service: &ServiceProcess) -> Result<Built, Error> {
    let mut variables = Vec::new();
    let mut last_output = PathBuf::new();
    for build in &BUILDS {
        progress.start_step(&build.step)?;
        let mut command = Command::new(repository.join("tools").join(build.script));
        command.env("RUST_BIN_DIR", bin_dir).stdin(Stdio::null()).stderr(Stdio::inherit());
        let output = command.output()?;
        if !output.status.success() {
            progress.fail()?;
            return Err(
                format!("{} failed: tools/{} ended with {}", build.step.title, build.script, output.status).into()
            );
        }
        let printed = String::from_utf8_lossy(&output.stdout);
        last_output = PathBuf::from(printed.lines().last().unwrap_or_default());
        if let Some(variable) = build.variable {
            variables.push((variable, last_output.clone()));
        }
        progress.end_step()?;
        if let Some(status) = service.exit_status() {
            return Err(format!("the service ended ({status})").into());
        }
    }
    Ok(Built { variables, image: last_output })
}

/// The durations measured on this machine, kept beside the caches the steps fill (and lost with them).
pub struct Timings {
    file: PathBuf,
    seconds: BTreeMap<String, u64>,
}

impl Timings {
    pub fn load() -> Self {
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        Self::load_from(cache.join("kubeopera-provisioner/make-run-seconds.json"))
    }

    fn load_from(file: PathBuf) -> Self {
        let seconds =
            std::fs::read(&file).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default();
        Timings { file, seconds }
    }

    fn estimate(&self, step: &Step) -> u64 {
        self.seconds.get(step.key).copied().unwrap_or(step.fresh_machine_seconds)
    }

    fn record(&mut self, step: &Step, seconds: u64) -> std::io::Result<()> {
        self.seconds.insert(step.key.to_owned(), seconds);
        if let Some(folder) = self.file.parent() {
            std::fs::create_dir_all(folder)?;
        }
        std::fs::write(&self.file, serde_json::to_vec_pretty(&self.seconds)?)
    }
}

/// The set-up's progress: logged, written to the file the service reads, and measured.
pub struct Progress {
    file: PathBuf,
    started: Instant,
    started_at: u64,
    state: Mutex<State>,
}

struct State {
    timings: Timings,
    /// The running step, its number from 1, and when it began.
    current: Option<(&'static Step, usize, Instant)>,
    done: usize,
}

impl Progress {
    pub fn new(file: PathBuf, timings: Timings) -> Self {
        let state = State { timings, current: None, done: 0 };
        Progress {
            file,
            started: Instant::now(),
            started_at: unix_seconds(SystemTime::now()),
            state: Mutex::new(state),
        }
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn elapsed_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn steps() -> impl Iterator<Item = &'static Step> {
        BUILDS.iter().map(|build| &build.step).chain([START])
    }

    pub fn start_step(&self, step: &'static Step) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        let number = state.done + 1;
        state.current = Some((step, number, Instant::now()));
        let (total, step_estimate) = (Self::steps().count(), state.timings.estimate(step));
        let estimated_seconds: u64 = Self::steps().map(|step| state.timings.estimate(step)).sum();
        eprintln!(
            "make run: step {number}/{total}: {} (about {}; {} of about {} in all)",
            step.title,
            minutes(step_estimate),
            minutes(self.elapsed_seconds()),
            minutes(estimated_seconds),
        );
        self.write(&state, false)
    }

    fn end_step(&self) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap();
        if let Some((step, _, began)) = state.current.take() {
            state.timings.record(step, began.elapsed().as_secs())?;
            state.done += 1;
        }
        Ok(())
    }

    fn fail(&self) -> std::io::Result<()> {
        let state = self.state.lock().unwrap();
        self.write(&state, true)
    }

    /// The last step is done: the file goes, and with it `setup` from `/readyz`.
    pub fn finish(&self) -> std::io::Result<()> {
        self.end_step()?;
        match std::fs::remove_file(&self.file) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    fn write(&self, state: &State, failed: bool) -> std::io::Result<()> {
        let Some((step, step_number, _)) = state.current else { return Ok(()) };
        let title = if failed { format!("failed: {}", step.title) } else { step.title.to_owned() };
        let progress = SetupProgress {
            step: title,
            step_number,
            steps: Self::steps().count(),
            started_at: self.started_at,
            estimated_seconds: Self::steps().map(|step| state.timings.estimate(step)).sum(),
            failed,
            elapsed_seconds: 0,
        };
        // Written aside and renamed: the service never reads half a file.
        let partial = self.file.with_extension("json.partial");
        std::fs::write(&partial, serde_json::to_vec(&progress)?)?;
        std::fs::rename(&partial, &self.file)
    }
}

fn minutes(seconds: u64) -> String {
    if seconds < 60 { format!("{seconds} s") } else { format!("{} min", seconds.div_ceil(60)) }
}
