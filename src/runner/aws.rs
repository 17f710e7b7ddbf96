//! AWS for terraform-runner with the AWS SDK for Rust: the run's credentials (assuming the role of an
//! assume-role credential), the cluster's S3 state bucket, the SSM parameter a vanilla cluster publishes its
//! kubeconfig to, and the endpoint and CA of an EKS cluster. Honours `AWS_ENDPOINT_URL` (emulators, S3-compatible
//! endpoints), with path-style S3 addressing then.

use std::time::{Duration, SystemTime};

use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_s3::config::Credentials;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata};
use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration, Delete, ObjectIdentifier,
    PublicAccessBlockConfiguration, ServerSideEncryption, ServerSideEncryptionByDefault,
    ServerSideEncryptionConfiguration, ServerSideEncryptionRule, VersioningConfiguration,
};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use secrecy::ExposeSecret;
use uuid::Uuid;

use super::terraform::Signals;
use super::{Error, Result};
use crate::auth::{AwsKeyPair, CloudCredential};

/// Bounds every AWS call, retries included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(120);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// The credentials a run uses, and the clients built on them.
pub struct AwsSession {
    config: SdkConfig,
    credentials: Credentials,
    region: String,
}

fn aws_error(operation: &'static str, error: impl std::error::Error) -> Error {
    Error::Aws { operation, message: DisplayErrorContext(error).to_string() }
}

impl AwsSession {
    /// Resolves the credential into the keys Terraform runs with: an access key as it is, an assume-role
    /// credential by assuming the role (from its source keys, or else from the pod's own AWS identity).
    pub async fn connect(credential: &CloudCredential, region: &str, runtime_id: Uuid) -> Result<Self> {
        let loader = |credentials: Option<Credentials>| {
            let http_client = aws_smithy_http_client::Builder::new()
                .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
                .build_https();
            let timeouts = TimeoutConfig::builder()
                .operation_timeout(OPERATION_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .build();
            let loader = aws_config::defaults(BehaviorVersion::latest())
                .http_client(http_client)
                .timeout_config(timeouts)
                .region(Region::new(region.to_owned()));
            match credentials {
                Some(credentials) => loader.credentials_provider(credentials),
                None => loader,
            }
        };
        let static_keys = |keys: &AwsKeyPair| {
            Credentials::new(&keys.access_key_id, keys.secret_access_key.expose_secret(), None, None, "auth-service")
        };
        let credentials = match credential {
            CloudCredential::AwsAccessKey { access_key_id, secret_access_key, .. } => {
                let keys =
                    AwsKeyPair { access_key_id: access_key_id.clone(), secret_access_key: secret_access_key.clone() };
                static_keys(&keys)
            }
            CloudCredential::AwsAssumeRole { role_arn, external_id, session_duration_seconds, source } => {
                let base = loader(source.as_ref().map(static_keys)).load().await;
                let assumed = aws_sdk_sts::Client::new(&base)
                    .assume_role()
                    .role_arn(role_arn)
                    .role_session_name(format!("kubeopera-{runtime_id}"))
                    .set_external_id(external_id.as_ref().map(|id| id.expose_secret().to_owned()))
                    .set_duration_seconds(session_duration_seconds.map(|seconds| seconds as i32))
                    .send()
                    .await
                    .map_err(|error| aws_error("sts:AssumeRole", error))?;
                let keys = assumed.credentials().ok_or_else(|| Error::Aws {
                    operation: "sts:AssumeRole",
                    message: "the answer carried no credentials".to_owned(),
                })?;
                Credentials::new(
                    keys.access_key_id(),
                    keys.secret_access_key(),
                    Some(keys.session_token().to_owned()),
                    SystemTime::try_from(*keys.expiration()).ok(),
                    "sts:AssumeRole",
                )
            }
            CloudCredential::GcpServiceAccount { .. } => {
                return Err(Error::Input("a GCP credential cannot run an AWS topology".to_owned()));
            }
        };
        let config = loader(Some(credentials.clone())).load().await;
        Ok(AwsSession { config, credentials, region: region.to_owned() })
    }

    /// Environment for Terraform: exactly these credentials, whatever else the pod has.
    pub fn terraform_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("AWS_ACCESS_KEY_ID".to_owned(), self.credentials.access_key_id().to_owned()),
            ("AWS_SECRET_ACCESS_KEY".to_owned(), self.credentials.secret_access_key().to_owned()),
            ("AWS_REGION".to_owned(), self.region.clone()),
            ("AWS_DEFAULT_REGION".to_owned(), self.region.clone()),
        ];
        if let Some(token) = self.credentials.session_token() {
            env.push(("AWS_SESSION_TOKEN".to_owned(), token.to_owned()));
        }
        env
    }

    /// The temporary keys of an assumed role, to redact like the credential's own.
    pub fn secret_values(&self) -> Vec<String> {
        [
            Some(self.credentials.access_key_id()),
            Some(self.credentials.secret_access_key()),
            self.credentials.session_token(),
        ]
        .into_iter()
        .flatten()
        .map(str::to_owned)
        .collect()
    }

    fn s3(&self) -> aws_sdk_s3::Client {
        // Emulators and S3-compatible endpoints only serve path-style addresses.
        let path_style = self.config.endpoint_url().is_some();
        aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&self.config).force_path_style(path_style).build(),
        )
    }

    pub async fn state_bucket_exists(&self, bucket: &str) -> Result<bool> {
        match self.s3().head_bucket().bucket(bucket).send().await {
            Ok(_) => Ok(true),
            Err(error) if error.as_service_error().is_some_and(|error| error.is_not_found()) => Ok(false),
            Err(error) => Err(aws_error("s3:HeadBucket", error)),
        }
    }

    /// Creates the cluster's state bucket if needed and (re)applies its protection: versioning (state history),
    /// default encryption, and every public access blocked. Safe to repeat.
    pub async fn ensure_state_bucket(&self, bucket: &str) -> Result<()> {
        let s3 = self.s3();
        if !self.state_bucket_exists(bucket).await? {
            // us-east-1 is the one region that refuses an explicit location constraint.
            let location = (self.region != "us-east-1").then(|| {
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(self.region.as_str()))
                    .build()
            });
            match s3.create_bucket().bucket(bucket).set_create_bucket_configuration(location).send().await {
                Ok(_) => tracing::info!(bucket, "created the state bucket"),
                Err(error) if error.as_service_error().is_some_and(|error| error.is_bucket_already_owned_by_you()) => {}
                Err(error) => return Err(aws_error("s3:CreateBucket", error)),
            }
        }
        let versioning = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled).build();
        s3.put_bucket_versioning()
            .bucket(bucket)
            .versioning_configuration(versioning)
            .send()
            .await
            .map_err(|error| aws_error("s3:PutBucketVersioning", error))?;
        let encryption = ServerSideEncryptionConfiguration::builder()
            .rules(
                ServerSideEncryptionRule::builder()
                    .apply_server_side_encryption_by_default(
                        ServerSideEncryptionByDefault::builder()
                            .sse_algorithm(ServerSideEncryption::Aes256)
                            .build()
                            .map_err(|error| aws_error("s3:PutBucketEncryption", error))?,
                    )
                    .build(),
            )
            .build()
            .map_err(|error| aws_error("s3:PutBucketEncryption", error))?;
        s3.put_bucket_encryption()
            .bucket(bucket)
            .server_side_encryption_configuration(encryption)
            .send()
            .await
            .map_err(|error| aws_error("s3:PutBucketEncryption", error))?;
        let block_all = PublicAccessBlockConfiguration::builder()
            .block_public_acls(true)
            .ignore_public_acls(true)
            .block_public_policy(true)
            .restrict_public_buckets(true)
            .build();
        s3.put_public_access_block()
            .bucket(bucket)
            .public_access_block_configuration(block_all)
            .send()
            .await
            .map_err(|error| aws_error("s3:PutPublicAccessBlock", error))?;
        Ok(())
    }

    /// Removes the state bucket with every version of every object in it (a versioned bucket cannot be
    /// deleted otherwise). A bucket that is already gone is fine.
    pub async fn delete_state_bucket(&self, bucket: &str) -> Result<()> {
        let s3 = self.s3();
        let (mut key_marker, mut version_marker) = (None, None);
        loop {
            let page = match s3
                .list_object_versions()
                .bucket(bucket)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
            {
                Ok(page) => page,
                Err(error) if is_no_such_bucket(&error) => return Ok(()),
                Err(error) => return Err(aws_error("s3:ListObjectVersions", error)),
            };
            let versions = page.versions().iter().map(|version| (version.key(), version.version_id()));
            let markers = page.delete_markers().iter().map(|marker| (marker.key(), marker.version_id()));
            let objects = versions
                .chain(markers)
                .filter_map(|(key, version)| {
                    ObjectIdentifier::builder()
                        .set_key(key.map(str::to_owned))
                        .set_version_id(version.map(str::to_owned))
                        .build()
                        .ok()
                })
                .collect::<Vec<_>>();
            if !objects.is_empty() {
                let delete = Delete::builder()
                    .set_objects(Some(objects))
                    .quiet(true)
                    .build()
                    .map_err(|error| aws_error("s3:DeleteObjects", error))?;
                let deleted = s3
                    .delete_objects()
                    .bucket(bucket)
                    .delete(delete)
                    .send()
                    .await
                    .map_err(|error| aws_error("s3:DeleteObjects", error))?;
                if let Some(failure) = deleted.errors().first() {
                    return Err(Error::Aws {
                        operation: "s3:DeleteObjects",
                        message: format!("{:?}: {}", failure.key(), failure.message().unwrap_or("no message")),
                    });
                }
            }
            if !page.is_truncated().unwrap_or(false) {
                break;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
        }
        match s3.delete_bucket().bucket(bucket).send().await {
            Ok(_) => {
                tracing::info!(bucket, "removed the state bucket");
                Ok(())
            }
            Err(error) if is_no_such_bucket(&error) => Ok(()),
            Err(error) => Err(aws_error("s3:DeleteBucket", error)),
        }
    }

    /// Polls an SSM parameter (decrypted) until it exists, every `interval` for at most `timeout`.
    pub async fn wait_for_parameter(
        &self,
        name: &str,
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
                return Err(Error::KubeconfigTimeout { parameter: name.to_owned(), waited: timeout, last_error });
            }
            tracing::info!(parameter = name, "waiting for the cluster to publish its kubeconfig");
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

/// Whether a failed poll cannot succeed later: a refusal (permissions, keys, KMS) will not change while we wait,
/// unlike a missing parameter, throttling, or a server or network failure.
fn poll_error_is_permanent(status: Option<u16>, code: Option<&str>) -> bool {
    match (status, code) {
        (_, Some("ParameterNotFound" | "ThrottlingException")) => false,
        (Some(status), _) => (400..500).contains(&status) && status != 429,
        (None, _) => false,
    }
}

fn is_no_such_bucket<E: ProvideErrorMetadata>(error: &aws_sdk_s3::error::SdkError<E>) -> bool {
    error.as_service_error().and_then(|error| error.code()) == Some("NoSuchBucket")
}

#[cfg(test)]
mod tests {
    use super::poll_error_is_permanent;

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
