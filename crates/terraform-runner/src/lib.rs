//! terraform-runner, the main container of every provisioning Job (`src/main.rs` wires it):
//! reads the rendered configuration and the credential from their mounts, prepares the cloud side (credentials,
//! the cluster's own state bucket), runs Terraform, and delivers the kubeconfig to the outputs Secret; or
//! destroys, and removes the state bucket only after the destroy succeeded.
//!
//! Every step is safe to repeat, since a Job's pod may be replaced: the bucket is created only when missing,
//! Terraform converges, the outputs Secret is overwritten, and a destroy whose bucket is gone has nothing left.
#![deny(rust_2018_idioms)]
// Unsafe only where it must be: forwarding a signal to Terraform (libc::kill).

pub mod administrators;
mod api_server;
mod approval;
mod approved_changes;
mod aws;
mod certificate_renewal;
mod cloud_session;
mod control_plane_upgrade;
mod creations;
mod diagnostics;
mod ec2_query;
pub mod fetch_modules;
mod gcp;
mod inputs;
mod kubeconfig;
mod leftovers;
mod node_kubeconfig;
mod plans;
mod publish;
pub mod settings;
mod state_encryption;
pub mod state_lock;
mod terraform;
pub mod transient;

use std::collections::BTreeMap;
use std::path::PathBuf;

use runner_contract::Topology;
use runner_contract::credential::{self, CloudCredential};
use runner_contract::manifest::{RunAction, RunnerManifest};
use runner_contract::plan::PlanSummary;
use runner_contract::redact::{Redactor, SharedRedactor, bounded_failure_message};
use runner_contract::report::{RunReport, kubeconfig_digest};
use secrecy::ExposeSecret;
use serde_json::Value;

use approval::SavedPlan;
use aws::AwsSession;
use cloud_session::CloudSession;
use control_plane_upgrade::ControlPlaneUpgradeRun;
use creations::{Creations, Recorder};
use gcp::GcpSession;
use inputs::{install_lock_file, plan_without_backend, prepare_work_dir, read_credential, read_manifest};
use leftovers::{Swept, Unknown};
use plans::{EVERYTHING, apply_plan, plan, plan_destroy, refuse_destructive, show_plan};
pub use settings::RunnerSettings;
use state_lock::{LockHolder, StateLock, Verdict};
use terraform::{Signals, Terraform};
use transient::Replan;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Input(String),
    #[error("the Job asked to {requested} but runner.json says {configured}")]
    ActionMismatch { requested: &'static str, configured: &'static str },
    #[error("AWS {operation} failed: {message}")]
    Aws { operation: &'static str, message: String },
    #[error("Google Cloud {operation} failed: {message}")]
    Gcp { operation: &'static str, message: String },
    #[error("starting {} failed: {source}", binary.display())]
    Spawn { binary: PathBuf, source: std::io::Error },
    #[error("`{command}` failed ({status}): {excerpt}")]
    Terraform {
        command: String,
        status: String,
        excerpt: String,
        /// The cloud's answer behind it, when Terraform's errors name a known one.
        cloud: Option<runner_contract::failure::CloudFailure>,
    },
    #[error("Terraform outputs: {0}")]
    Outputs(String),
    #[error(
        "the cluster did not publish {what} to SSM parameter {parameter} within {}{}",
        humantime::format_duration(*waited),
        last_error.as_ref().map(|error| format!(" (last error: {error})")).unwrap_or_default()
    )]
    ParameterTimeout {
        /// "its kubeconfig", "that its control plane runs 1.35".
        what: String,
        parameter: String,
        waited: std::time::Duration,
        last_error: Option<String>,
    },
    #[error(
        "the API server at {server} did not answer within {} after the control plane was started (last error: {last_error})",
        humantime::format_duration(*waited)
    )]
    ApiServerTimeout { server: String, waited: std::time::Duration, last_error: String },
    #[error(
        "control-plane node {node} was bootstrapped before certificate renewals existed and cannot take one: \
         upgrade the cluster to its next minor (kubeadm renews the certificates with it) or replace the node"
    )]
    CannotRenew { node: u32 },
    #[error("binding the cluster's administrators to cluster-admin failed: {0}")]
    Administrators(String),
    #[error("the kubeconfig the cluster published to SSM parameter {parameter} is refused: {reason}")]
    RefusedKubeconfig { parameter: String, reason: node_kubeconfig::Refused },
    #[error("publishing the kubeconfig to Secret {secret} failed: {message}")]
    Publish { secret: String, message: String },
    #[error("connecting to the Kubernetes API failed: {0}")]
    Kubernetes(#[from] kube::Error),
    #[error("stopped by a signal before the run finished")]
    Interrupted,
    #[error("the plan would destroy or replace protected resources ({}); nothing was changed", addresses.join(", "))]
    DestructivePlan { addresses: Vec<String> },
    #[error("state bucket {bucket} holds the state of runtime {owner}, not this runtime's; nothing was changed")]
    StateOfAnotherRuntime { bucket: String, owner: uuid::Uuid },
    /// The bucket's name is taken by someone else (another account, another project): its state would be theirs.
    #[error("state bucket {bucket} exists but does not belong to {expected_owner}; nothing was read or written")]
    ForeignBucket { bucket: String, expected_owner: String },
    #[error(
        "the state is destroyed, but {} resources carrying the runtime's tag remain: {}; delete them and deprovision \
         again (the state bucket stays until nothing is left)",
        resources.len(),
        resources.join(", ")
    )]
    Leftovers { resources: Vec<String> },
    #[error("reading the plan: {0}")]
    Plan(String),
    #[error("the approved plan cannot be applied: {reason}; nothing was changed, plan again")]
    StalePlan { reason: String },
    /// A part of an approved control plane's upgrade, planned anew, that the approved plan does not make.
    #[error(
        "a part of the approved upgrade, planned anew, is not in the approved plan: {reason}; the parts applied \
         before stay, plan again and approve the new plan"
    )]
    BeyondApproval { reason: String },
    #[error(
        "the state is locked by {who} since {since} and was left alone for {} ({why}); the lock stays",
        humantime::format_duration(*waited)
    )]
    StateLocked { who: String, since: String, why: String, waited: std::time::Duration },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What every action of a run works with once its inputs are read and its cloud session is open.
struct Prepared {
    manifest: RunnerManifest,
    credential: CloudCredential,
    session: CloudSession,
    terraform: Terraform,
    signals: Signals,
    /// Terraform's `-lock-timeout=` argument.
    lock_timeout: String,
    this_run: LockHolder,
}

/// What a run needs from outside the cloud: where the kubeconfig goes.
pub struct Runner {
    settings: RunnerSettings,
    kube: kube::Client,
}

impl Runner {
    pub fn new(settings: RunnerSettings, kube: kube::Client) -> Self {
        Runner { settings, kube }
    }

    /// Runs `action`: plans first, then applies exactly that plan; returns the plan's summary (and for an apply
    /// the digest of the kubeconfig it published). On failure the error's text is safe to show: see
    /// [`Runner::failure_message`].
    #[tracing::instrument(skip_all, fields(runtime_id = tracing::field::Empty, action = action.as_str()))]
    pub async fn run(&self, action: RunAction, redactor: &SharedRedactor) -> Result<RunReport> {
        let mut run = self.prepare(action, redactor).await?;
        let report = match action {
            RunAction::Apply => self.apply(&mut run).await?,
            RunAction::Plan => RunReport::of_plan(self.plan_only(&mut run).await?),
            RunAction::Destroy => match self.destroy(&mut run).await? {
                Some(report) => report,
                None => return Ok(RunReport::default()),
            },
        };
        let summary = &report.plan;
        tracing::info!(
            action = action.as_str(),
            add = summary.add,
            change = summary.change,
            destroy = summary.destroy,
            "finished"
        );
        Ok(report)
    }

    /// Reads the run's inputs, checks they fit `action`, opens the cloud session and sets up Terraform.
    async fn prepare(&self, action: RunAction, redactor: &SharedRedactor) -> Result<Prepared> {
        let settings = &self.settings;
        let signals =
            Signals::install().map_err(|error| Error::Input(format!("installing signal handlers: {error}")))?;
        let manifest = read_manifest(&settings.job.config_dir)?;
        tracing::Span::current().record("runtime_id", tracing::field::display(manifest.runtime_id));
        if manifest.action != action {
            return Err(Error::ActionMismatch { requested: action.as_str(), configured: manifest.action.as_str() });
        }
        let credential = read_credential(&settings.job.credentials_dir)?;
        redactor.extend(credential.secret_values());
        if credential.cloud() != manifest.topology.cloud() {
            return Err(Error::Input(format!(
                "a {} credential cannot run topology {}",
                credential.kind(),
                manifest.topology.as_str()
            )));
        }
        tracing::info!(topology = manifest.topology.as_str(), "starting");
        let session = self.open_session(&manifest, &credential, redactor).await?;
        let temporary = prepare_work_dir(&settings.job.config_dir, &settings.job.work_dir)?;
        install_lock_file(&settings.provider_lock_dir, &manifest.provider, &settings.job.work_dir)?;
        let mut env = vec![
            ("TF_IN_AUTOMATION".to_owned(), "1".to_owned()),
            ("TF_INPUT".to_owned(), "0".to_owned()),
            ("CHECKPOINT_DISABLE".to_owned(), "1".to_owned()),
            ("TMPDIR".to_owned(), temporary.display().to_string()),
        ];
        env.extend(session.terraform_env());
        if let Some(passphrase) = &settings.state_passphrase {
            redactor.extend([passphrase.expose_secret().to_owned()]);
            env.push(state_encryption::terraform_env(passphrase));
        }
        let terraform = Terraform {
            binary: settings.terraform_binary.clone(),
            work_dir: settings.job.work_dir.clone(),
            env,
            redactor: redactor.clone(),
        };
        let lock_timeout = format!("-lock-timeout={}s", settings.state_lock_timeout.as_secs());
        let this_run = LockHolder::this_run(manifest.runtime_id, settings.operation_id, &settings.pod_name);
        Ok(Prepared { manifest, credential, session, terraform, signals, lock_timeout, this_run })
    }

    async fn open_session(
        &self,
        manifest: &RunnerManifest,
        credential: &CloudCredential,
        redactor: &SharedRedactor,
    ) -> Result<CloudSession> {
        let settings = &self.settings;
        Ok(match credential {
            CloudCredential::GcpServiceAccount { project_id, .. } => {
                let key_file = settings.job.credentials_dir.join(credential::file::GCP_KEY);
                let project = manifest.gcp_project.as_deref().unwrap_or(project_id);
                CloudSession::Gcp(Box::new(
                    GcpSession::connect(&key_file, project, &manifest.region, redactor.clone()).await?,
                ))
            }
            _ => CloudSession::Aws(Box::new(
                AwsSession::connect(
                    credential,
                    &manifest.region,
                    manifest.runtime_id,
                    &settings.job.aws_config_dir,
                    redactor,
                )
                .await?,
            )),
        })
    }

    /// Plans, checks the plan, applies exactly it (a control plane upgraded first), and publishes the kubeconfig.
    /// A plan the approval policy holds back is saved instead, and the run reports it waiting; an approved run
    /// applies exactly the saved plan it names.
    async fn apply(&self, run: &mut Prepared) -> Result<RunReport> {
        let settings = &self.settings;
        let bucket = &run.manifest.state_bucket;
        run.session.ensure_state_bucket(bucket).await?;
        run.terraform.run(INIT, &mut run.signals).await?;
        self.take_over_state_lock(&run.session, bucket, &run.this_run, &run.terraform, &mut run.signals).await?;
        let saved = SavedPlan { session: &run.session, bucket, operation_id: settings.operation_id };
        let protected = &settings.protected_resources;
        let approved = run.manifest.approved_plan_sha256.clone();
        let summary = match &approved {
            Some(digest) => {
                saved.restore(&settings.job.work_dir, digest).await?;
                show_plan(&run.terraform, protected).await?
            }
            None => {
                let summary = plan(&run.terraform, EVERYTHING, &run.lock_timeout, protected, &mut run.signals).await?;
                if run.manifest.approval_policy.must_wait(&summary) {
                    let digest = saved.save(&settings.job.work_dir).await?;
                    return Ok(RunReport::awaiting_approval(summary, digest));
                }
                refuse_destructive(&summary)?;
                summary
            }
        };
        let recorder = Recorder::open(&run.session, bucket).await?;
        if let (Some(upgrade), CloudSession::Aws(aws)) = (&run.manifest.control_plane_upgrade, &run.session) {
            let (terraform, lock_timeout) = (&run.terraform, run.lock_timeout.as_str());
            let upgrade_run = ControlPlaneUpgradeRun { settings, terraform, recorder: &recorder, aws, lock_timeout };
            upgrade_run.upgrade_first(upgrade, approved.is_some(), &mut run.signals).await?;
        }
        if let (Some(renewal), CloudSession::Aws(aws)) = (&run.manifest.certificate_renewal, &run.session) {
            certificate_renewal::renew_certificates(aws, &run.terraform, renewal, settings, &mut run.signals).await?;
        }
        match approved {
            // An approval names one plan file: a new plan would need a new approval.
            Some(_) => {
                apply_plan(&run.terraform, &run.lock_timeout, &mut run.signals, Some(&recorder))
                    .await
                    .map_err(approval::stale_plan_refusal)?;
            }
            None => {
                let replan = Replan::Apply(&recorder);
                self.apply_retrying_transient(&run.terraform, &run.lock_timeout, &mut run.signals, replan).await?
            }
        }
        recorder.save().await?;
        if approved.is_some() {
            saved.discard().await?;
        }
        let outputs = run.terraform.outputs().await?;
        let kubeconfig =
            self.kubeconfig(&run.manifest, &run.credential, &run.session, &outputs, &mut run.signals).await?;
        if run.manifest.wait_for_api_server {
            let (interval, timeout) = (settings.kubeconfig_poll_interval, settings.kubeconfig_timeout);
            api_server::wait_until_answering(&kubeconfig, interval, timeout, &mut run.signals).await?;
        }
        if let Some(admins) = &run.manifest.administrators {
            let (client, _) = api_server::cluster_client(&kubeconfig).await?;
            administrators::bind(client, admins).await?;
        }
        let resources = run.terraform.cloud_resources().await?;
        let (orphans, foreign) = self.orphans(run, &recorder.creations(), &resources).await;
        publish::publish_outputs(
            self.kube.clone(),
            &settings.namespace,
            &settings.job.outputs_secret,
            run.manifest.runtime_id,
            publish::Outputs { kubeconfig: &kubeconfig, resources: &resources },
        )
        .await?;
        let summary = PlanSummary { orphans, foreign, ..summary };
        Ok(RunReport::applied(summary, kubeconfig_digest(kubeconfig.as_bytes())))
    }

    /// What carries the runtime's id though the state does not know it: what an earlier run of the runtime,
    /// killed before it saved its state, created (orphans), and what no run recorded creating (foreign). The apply
    /// itself succeeded, so a failed listing is logged, not a failure of the run.
    async fn orphans(&self, run: &Prepared, creations: &Creations, inventory: &[String]) -> (Vec<String>, Vec<String>) {
        let runtime_id = run.manifest.runtime_id;
        let listed = match &run.session {
            CloudSession::Aws(aws) => leftovers::orphans(aws.as_ref(), runtime_id, creations, inventory).await,
            CloudSession::Gcp(gcp) => leftovers::orphans(gcp.as_ref(), runtime_id, creations, inventory).await,
        };
        match listed {
            Ok(Unknown { ours: orphans, foreign }) => {
                if !orphans.is_empty() {
                    tracing::warn!(
                        ?orphans,
                        "resources an earlier run created that the state does not know; the deprovisioning deletes them"
                    );
                }
                if !foreign.is_empty() {
                    tracing::warn!(
                        ?foreign,
                        "resources carrying the runtime's id that no run of it created; they are never deleted"
                    );
                }
                (orphans, foreign)
            }
            Err(error) => {
                tracing::warn!(%error, "listing what carries the runtime's id failed; no orphans are reported");
                (Vec::new(), Vec::new())
            }
        }
    }

    /// A dry run: plans and checks the plan, and changes nothing, not even the bucket.
    async fn plan_only(&self, run: &mut Prepared) -> Result<PlanSummary> {
        let settings = &self.settings;
        let bucket = &run.manifest.state_bucket;
        // A cluster not built yet plans from empty state (a provisioning's always: a bucket of the same name is a
        // live runtime's). With state, its plan locks it like any run, so it records itself as the holder too.
        let has_state = !run.manifest.plan_from_empty_state && run.session.state_bucket_exists(bucket).await?;
        if !has_state {
            tracing::info!(bucket, "planning a new cluster from empty local state");
            plan_without_backend(&settings.job.work_dir)?;
        }
        run.terraform.run(INIT, &mut run.signals).await?;
        if has_state {
            self.take_over_state_lock(&run.session, bucket, &run.this_run, &run.terraform, &mut run.signals).await?;
        }
        let protected = &settings.protected_resources;
        let summary = plan(&run.terraform, EVERYTHING, &run.lock_timeout, protected, &mut run.signals).await?;
        // What the real run would refuse, the dry run reports the same way.
        refuse_destructive(&summary)?;
        Ok(summary)
    }

    /// Destroys everything the state holds, then what the state did not know (see [`leftovers`]), then the state
    /// bucket; `None` when there was no bucket, so nothing was ever applied or everything is already destroyed.
    async fn destroy(&self, run: &mut Prepared) -> Result<Option<RunReport>> {
        let bucket = &run.manifest.state_bucket;
        // The bucket goes last, so without it nothing was ever applied or everything is destroyed.
        if !run.session.state_bucket_exists(bucket).await? {
            tracing::info!(bucket, "the state bucket does not exist; nothing to destroy");
            return Ok(None);
        }
        run.terraform.run(INIT, &mut run.signals).await?;
        self.take_over_state_lock(&run.session, bucket, &run.this_run, &run.terraform, &mut run.signals).await?;
        let summary = plan_destroy(&run.terraform, &run.lock_timeout, &mut run.signals).await?;
        self.apply_retrying_transient(&run.terraform, &run.lock_timeout, &mut run.signals, Replan::Destroy).await?;
        if let (CloudSession::Aws(aws), Some(prefix)) = (&run.session, &run.manifest.ssm_parameter_prefix) {
            aws.delete_parameters_under(prefix).await?;
        }
        // The bucket stays while anything of the runtime is left: a repeated deprovisioning looks again.
        let creations = Creations::read(&run.session, bucket).await?;
        let runtime_id = run.manifest.runtime_id;
        let Swept { swept, foreign } = match &run.session {
            CloudSession::Aws(aws) => {
                self.sweep_leftovers(aws.as_ref(), runtime_id, &creations, &mut run.signals).await?
            }
            CloudSession::Gcp(gcp) => {
                self.sweep_leftovers(gcp.as_ref(), runtime_id, &creations, &mut run.signals).await?
            }
        };
        if !foreign.is_empty() {
            tracing::warn!(?foreign, "resources carrying the runtime's id that no run of it created were left alone");
        }
        run.session.delete_state_bucket(bucket).await?;
        Ok(Some(RunReport::of_plan(PlanSummary { swept, foreign, ..summary })))
    }

    /// Runs after `init` and before the first command that takes the state lock: a lock whose recorded holder is
    /// dead (see [`state_lock`]) is force-unlocked; any other is left alone and judged again every
    /// `RUNNER_STATE_LOCK_POLL_INTERVAL` (its holder may die or release it meanwhile) for up to
    /// `RUNNER_STATE_LOCK_TIMEOUT`, after which the run fails saying who holds it. Then this run is recorded as
    /// the holder of the lock it is about to take.
    async fn take_over_state_lock(
        &self,
        session: &CloudSession,
        bucket: &str,
        this_run: &LockHolder,
        terraform: &Terraform,
        signals: &mut Signals,
    ) -> Result<()> {
        let settings = &self.settings;
        let objects = session.state_objects();
        // A state bucket belongs to one runtime: the last run recorded which.
        let recorded = session.read_json_object(bucket, objects.holder).await?;
        if let Some(owner) = recorded.and_then(|record| serde_json::from_value::<LockHolder>(record).ok())
            && owner.runtime_id != this_run.runtime_id
        {
            return Err(Error::StateOfAnotherRuntime { bucket: bucket.to_owned(), owner: owner.runtime_id });
        }
        let deadline = tokio::time::Instant::now() + settings.state_lock_timeout;
        let mut waiting = false;
        while let Some(found) = session.read_state_lock(bucket).await? {
            let Ok(lock) = serde_json::from_value::<StateLock>(found) else {
                tracing::warn!(object = objects.lock, "the state lock is not Terraform's; left alone");
                return Ok(());
            };
            let holder = session
                .read_json_object(bucket, objects.holder)
                .await?
                .and_then(|record| serde_json::from_value::<LockHolder>(record).ok());
            let (pod, unfinished_job) = match &holder {
                Some(holder) => state_lock::holder_facts(&self.kube, &settings.namespace, holder, this_run).await?,
                None => (state_lock::PodState::Live, false),
            };
            match state_lock::judge(&lock, holder.as_ref(), this_run, pod, unfinished_job) {
                Verdict::Stale(holder) => {
                    tracing::warn!(
                        lock_id = lock.id,
                        who = lock.who,
                        since = lock.created,
                        holder_pod = holder.pod,
                        holder_operation_id = %holder.operation_id,
                        ?pod,
                        "force-unlocking a stale state lock: its holder pod no longer runs and its operation is not active"
                    );
                    terraform.run(&["force-unlock", "-force", "-no-color", &lock.id], signals).await?;
                    break;
                }
                Verdict::Held(why) => {
                    if tokio::time::Instant::now() >= deadline {
                        let waited = settings.state_lock_timeout;
                        return Err(Error::StateLocked { who: lock.who, since: lock.created, why, waited });
                    }
                    if !waiting {
                        waiting = true;
                        tracing::warn!(
                            lock_id = lock.id,
                            who = lock.who,
                            since = lock.created,
                            why,
                            waiting = %humantime::format_duration(settings.state_lock_timeout),
                            "the state is locked and the lock is left alone; waiting for it"
                        );
                    }
                    let pause = settings.state_lock_poll_interval.min(deadline - tokio::time::Instant::now());
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = signals.recv() => return Err(Error::Interrupted),
                    }
                }
            }
        }
        let record = serde_json::to_value(this_run).expect("a lock holder serialises");
        session.write_json_object(bucket, objects.holder, &record).await
    }

    async fn kubeconfig(
        &self,
        manifest: &RunnerManifest,
        credential: &CloudCredential,
        session: &CloudSession,
        outputs: &BTreeMap<String, Value>,
        signals: &mut Signals,
    ) -> Result<String> {
        match (manifest.topology, session) {
            (Topology::VanillaKubeadm, CloudSession::Aws(aws)) => {
                let parameter = output(outputs, "kubeconfig_ssm_parameter")?;
                let api_endpoint = output(outputs, "api_endpoint")?;
                let settings = &self.settings;
                let published = aws
                    .wait_for_parameter(
                        parameter,
                        "its kubeconfig",
                        settings.kubeconfig_poll_interval,
                        settings.kubeconfig_timeout,
                        signals,
                    )
                    .await?;
                node_kubeconfig::rebuild(&published, api_endpoint)
                    .map_err(|reason| Error::RefusedKubeconfig { parameter: parameter.to_owned(), reason })
            }
            (Topology::Eks, CloudSession::Aws(aws)) => {
                let name = output(outputs, "cluster_name")?;
                let (endpoint, ca) = aws.eks_cluster(name).await?;
                let role_arn = match credential {
                    CloudCredential::AwsAssumeRole { role_arn, .. } => Some(role_arn.as_str()),
                    _ => None,
                };
                Ok(kubeconfig::eks(name, &endpoint, &ca, aws.region(), role_arn))
            }
            (Topology::Gke, CloudSession::Gcp(gcp)) => Ok(kubeconfig::gke(
                gcp.project(),
                output(outputs, "location")?,
                output(outputs, "cluster_name")?,
                output(outputs, "cluster_endpoint")?,
                output(outputs, "cluster_ca_certificate")?,
            )),
            (topology, _) => {
                Err(Error::Input(format!("no {} session for topology {}", credential.kind(), topology.as_str())))
            }
        }
    }

    /// The termination message of a failed run: redacted, one line, bounded.
    pub fn failure_message(error: &Error, redactor: &Redactor) -> String {
        bounded_failure_message(&redactor.redact(&error.to_string()).replace('\n', " "))
    }
}

fn output<'a>(outputs: &'a BTreeMap<String, Value>, name: &str) -> Result<&'a str> {
    outputs
        .get(name)
        .and_then(Value::as_str)
        .filter(|value| !value.is_empty())
        .ok_or_else(|| Error::Outputs(format!("output {name:?} is missing or not a string")))
}

/// `init` installs exactly the providers of the lock file, from the image's mirror (its tofu configuration allows
/// no registry), and fails rather than change the lock file. `-reconfigure`: a work folder an earlier attempt
/// initialised with another backend (a dry run's local one) never holds state to migrate.
const INIT: &[&str] = &["init", "-input=false", "-no-color", "-lockfile=readonly", "-reconfigure"];
