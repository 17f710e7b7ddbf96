//! The cloud a run works in, whichever it is: its credentials for Terraform and its state bucket.

use serde_json::Value;

use crate::Result;
use crate::aws::AwsSession;
use crate::gcp::GcpSession;

/// Object names in the state bucket.
pub(crate) struct StateObjects {
    pub(crate) lock: &'static str,
    pub(crate) holder: &'static str,
    /// What the runs created ([`crate::creations`]).
    pub(crate) creations: &'static str,
}

/// The cloud a run works in.
pub(crate) enum CloudSession {
    // Boxed: both are large and of very different sizes.
    Aws(Box<AwsSession>),
    Gcp(Box<GcpSession>),
}

impl CloudSession {
    pub(crate) fn terraform_env(&self) -> Vec<(String, String)> {
        match self {
            CloudSession::Aws(aws) => aws.terraform_env(),
            CloudSession::Gcp(gcp) => gcp.terraform_env(),
        }
    }

    pub(crate) async fn state_bucket_exists(&self, bucket: &str) -> Result<bool> {
        match self {
            CloudSession::Aws(aws) => aws.state_bucket_exists(bucket).await,
            CloudSession::Gcp(gcp) => gcp.state_bucket_exists(bucket).await,
        }
    }

    /// Terraform's lock beside the state, the record of who takes it and that of what runs created: the backends of
    /// assets/terraform/*/main.tf.hbs (S3 `key = "terraform.tfstate"` with `use_lockfile`, GCS `prefix =
    /// "terraform"`, whose default workspace locks `default.tflock`).
    pub(crate) fn state_objects(&self) -> StateObjects {
        match self {
            CloudSession::Aws(_) => StateObjects {
                lock: "terraform.tfstate.tflock",
                holder: "terraform.tfstate.holder.json",
                creations: "terraform.tfstate.created.json",
            },
            CloudSession::Gcp(_) => StateObjects {
                lock: "terraform/default.tflock",
                holder: "terraform/default.holder.json",
                creations: "terraform/default.created.json",
            },
        }
    }

    /// An object of the state bucket as JSON (text that is not JSON as a JSON string).
    pub(crate) async fn read_json_object(&self, bucket: &str, name: &str) -> Result<Option<Value>> {
        match self {
            CloudSession::Aws(aws) => Ok(aws.read_object(bucket, name).await?.map(|bytes| {
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
            })),
            CloudSession::Gcp(gcp) => gcp.read_json_object(bucket, name).await,
        }
    }

    /// Terraform's lock on the state, with the ID its backend unlocks it by.
    pub(crate) async fn read_state_lock(&self, bucket: &str) -> Result<Option<Value>> {
        let lock = self.state_objects().lock;
        match self {
            // The S3 backend unlocks by the ID inside the lock object.
            CloudSession::Aws(_) => self.read_json_object(bucket, lock).await,
            CloudSession::Gcp(gcp) => gcp.read_lock_object(bucket, lock).await,
        }
    }

    pub(crate) async fn write_json_object(&self, bucket: &str, name: &str, value: &Value) -> Result<()> {
        match self {
            CloudSession::Aws(aws) => aws.write_json_object(bucket, name, value.to_string().into_bytes()).await,
            CloudSession::Gcp(gcp) => gcp.write_json_object(bucket, name, value).await,
        }
    }

    pub(crate) async fn delete_object(&self, bucket: &str, name: &str) -> Result<()> {
        match self {
            CloudSession::Aws(aws) => aws.delete_object(bucket, name).await,
            CloudSession::Gcp(gcp) => gcp.delete_object(bucket, name).await,
        }
    }

    pub(crate) async fn ensure_state_bucket(&self, bucket: &str) -> Result<()> {
        match self {
            CloudSession::Aws(aws) => aws.ensure_state_bucket(bucket).await,
            CloudSession::Gcp(gcp) => gcp.ensure_state_bucket(bucket).await,
        }
    }

    pub(crate) async fn delete_state_bucket(&self, bucket: &str) -> Result<()> {
        match self {
            CloudSession::Aws(aws) => aws.delete_state_bucket(bucket).await,
            CloudSession::Gcp(gcp) => gcp.delete_state_bucket(bucket).await,
        }
    }
}
