//! The cluster's S3 state bucket: created owned, versioned, encrypted and closed to the public; emptied and deleted
//! with the cluster; and the objects kept beside the state.

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::types::{
    BucketLocationConstraint, BucketVersioningStatus, CreateBucketConfiguration, Delete, ObjectIdentifier,
    PublicAccessBlockConfiguration, ServerSideEncryption, ServerSideEncryptionByDefault,
    ServerSideEncryptionConfiguration, ServerSideEncryptionRule, VersioningConfiguration,
};

use super::{AwsSession, aws_error};
use crate::{Error, Result};

impl AwsSession {
    fn s3(&self) -> aws_sdk_s3::Client {
        // Emulators and S3-compatible endpoints only serve path-style addresses.
        let path_style = self.config.endpoint_url().is_some();
        aws_sdk_s3::Client::from_conf(
            aws_sdk_s3::config::Builder::from(&self.config).force_path_style(path_style).build(),
        )
    }

    /// Whether the state bucket exists; one that exists in another account fails the run
    /// ([`Error::ForeignBucket`]). S3 itself refuses a call whose bucket has another owner than expected; the
    /// account's own bucket list is asked too, since S3-compatible endpoints may not check.
    pub async fn state_bucket_exists(&self, bucket: &str) -> Result<bool> {
        let foreign =
            || Error::ForeignBucket { bucket: bucket.to_owned(), expected_owner: format!("account {}", self.account) };
        match self.s3().head_bucket().bucket(bucket).expected_bucket_owner(&self.account).send().await {
            Ok(_) if self.owns(bucket).await? => Ok(true),
            Ok(_) => Err(foreign()),
            Err(error) if error.as_service_error().is_some_and(|error| error.is_not_found()) => Ok(false),
            Err(error) if error.raw_response().is_some_and(|response| response.status().as_u16() == 403) => {
                Err(foreign())
            }
            Err(error) => Err(aws_error("s3:HeadBucket", error)),
        }
    }

    /// Whether the bucket is in the credential's account's own bucket list.
    async fn owns(&self, bucket: &str) -> Result<bool> {
        let listing = self
            .s3()
            .list_buckets()
            .prefix(bucket)
            .send()
            .await
            .map_err(|error| aws_error("s3:ListAllMyBuckets", error))?;
        Ok(listing.buckets().iter().any(|owned| owned.name() == Some(bucket)))
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
                // Taken meanwhile by someone else.
                Err(error) if error.as_service_error().is_some_and(|error| error.is_bucket_already_exists()) => {
                    return Err(Error::ForeignBucket {
                        bucket: bucket.to_owned(),
                        expected_owner: format!("account {}", self.account),
                    });
                }
                Err(error) => return Err(aws_error("s3:CreateBucket", error)),
            }
        }
        let versioning = VersioningConfiguration::builder().status(BucketVersioningStatus::Enabled).build();
        s3.put_bucket_versioning()
            .bucket(bucket)
            .expected_bucket_owner(&self.account)
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
            .expected_bucket_owner(&self.account)
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
            .expected_bucket_owner(&self.account)
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
                .expected_bucket_owner(&self.account)
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
                    .expected_bucket_owner(&self.account)
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
        match s3.delete_bucket().bucket(bucket).expected_bucket_owner(&self.account).send().await {
            Ok(_) => {
                tracing::info!(bucket, "removed the state bucket");
                Ok(())
            }
            Err(error) if is_no_such_bucket(&error) => Ok(()),
            Err(error) => Err(aws_error("s3:DeleteBucket", error)),
        }
    }

    /// An object of the state bucket, or `None` when there is no such object.
    pub async fn read_object(&self, bucket: &str, key: &str) -> Result<Option<Vec<u8>>> {
        match self.s3().get_object().bucket(bucket).expected_bucket_owner(&self.account).key(key).send().await {
            Ok(object) => {
                let body = object.body.collect().await.map_err(|error| aws_error("s3:GetObject", error))?;
                Ok(Some(body.into_bytes().to_vec()))
            }
            Err(error) if error.as_service_error().is_some_and(|error| error.is_no_such_key()) => Ok(None),
            Err(error) => Err(aws_error("s3:GetObject", error)),
        }
    }

    /// Writes (or overwrites) a JSON object of the state bucket.
    pub async fn write_json_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> Result<()> {
        self.s3()
            .put_object()
            .bucket(bucket)
            .expected_bucket_owner(&self.account)
            .key(key)
            .content_type("application/json")
            .body(aws_sdk_s3::primitives::ByteStream::from(body))
            .send()
            .await
            .map_err(|error| aws_error("s3:PutObject", error))?;
        Ok(())
    }

    /// Deletes an object of the state bucket (its current version: the bucket keeps the history, as it does the
    /// state's). A missing object is fine.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> Result<()> {
        self.s3()
            .delete_object()
            .bucket(bucket)
            .expected_bucket_owner(&self.account)
            .key(key)
            .send()
            .await
            .map_err(|error| aws_error("s3:DeleteObject", error))?;
        Ok(())
    }
}

fn is_no_such_bucket<E: ProvideErrorMetadata>(error: &aws_sdk_s3::error::SdkError<E>) -> bool {
    error.as_service_error().and_then(|error| error.code()) == Some("NoSuchBucket")
}
