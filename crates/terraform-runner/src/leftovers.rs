//! What a deprovisioning left in the cloud: every resource the modules create carries the runtime's id as a tag
//! ([`RUNTIME_ID_TAG`]), so once the state is destroyed, whatever still carries it is a leftover: created by a run
//! that was killed before it saved its state, or changed outside Terraform. AWS: the Resource Groups Tagging API.

use runner_contract::failure::RUNTIME_ID_TAG;
use uuid::Uuid;

use crate::Result;
use crate::aws::{AwsSession, aws_error};

impl AwsSession {
    /// The ARNs of the resources of this region that carry `runtime_id`'s tag.
    pub async fn tagged_with_runtime(&self, runtime_id: Uuid) -> Result<Vec<String>> {
        let tagging = aws_sdk_resourcegroupstagging::Client::new(self.sdk_config());
        let filter = aws_sdk_resourcegroupstagging::types::TagFilter::builder()
            .key(RUNTIME_ID_TAG)
            .values(runtime_id.to_string())
            .build();
        let mut arns = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = tagging
                .get_resources()
                .tag_filters(filter.clone())
                .set_pagination_token(token.take())
                .send()
                .await
                .map_err(|error| aws_error("tag:GetResources", error))?;
            arns.extend(
                page.resource_tag_mapping_list().iter().filter_map(|mapping| mapping.resource_arn()).map(str::to_owned),
            );
            // The last page has an empty token.
            token = page.pagination_token().filter(|token| !token.is_empty()).map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        arns.sort();
        Ok(arns)
    }
}
