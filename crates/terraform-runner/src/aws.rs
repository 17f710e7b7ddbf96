//! AWS for terraform-runner with the AWS SDK for Rust: the run's credentials (assuming the role of an
//! assume-role credential), the cluster's S3 state bucket, the SSM parameter a vanilla cluster publishes its
//! kubeconfig to, and the endpoint and CA of an EKS cluster. Honours `AWS_ENDPOINT_URL` (emulators, S3-compatible
//! endpoints), with path-style S3 addressing then.

use std::path::Path;
use std::time::Duration;

use aws_config::sts::AssumeRoleProvider;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::{Credentials, ProvideCredentials};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use runner_contract::credential::{AwsKeyPair, CloudCredential};
use runner_contract::redact::SharedRedactor;
use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use crate::terraform::Signals;
use crate::{Error, Result};

mod state_bucket;

/// Bounds every AWS call, retries included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// The credentials a run uses, and the clients built on them.
pub struct AwsSession {
    config: SdkConfig,
    region: String,
    /// The account the credential acts in: every S3 call expects it to own the state bucket, so a bucket of the
    /// same name in another account (squatted, or another installation's) is never read or written.
    account: String,
    /// How Terraform gets the same identity: keys, or a profile that assumes the role (and renews it).
    terraform_env: Vec<(String, String)>,
}

/// The role provider, telling the redactor each session credential it mints (renewals included).
#[derive(Debug)]
struct RedactedSessions<P> {
    role: P,
    redactor: SharedRedactor,
}

impl<P: ProvideCredentials> ProvideCredentials for RedactedSessions<P> {
    fn provide_credentials<'a>(&'a self) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        aws_credential_types::provider::future::ProvideCredentials::new(async move {
            let session = self.role.provide_credentials().await?;
            let minted = [Some(session.access_key_id()), Some(session.secret_access_key()), session.session_token()];
            self.redactor.extend(minted.into_iter().flatten().map(str::to_owned));
            Ok(session)
        })
    }
}

pub(crate) fn aws_error(operation: &'static str, error: impl std::error::Error) -> Error {
    Error::Aws { operation, message: DisplayErrorContext(error).to_string() }
}

/// The profile terraform-runner writes for Terraform with an assume-role credential.
const TERRAFORM_PROFILE: &str = "kubeopera";

impl AwsSession {
    /// The SDK configuration of the run's identity, for the clients other modules build.
    pub(crate) fn sdk_config(&self) -> &SdkConfig {
        &self.config
    }

    /// Resolves the credential: an access key is used as it is; an assume-role credential assumes the role (from
    /// its source keys, or else from the pod's own AWS identity), for the runner's calls through a provider that
    /// renews the session before it expires, and for Terraform through a profile in `config_dir` that does the
    /// same, so a run may outlast one session.
    /// Every session credential the runner's role provider mints, `redactor` learns.
    pub async fn connect(
        credential: &CloudCredential,
        region: &str,
        runtime_id: Uuid,
        config_dir: &Path,
        redactor: &SharedRedactor,
    ) -> Result<Self> {
        let loader = || {
            let http_client = aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                .build_https();
            let timeouts = TimeoutConfig::builder()
                .operation_timeout(OPERATION_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build();
            aws_config::defaults(BehaviorVersion::latest())
                .http_client(http_client)
                .timeout_config(timeouts)
                .region(Region::new(region.to_owned()))
        };
        let static_keys = |access_key_id: &str, secret_access_key: &SecretString| {
            Credentials::new(access_key_id, secret_access_key.expose_secret(), None, None, "auth-service")
        };
        let mut terraform_env =
            vec![("AWS_REGION".to_owned(), region.to_owned()), ("AWS_DEFAULT_REGION".to_owned(), region.to_owned())];
        let config = match credential {
            CloudCredential::AwsAccessKey { access_key_id, secret_access_key, .. } => {
                terraform_env.extend([
                    ("AWS_ACCESS_KEY_ID".to_owned(), access_key_id.clone()),
                    ("AWS_SECRET_ACCESS_KEY".to_owned(), secret_access_key.expose_secret().to_owned()),
                ]);
                loader().credentials_provider(static_keys(access_key_id, secret_access_key)).load().await
            }
            CloudCredential::AwsAssumeRole { role_arn, external_id, session_duration_seconds, source } => {
                let session_name = format!("kubeopera-{runtime_id}");
                let base = match source {
                    Some(keys) => {
                        loader().credentials_provider(static_keys(&keys.access_key_id, &keys.secret_access_key))
                    }
                    None => loader(),
                }
                .load()
                .await;
                let mut role = AssumeRoleProvider::builder(role_arn).session_name(&session_name).configure(&base);
                if let Some(id) = external_id {
                    role = role.external_id(id.expose_secret());
                }
                if let Some(seconds) = session_duration_seconds {
                    role = role.session_length(Duration::from_secs(u64::from(*seconds)));
                }
                let role = RedactedSessions { role: role.build().await, redactor: redactor.clone() };
                // Fail here, before any bucket exists, when the role cannot be assumed.
                role.provide_credentials().await.map_err(|error| aws_error("sts:AssumeRole", error))?;
                terraform_env.extend(write_terraform_profile(
                    config_dir,
                    role_arn,
                    &session_name,
                    external_id.as_ref().map(|id| id.expose_secret()),
                    *session_duration_seconds,
                    source.as_ref(),
                )?);
                loader().credentials_provider(role).load().await
            }
            CloudCredential::GcpServiceAccount { .. } => {
                return Err(Error::Input("a GCP credential cannot run an AWS topology".to_owned()));
            }
        };
        let identity = aws_sdk_sts::Client::new(&config)
            .get_caller_identity()
            .send()
            .await
            .map_err(|error| aws_error("sts:GetCallerIdentity", error))?;
        let account = identity
            .account()
            .ok_or_else(|| Error::Aws {
                operation: "sts:GetCallerIdentity",
                message: "no account in the answer".into(),
            })?
            .to_owned();
        Ok(AwsSession { config, region: region.to_owned(), terraform_env, account })
    }

    /// Environment for Terraform: exactly this identity, whatever else the pod has.
    pub fn terraform_env(&self) -> Vec<(String, String)> {
        self.terraform_env.clone()
    }

    /// Polls an SSM parameter (decrypted) until it exists, every `interval` for at most `timeout`; `what` the
    /// cluster publishes there, for the error.
    pub async fn wait_for_parameter(
        &self,
        name: &str,
        what: &str,
        interval: Duration,
        timeout: Duration,
        signals: &mut Signals,
    ) -> Result<String> {
        let ssm = aws_sdk_ssm::Client::new(&self.config);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last_error = None;
        loop {
            match ssm.get_parameter().name(name).with_decryption(true).send().await {
                Ok(answer) => {
                    if let Some(value) = answer.parameter().and_then(|parameter| parameter.value()) {
                        return Ok(value.to_owned());
                    }
                }
                Err(error) if error.as_service_error().is_some_and(|error| error.is_parameter_not_found()) => {}
                Err(error) => {
                    let status = error.raw_response().map(|response| response.status().as_u16());
                    let code = error.as_service_error().and_then(|error| error.code());
                    if poll_error_is_permanent(status, code) {
                        return Err(aws_error("ssm:GetParameter", error));
                    }
                    // The cluster boots for minutes; a network or server failure is retried like a missing
                    // parameter, and reported if the wait ends without the kubeconfig.
                    let message = DisplayErrorContext(&error).to_string();
                    tracing::warn!(error = message, "reading the kubeconfig parameter failed");
                    last_error = Some(message);
                }
            }
            if tokio::time::Instant::now() + interval > deadline {
                return Err(Error::ParameterTimeout {
                    what: what.to_owned(),
                    parameter: name.to_owned(),
                    waited: timeout,
                    last_error,
                });
            }
            tracing::info!(parameter = name, "waiting for the cluster to publish {what}");
            tokio::select! {
                () = tokio::time::sleep(interval) => {},
                () = signals.recv() => return Err(Error::Interrupted),
            }
        }
    }

    /// Deletes every SSM parameter under `path` (recursively). Nothing there is fine.
    pub async fn delete_parameters_under(&self, path: &str) -> Result<()> {
        let ssm = aws_sdk_ssm::Client::new(&self.config);
        let mut names = Vec::new();
        let mut next_token = None;
        loop {
            let page = ssm
                .get_parameters_by_path()
                .path(path.trim_end_matches('/'))
                .recursive(true)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(|error| aws_error("ssm:GetParametersByPath", error))?;
            names.extend(page.parameters().iter().filter_map(|parameter| parameter.name().map(str::to_owned)));
            next_token = page.next_token().map(str::to_owned);
            if next_token.is_none() {
                break;
            }
        }
        // DeleteParameters takes at most 10 names.
        for batch in names.chunks(10) {
            ssm.delete_parameters()
                .set_names(Some(batch.to_vec()))
                .send()
                .await
                .map_err(|error| aws_error("ssm:DeleteParameters", error))?;
        }
        if !names.is_empty() {
            tracing::info!(path, count = names.len(), "removed the parameters the cluster published");
        }
        Ok(())
    }

    /// Writes a String SSM parameter, overwriting it.
    pub async fn put_parameter(&self, name: &str, value: &str) -> Result<()> {
        aws_sdk_ssm::Client::new(&self.config)
            .put_parameter()
            .name(name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::String)
            .overwrite(true)
            .send()
            .await
            .map_err(|error| aws_error("ssm:PutParameter", error))?;
        Ok(())
    }

    /// Whether an SSM parameter exists.
    pub async fn parameter_exists(&self, name: &str) -> Result<bool> {
        match aws_sdk_ssm::Client::new(&self.config).get_parameter().name(name).send().await {
            Ok(_) => Ok(true),
            Err(error) if error.as_service_error().is_some_and(|error| error.is_parameter_not_found()) => Ok(false),
            Err(error) => Err(aws_error("ssm:GetParameter", error)),
        }
    }

    /// Deletes one SSM parameter; one that does not exist is fine (DeleteParameters only lists it as invalid).
    pub async fn delete_parameter(&self, name: &str) -> Result<()> {
        aws_sdk_ssm::Client::new(&self.config)
            .delete_parameters()
            .names(name)
            .send()
            .await
            .map_err(|error| aws_error("ssm:DeleteParameters", error))?;
        Ok(())
    }

    /// The API endpoint and base64 CA of an EKS cluster, which must be active.
    pub async fn eks_cluster(&self, name: &str) -> Result<(String, String)> {
        let answer = aws_sdk_eks::Client::new(&self.config)
            .describe_cluster()
            .name(name)
            .send()
            .await
            .map_err(|error| aws_error("eks:DescribeCluster", error))?;
        let cluster =
            answer.cluster().ok_or_else(|| Error::Outputs(format!("EKS cluster {name} was not described")))?;
        match (cluster.endpoint(), cluster.certificate_authority().and_then(|ca| ca.data())) {
            (Some(endpoint), Some(ca)) => Ok((endpoint.to_owned(), ca.to_owned())),
            _ => Err(Error::Outputs(format!(
                "EKS cluster {name} has no endpoint or CA yet (status {:?})",
                cluster.status().map(|status| status.as_str())
            ))),
        }
    }

    pub fn region(&self) -> &str {
        &self.region
    }
}

/// Writes the shared config (and, with source keys, credentials) files of a profile that assumes `role_arn`, readable
/// by the owner only, and returns the variables that make Terraform use it. Without source keys the profile starts
/// from the pod's own identity: web identity (IRSA), the container credentials endpoint (EKS Pod Identity), or
/// else the instance profile.
fn write_terraform_profile(
    dir: &Path,
    role_arn: &str,
    session_name: &str,
    external_id: Option<&str>,
    session_duration_seconds: Option<u32>,
    source: Option<&AwsKeyPair>,
) -> Result<Vec<(String, String)>> {
    let failed = |error: std::io::Error| Error::Input(format!("writing the AWS profile in {}: {error}", dir.display()));
    let mut config =
        format!("[profile {TERRAFORM_PROFILE}]\nrole_arn = {role_arn}\nrole_session_name = {session_name}\n");
    if let Some(id) = external_id {
        config.push_str(&format!("external_id = {id}\n"));
    }
    if let Some(seconds) = session_duration_seconds {
        config.push_str(&format!("duration_seconds = {seconds}\n"));
    }
    let mut credentials = String::new();
    let web_identity = std::env::var("AWS_WEB_IDENTITY_TOKEN_FILE").ok().zip(std::env::var("AWS_ROLE_ARN").ok());
    match (source, web_identity) {
        (Some(keys), _) => {
            config.push_str(&format!("source_profile = {TERRAFORM_PROFILE}-source\n"));
            credentials = format!(
                "[{TERRAFORM_PROFILE}-source]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
                keys.access_key_id,
                keys.secret_access_key.expose_secret()
            );
        }
        (None, Some((token_file, pod_role))) => {
            config.push_str(&format!(
                "source_profile = {TERRAFORM_PROFILE}-source\n\n[profile {TERRAFORM_PROFILE}-source]\n\
                 role_arn = {pod_role}\nweb_identity_token_file = {token_file}\n"
            ));
        }
        (None, None) => {
            let container = ["AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"]
                .iter()
                .any(|name| std::env::var_os(name).is_some());
            let source = if container { "EcsContainer" } else { "Ec2InstanceMetadata" };
            config.push_str(&format!("credential_source = {source}\n"));
        }
    }
    std::fs::create_dir_all(dir).map_err(failed)?;
    let config_file = dir.join("config");
    let credentials_file = dir.join("credentials");
    write_private(&config_file, &config).map_err(failed)?;
    write_private(&credentials_file, &credentials).map_err(failed)?;
    Ok(vec![
        ("AWS_CONFIG_FILE".to_owned(), config_file.display().to_string()),
        ("AWS_SHARED_CREDENTIALS_FILE".to_owned(), credentials_file.display().to_string()),
        ("AWS_PROFILE".to_owned(), TERRAFORM_PROFILE.to_owned()),
        ("AWS_SDK_LOAD_CONFIG".to_owned(), "1".to_owned()),
    ])
}

fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    file.write_all(content.as_bytes())
}

/// Whether a failed poll cannot succeed later: a refusal (permissions, keys, KMS) will not change while we wait,
/// unlike a missing parameter, throttling, or a server or network failure.
fn poll_error_is_permanent(status: Option<u16>, code: Option<&str>) -> bool {
    match (status, code) {
        (_, Some("ParameterNotFound" | "ThrottlingException")) => false,
        (Some(status), _) => (400..500).contains(&status) && status != 429,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_session_the_role_provider_mints_is_redacted() {
        let redactor = SharedRedactor::default();
        let minted = Credentials::new(
            "ASIAMINTEDSESSION001",
            "minted-secret-0001",
            Some("minted-token-0001".into()),
            None,
            "sts",
        );
        let sessions = RedactedSessions { role: minted, redactor: redactor.clone() };
        sessions.provide_credentials().await.unwrap();
        assert_eq!(
            redactor.redact("ASIAMINTEDSESSION001 minted-secret-0001 minted-token-0001"),
            "[REDACTED] [REDACTED] [REDACTED]"
        );
    }

    #[test]
    fn refusals_end_the_kubeconfig_wait_and_passing_failures_do_not() {
        assert!(poll_error_is_permanent(Some(400), Some("AccessDeniedException")));
        assert!(poll_error_is_permanent(Some(400), Some("UnrecognizedClientException")));
        assert!(poll_error_is_permanent(Some(403), None));
        assert!(!poll_error_is_permanent(Some(400), Some("ParameterNotFound")));
        assert!(!poll_error_is_permanent(Some(400), Some("ThrottlingException")));
        assert!(!poll_error_is_permanent(Some(429), None));
        assert!(!poll_error_is_permanent(Some(500), Some("InternalServerError")));
        // No answer at all: a timeout or a connection failure.
        assert!(!poll_error_is_permanent(None, None));
    }
}
