//! What a deprovisioning left in the cloud: every resource the modules create carries the runtime's id as a tag
//! ([`RUNTIME_ID_TAG`]) or, in GCP, a label, and every one a run creates is recorded as it is created
//! ([`crate::creations`]). Once the state is destroyed, whatever still carries the id and a run recorded creating is
//! a leftover (created by a run killed before it saved its state): the kinds the modules create are deleted, in
//! dependency order, and anything else is named. What carries the id though no run recorded creating it is
//! foreign (someone else tagged it): named, never touched. After an apply, both are reported for what the state
//! does not know. AWS: the Resource Groups Tagging API (below); GCP: [`crate::gcp`]'s `leftovers`.

use runner_contract::failure::{MAX_LISTED_LEFTOVERS, RUNTIME_ID_TAG};
use runner_contract::inventory;
use uuid::Uuid;

use crate::aws::{AwsSession, aws_error};
use crate::creations::Creations;
use crate::ec2_query::{Ec2Refusal, elements};
use crate::terraform::Signals;
use crate::transient::Retrying;
use crate::{Error, Result, Runner};

/// A cloud's side of finding and deleting what a runtime left: resources are named as the cloud names them (an
/// ARN, a self link).
pub(crate) trait RuntimeResources {
    /// A resource the runner deletes itself; the order of the values is the order of deletion.
    type Leftover: Ord;

    /// The leftover `name` names, when it is of a kind the runner deletes.
    fn leftover(name: &str) -> Option<Self::Leftover>;

    /// Whether a run of the runtime recorded creating the resource `name` names.
    fn created_by_a_run(name: &str, creations: &Creations) -> bool;

    /// The names of the resources that carry `runtime_id` and still exist.
    async fn left_of_runtime(&self, runtime_id: Uuid) -> Result<Vec<String>>;

    async fn delete(&self, leftover: &Self::Leftover) -> Result<Deleted>;
}

/// A leftover the runner deletes itself. The order of the variants is the order of deletion: what depends on
/// another goes first (node groups before their cluster, instances before their subnet, subnets before their VPC).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum AwsLeftover {
    EksNodegroup { cluster: String, nodegroup: String },
    EksCluster(String),
    Instance(String),
    NatGateway(String),
    ElasticIp(String),
    InternetGateway(String),
    SecurityGroup(String),
    Subnet(String),
    RouteTable(String),
    Vpc(String),
}

impl AwsLeftover {
    /// The leftover an ARN names, when it is of a kind the runner deletes.
    pub(crate) fn of_arn(arn: &str) -> Option<AwsLeftover> {
        let mut parts = arn.splitn(6, ':');
        let (Some("arn"), Some(_partition), Some(service), Some(_region), Some(_account), Some(resource)) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let (kind, id) = resource.split_once('/')?;
        let id = id.to_owned();
        Some(match (service, kind) {
            ("eks", "cluster") => AwsLeftover::EksCluster(id),
            ("eks", "nodegroup") => {
                let mut names = id.split('/');
                let (cluster, nodegroup) = (names.next()?.to_owned(), names.next()?.to_owned());
                AwsLeftover::EksNodegroup { cluster, nodegroup }
            }
            ("ec2", "instance") => AwsLeftover::Instance(id),
            ("ec2", "natgateway") => AwsLeftover::NatGateway(id),
            ("ec2", "elastic-ip") => AwsLeftover::ElasticIp(id),
            ("ec2", "internet-gateway") => AwsLeftover::InternetGateway(id),
            ("ec2", "security-group") => AwsLeftover::SecurityGroup(id),
            ("ec2", "subnet") => AwsLeftover::Subnet(id),
            ("ec2", "route-table") => AwsLeftover::RouteTable(id),
            ("ec2", "vpc") => AwsLeftover::Vpc(id),
            _ => return None,
        })
    }
}

impl AwsLeftover {
    /// Terraform's resource type and id of this leftover.
    fn terraform_identity(&self) -> (&'static str, String) {
        match self {
            AwsLeftover::EksNodegroup { cluster, nodegroup } => {
                ("aws_eks_node_group", format!("{cluster}:{nodegroup}"))
            }
            AwsLeftover::EksCluster(name) => ("aws_eks_cluster", name.clone()),
            AwsLeftover::Instance(id) => ("aws_instance", id.clone()),
            AwsLeftover::NatGateway(id) => ("aws_nat_gateway", id.clone()),
            AwsLeftover::ElasticIp(id) => ("aws_eip", id.clone()),
            AwsLeftover::InternetGateway(id) => ("aws_internet_gateway", id.clone()),
            AwsLeftover::SecurityGroup(id) => ("aws_security_group", id.clone()),
            AwsLeftover::Subnet(id) => ("aws_subnet", id.clone()),
            AwsLeftover::RouteTable(id) => ("aws_route_table", id.clone()),
            AwsLeftover::Vpc(id) => ("aws_vpc", id.clone()),
        }
    }
}

/// What one deletion came to.
pub(crate) enum Deleted {
    /// Deleted now, or gone already.
    Yes,
    /// The cloud refused (still in use by something not yet gone); a later round tries again.
    Refused(String),
}

/// What a destroy's sweep came to: what it deleted, and what it left alone because no run created it.
pub(crate) struct Swept {
    pub(crate) swept: Vec<String>,
    pub(crate) foreign: Vec<String>,
}

/// What carries the runtime's id though the state does not know it: what a run created (`ours`), and what none did.
pub(crate) struct Unknown {
    pub(crate) ours: Vec<String>,
    pub(crate) foreign: Vec<String>,
}

impl Runner {
    /// After a destroy: deletes what still carries the runtime's id and a run of it created, trying what is still
    /// in use again after the transient pauses; returns what it deleted and what it left alone (each at most
    /// [`MAX_LISTED_LEFTOVERS`]), or fails naming what a run created and is left.
    pub(crate) async fn sweep_leftovers<C: RuntimeResources>(
        &self,
        cloud: &C,
        runtime_id: Uuid,
        creations: &Creations,
        signals: &mut Signals,
    ) -> Result<Swept> {
        let mut retrying = Retrying::new(self.settings.transient_retries);
        let mut swept = Vec::new();
        let Unknown { ours: mut left, mut foreign } = split::<C>(cloud.left_of_runtime(runtime_id).await?, creations);
        while !left.is_empty() {
            swept.extend(delete_leftovers(cloud, &left).await?);
            Unknown { ours: left, foreign } = split::<C>(cloud.left_of_runtime(runtime_id).await?, creations);
            if left.is_empty() {
                break;
            }
            // Only what the runner deletes is worth a pause (one still in use, or still listed just after).
            let worth_a_pause = left.iter().any(|name| C::leftover(name).is_some());
            if !worth_a_pause || !retrying.pause_while_in_use(left.len(), signals).await? {
                return Err(Error::Leftovers { resources: left });
            }
        }
        swept.truncate(MAX_LISTED_LEFTOVERS);
        foreign.truncate(MAX_LISTED_LEFTOVERS);
        Ok(Swept { swept, foreign })
    }
}

/// After an apply: what carries `runtime_id` and still exists though the state's `inventory` does not name it, by
/// whether a run created it; each at most [`MAX_LISTED_LEFTOVERS`].
pub(crate) async fn orphans<C: RuntimeResources>(
    cloud: &C,
    runtime_id: Uuid,
    creations: &Creations,
    inventory: &[String],
) -> Result<Unknown> {
    let mut unknown = cloud.left_of_runtime(runtime_id).await?;
    unknown.retain(|name| !inventory::names(inventory, name));
    let Unknown { mut ours, mut foreign } = split::<C>(unknown, creations);
    ours.truncate(MAX_LISTED_LEFTOVERS);
    foreign.truncate(MAX_LISTED_LEFTOVERS);
    Ok(Unknown { ours, foreign })
}

/// `names` parted by whether a run of the runtime created each.
fn split<C: RuntimeResources>(names: Vec<String>, creations: &Creations) -> Unknown {
    let (ours, foreign) = names.into_iter().partition(|name| C::created_by_a_run(name, creations));
    Unknown { ours, foreign }
}

/// Deletes, in dependency order, each of `names` of a kind the runner deletes; returns the names deleted. One the
/// cloud refuses stays, for the next round.
async fn delete_leftovers<C: RuntimeResources>(cloud: &C, names: &[String]) -> Result<Vec<String>> {
    let mut leftovers: Vec<(C::Leftover, &String)> =
        names.iter().filter_map(|name| Some((C::leftover(name)?, name))).collect();
    leftovers.sort();
    let mut deleted = Vec::new();
    for (leftover, name) in leftovers {
        match cloud.delete(&leftover).await? {
            Deleted::Yes => {
                tracing::warn!(resource = %name, "deleted a leftover no state knew");
                deleted.push(name.clone());
            }
            Deleted::Refused(why) => tracing::info!(resource = %name, why, "a leftover is still in use"),
        }
    }
    Ok(deleted)
}

impl RuntimeResources for AwsSession {
    type Leftover = AwsLeftover;

    fn leftover(arn: &str) -> Option<AwsLeftover> {
        AwsLeftover::of_arn(arn)
    }

    /// A kind the runner deletes by its type and id; any other by the ARN or the id it ends with, whatever the
    /// type, since that only decides whether it is named as left or as foreign.
    fn created_by_a_run(arn: &str, creations: &Creations) -> bool {
        match AwsLeftover::of_arn(arn) {
            Some(leftover) => {
                let (resource_type, id) = leftover.terraform_identity();
                creations.holds(resource_type, &id)
            }
            None => creations.holds_id(arn) || creations.holds_id(arn.rsplit(['/', ':']).next().unwrap_or(arn)),
        }
    }

    /// The ARNs of the resources of this region that carry `runtime_id`'s tag and still exist.
    async fn left_of_runtime(&self, runtime_id: Uuid) -> Result<Vec<String>> {
        let mut left = Vec::new();
        for arn in self.tagged_with_runtime(runtime_id).await? {
            if self.still_exists(&arn).await? {
                left.push(arn);
            }
        }
        Ok(left)
    }

    async fn delete(&self, leftover: &AwsLeftover) -> Result<Deleted> {
        match leftover {
            AwsLeftover::EksNodegroup { cluster, nodegroup } => self.delete_eks_nodegroup(cluster, nodegroup).await,
            AwsLeftover::EksCluster(name) => self.delete_eks_cluster(name).await,
            AwsLeftover::Instance(id) => self.ec2_delete("TerminateInstances", "InstanceId.1", id).await,
            AwsLeftover::NatGateway(id) => self.ec2_delete("DeleteNatGateway", "NatGatewayId", id).await,
            AwsLeftover::ElasticIp(id) => self.ec2_delete("ReleaseAddress", "AllocationId", id).await,
            AwsLeftover::InternetGateway(id) => self.delete_internet_gateway(id).await,
            AwsLeftover::SecurityGroup(id) => self.ec2_delete("DeleteSecurityGroup", "GroupId", id).await,
            AwsLeftover::Subnet(id) => self.ec2_delete("DeleteSubnet", "SubnetId", id).await,
            AwsLeftover::RouteTable(id) => self.ec2_delete("DeleteRouteTable", "RouteTableId", id).await,
            AwsLeftover::Vpc(id) => self.ec2_delete("DeleteVpc", "VpcId", id).await,
        }
    }
}

impl AwsSession {
    /// A deleted NAT gateway and a terminated instance stay listed (and described) for about an hour after they
    /// are gone, in AWS as in moto.
    async fn still_exists(&self, arn: &str) -> Result<bool> {
        let state = match AwsLeftover::of_arn(arn) {
            Some(AwsLeftover::NatGateway(id)) => {
                self.described("DescribeNatGateways", "NatGatewayId.1", &id, "state").await?
            }
            Some(AwsLeftover::Instance(id)) => {
                let state = self.described("DescribeInstances", "InstanceId.1", &id, "instanceState").await?;
                state.and_then(|state| elements(&state, "name").first().map(|name| (*name).to_owned()))
            }
            _ => return Ok(true),
        };
        Ok(state.is_some_and(|state| state != "deleted" && state != "terminated"))
    }

    /// The first `element` of the description of `id`; `None` when it is not found.
    async fn described(
        &self,
        action: &'static str,
        parameter: &str,
        id: &str,
        element: &str,
    ) -> Result<Option<String>> {
        match self.ec2(action, &[(parameter, id)]).await? {
            Ok(answer) => Ok(elements(&answer, element).first().map(|text| (*text).to_owned())),
            Err(refusal) if refusal.is_not_found() => Ok(None),
            Err(refusal) => {
                Err(Error::Aws { operation: action, message: format!("{}: {}", refusal.code, refusal.message) })
            }
        }
    }

    /// The ARNs of the resources of this region that carry `runtime_id`'s tag.
    async fn tagged_with_runtime(&self, runtime_id: Uuid) -> Result<Vec<String>> {
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

    async fn ec2_delete(&self, action: &'static str, parameter: &str, id: &str) -> Result<Deleted> {
        Ok(deleted_unless_refused(self.ec2(action, &[(parameter, id)]).await?))
    }

    /// An internet gateway is detached from its VPCs first.
    async fn delete_internet_gateway(&self, id: &str) -> Result<Deleted> {
        let described = match self.ec2("DescribeInternetGateways", &[("InternetGatewayId.1", id)]).await? {
            Ok(described) => described,
            Err(refusal) => return Ok(deleted_unless_refused(Err(refusal))),
        };
        for vpc in elements(&described, "vpcId") {
            let detached = self.ec2("DetachInternetGateway", &[("InternetGatewayId", id), ("VpcId", vpc)]).await?;
            if let Deleted::Refused(why) = deleted_unless_refused(detached) {
                return Ok(Deleted::Refused(why));
            }
        }
        self.ec2_delete("DeleteInternetGateway", "InternetGatewayId", id).await
    }

    async fn delete_eks_nodegroup(&self, cluster: &str, nodegroup: &str) -> Result<Deleted> {
        let eks = aws_sdk_eks::Client::new(self.sdk_config());
        match eks.delete_nodegroup().cluster_name(cluster).nodegroup_name(nodegroup).send().await {
            Ok(_) => Ok(Deleted::Yes),
            Err(error) if error.as_service_error().is_some_and(|error| error.is_resource_not_found_exception()) => {
                Ok(Deleted::Yes)
            }
            Err(error) if error.as_service_error().is_some_and(|error| error.is_resource_in_use_exception()) => {
                Ok(Deleted::Refused(error.to_string()))
            }
            Err(error) => Err(aws_error("eks:DeleteNodegroup", error)),
        }
    }

    async fn delete_eks_cluster(&self, name: &str) -> Result<Deleted> {
        let eks = aws_sdk_eks::Client::new(self.sdk_config());
        match eks.delete_cluster().name(name).send().await {
            Ok(_) => Ok(Deleted::Yes),
            Err(error) if error.as_service_error().is_some_and(|error| error.is_resource_not_found_exception()) => {
                Ok(Deleted::Yes)
            }
            Err(error) if error.as_service_error().is_some_and(|error| error.is_resource_in_use_exception()) => {
                Ok(Deleted::Refused(error.to_string()))
            }
            Err(error) => Err(aws_error("eks:DeleteCluster", error)),
        }
    }
}

/// A refusal because the resource is gone is a deletion; any other is a refusal to try again later.
fn deleted_unless_refused(answer: std::result::Result<String, Ec2Refusal>) -> Deleted {
    match answer {
        Ok(_) => Deleted::Yes,
        Err(refusal) if refusal.is_not_found() => Deleted::Yes,
        Err(refusal) => Deleted::Refused(format!("{}: {}", refusal.code, refusal.message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_the_modules_create_are_read_from_their_arns_and_deleted_dependents_first() {
        let arns = [
            "arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-0a1b",
            "arn:aws:ec2:eu-west-1:123456789012:subnet/subnet-0c2d",
            "arn:aws:eks:eu-west-1:123456789012:cluster/prod",
            "arn:aws:ec2:eu-west-1:123456789012:instance/i-0e3f",
            "arn:aws:eks:eu-west-1:123456789012:nodegroup/prod/workers/6ac7a1e2-2b1c-4f6e-9a9b-0e5c2c7d1f00",
            "arn:aws:ec2:eu-west-1:123456789012:internet-gateway/igw-0a9b",
        ];
        let mut sweepable: Vec<_> = arns.iter().map(|arn| AwsLeftover::of_arn(arn).unwrap()).collect();
        sweepable.sort();
        assert_eq!(
            sweepable,
            [
                AwsLeftover::EksNodegroup { cluster: "prod".into(), nodegroup: "workers".into() },
                AwsLeftover::EksCluster("prod".into()),
                AwsLeftover::Instance("i-0e3f".into()),
                AwsLeftover::InternetGateway("igw-0a9b".into()),
                AwsLeftover::Subnet("subnet-0c2d".into()),
                AwsLeftover::Vpc("vpc-0a1b".into()),
            ]
        );
    }

    #[test]
    fn a_tagged_resource_is_ours_only_when_a_run_recorded_creating_it_by_its_type_and_id() {
        let creations: Creations = serde_json::from_value(serde_json::json!({"created": [
            {"type": "aws_instance", "id": "i-0e3f", "address": "aws_instance.node[0]"},
            {"type": "aws_eks_node_group", "id": "prod:workers", "address": "aws_eks_node_group.workers"},
            {"type": "aws_iam_role", "id": "prod", "address": "aws_iam_role.cluster"},
            {"type": "aws_ebs_volume", "id": "vol-0a1b", "address": "aws_ebs_volume.data"},
        ]}))
        .unwrap();
        let ours = |arn: &str| AwsSession::created_by_a_run(arn, &creations);
        assert!(ours("arn:aws:ec2:eu-west-1:123456789012:instance/i-0e3f"));
        assert!(ours("arn:aws:eks:eu-west-1:123456789012:nodegroup/prod/workers/6ac7a1e2-2b1c-4f6e-9a9b-0e5c2c7d1f00"));
        assert!(ours("arn:aws:ec2:eu-west-1:123456789012:volume/vol-0a1b"), "a kind it does not delete, by its id");
        assert!(!ours("arn:aws:ec2:eu-west-1:123456789012:instance/i-0f4a"), "another instance");
        assert!(!ours("arn:aws:eks:eu-west-1:123456789012:cluster/prod"), "a cluster named as the recorded role");
        assert!(!ours("arn:aws:ec2:eu-west-1:123456789012:vpc/vpc-0a1b"));
    }

    #[test]
    fn other_kinds_are_not_deleted_but_named() {
        for arn in [
            "arn:aws:elasticloadbalancing:eu-west-1:123456789012:loadbalancer/net/k8s-ingress/50dc6c495c0c9188",
            "arn:aws:ec2:eu-west-1:123456789012:launch-template/lt-0a1b",
            "arn:aws:s3:::kubeopera-state",
            "not an arn",
        ] {
            assert_eq!(AwsLeftover::of_arn(arn), None, "{arn}");
        }
    }
}
