"""moto's server with the fixes the Terraform tests need: gaps of moto 5.2.5 where real AWS accepts a request or
answers differently.

Each fix is a small patch of moto functions, applied before the server starts; none changes what a module asks
for. Started by `MotoServer::start` (src/moto.rs) as `python moto_shim.py -H 127.0.0.1 -p PORT`.

1. Security group rules for protocols without ports. AWS accepts an ingress rule with protocol "4" (IP in IP,
   which Calico uses) and no ports; moto converts the absent ports with int(None) and answers 500. Here a rule
   of a protocol other than TCP, UDP and ICMP(v6) keeps its ports unset, as AWS shows it.
2. The access configuration of an EKS cluster. AWS's DescribeCluster returns `accessConfig` with the
   `authenticationMode` given at creation (CONFIG_MAP when none is given; AWS does not return
   `bootstrapClusterCreatorAdminPermissions`), and UpdateClusterConfig changes it; moto returns no `accessConfig`
   (the provider then plans to replace the cluster).
3. EKS node groups as created. AWS returns no `remoteAccess` for a node group created without one (moto invents
   the SSH key `eksKeypair`), the `updateConfig` given at creation or `{"maxUnavailable": 1}` (moto keeps none),
   and, when no version is given, the cluster's Kubernetes version with the latest AMI release of it (moto: 1.19).
4. EKS updates. AWS answers UpdateClusterConfig and UpdateNodegroupConfig with an update (`type`, `params` as AWS
   names them) that DescribeUpdate (`GET /clusters/{name}/updates/{updateId}?nodegroupName=`) then returns;
   moto has no DescribeUpdate, and answers UpdateClusterConfig with the cluster. Here every update is applied at
   once, recorded on its cluster or node group with status "Successful", and DescribeUpdate finds it. As on AWS,
   UpdateClusterConfig keeps the VPC settings a request leaves out (moto drops them).
5. EKS version updates, which moto lacks. UpdateClusterVersion (`POST /clusters/{name}/updates`) moves the
   control plane one minor version up (AWS refuses any other step); UpdateNodegroupVersion
   (`POST /clusters/{name}/node-groups/{nodegroupName}/update-version`) moves a node group to the given version
   (default: the cluster's, never above it), release version (default: the latest of that version) and launch
   template version (of the template the group was created with; default: the template's default version).
   Both answer with a "VersionUpdate" that DescribeUpdate returns (4).
6. Auto Scaling instance refreshes, which moto lacks: StartInstanceRefresh, DescribeInstanceRefreshes and
   CancelInstanceRefresh (the provider starts one when a group's launch template changes, cancelling an active one
   first, and waits for a cancelled one to end). As on AWS, a group has at most one active refresh (another Start
   is refused with InstanceRefreshInProgress; Cancel without one gives ActiveInstanceRefreshNotFound), and a
   DesiredConfiguration becomes the group's. Here a refresh completes at once: the group's InService instances
   (protected ones only with ScaleInProtectedInstances "Refresh", with SkipMatching only those not already from
   the target launch template version) are terminated and as many launched from the group's current launch
   template version, and the refresh is "Successful" at 100 percent. As on AWS, an instance reports the launch
   template version it was launched from (moto: the template's default version, whatever the group's).
7. Descriptions of security group rules that reference a group. AWS returns the description given at creation
   for every rule; moto keeps a referencing rule's description with the group it references and returns none,
   so every plan after the first wants to set it again.
8. User data of a new launch template version. AWS launches instances from any version; moto keeps the user data
   of a version created by CreateLaunchTemplateVersion undecoded, and launching from it fails an assertion (500):
   an Auto Scaling Group on such a version could never grow again (a wake-up, a raised minimum). Here it is
   parsed as moto parses that of CreateLaunchTemplate.
9. Idempotent EKS creation. AWS treats a CreateCluster or CreateNodegroup that repeats the `clientRequestToken` of
   the one that created the resource as the same request and answers with that resource; moto refuses it as
   ResourceInUseException. The AWS SDK retries a request whose answer it did not get (a slow answer under load),
   with the same token, so the provider's apply then failed on a node group it had just created.

Beyond the fixes, one test hook: the error answers a test asks for (`MotoServer::start_answering`). The
environment variable MOTO_SHIM_FAULTS holds a JSON list of `{"action", "code", "message", "times"}`: the next
`times` requests of that action are answered with that error, serialised as the service answers its own errors
(a quota reached, a throttled request, an access denied), and never reach moto's backend.
"""

import json
import os
import sys
import threading

from moto.autoscaling.exceptions import AutoscalingClientError
from moto.autoscaling.exceptions import ValidationError as AutoScalingValidationError
from moto.autoscaling.models import AutoScalingBackend, FakeAutoScalingGroup, InstanceState
from moto.autoscaling.responses import AutoScalingResponse
from moto.core.exceptions import ServiceException
from moto.core.responses import ActionResult, BaseResponse
from moto.core.utils import utcnow
from moto.core.types import Base64EncodedString
from moto.ec2.models import security_groups
from moto.ec2.models.launch_templates import LaunchTemplate
from moto.ec2.utils import parse_user_data
from moto.eks import urls as eks_urls
from moto.eks.exceptions import InvalidParameterException, ResourceNotFoundException
from moto.eks.models import EKSBackend, Nodegroup
from moto.eks.responses import EKSResponse
from moto.moto_api._internal import mock_random as random

# 1. Security group rules for protocols without ports.

_PORTED_PROTOCOLS = {"tcp", "6", "udp", "17", "icmp", "1", "icmpv6", "58", "-1", "all"}
_original_rule_init = security_groups.SecurityGroupRule.__init__


def _rule_init(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs):
    portless = (
        ip_protocol is not None
        and str(ip_protocol).lower() not in _PORTED_PROTOCOLS
        and from_port is None
        and to_port is None
    )
    if not portless:
        _original_rule_init(self, ec2_backend, ip_protocol, group_id, from_port, to_port, *args, **kwargs)
        return
    # moto skips the port conversion only for "-1"; the protocol is restored right after.
    _original_rule_init(self, ec2_backend, "-1", group_id, from_port, to_port, *args, **kwargs)
    self.ip_protocol = str(ip_protocol)


security_groups.SecurityGroupRule.__init__ = _rule_init

# 7. Descriptions of security group rules that reference a group.

security_groups.SecurityGroupRule.description = property(
    lambda self: self.ip_range.get("Description") or self.source_group.get("Description")
)

# 9. Idempotent EKS creation (used by 2 and 3, which wrap the creations).


def _repeated_creation(existing, response):
    """`existing` when the request repeats the token that created it (a retry of that creation), else None."""
    token = response._get_param("clientRequestToken")
    if existing is not None and token and existing.client_request_token == token:
        return existing
    return None


# 2. The access configuration of an EKS cluster (UpdateClusterConfig changes it: 4).

_original_create_cluster = EKSResponse.create_cluster


def _create_cluster(self):
    repeated = _repeated_creation(self.eks_backend.clusters.get(self._get_param("name")), self)
    if repeated is not None:
        return ActionResult({"cluster": repeated})
    result = _original_create_cluster(self)
    requested = self._get_param("accessConfig") or {}
    result.result["cluster"].access_config = {"authenticationMode": requested.get("authenticationMode", "CONFIG_MAP")}
    return result


EKSResponse.create_cluster = _create_cluster

# 3. EKS node groups as created.

_original_nodegroup_init = Nodegroup.__init__


def _nodegroup_init(self, *args, **kwargs):
    _original_nodegroup_init(self, *args, **kwargs)
    if not kwargs.get("remote_access"):
        self.remote_access = None
    if not kwargs.get("update_config"):
        self.update_config = {"maxUnavailable": 1}


Nodegroup.__init__ = _nodegroup_init


def _latest_release(version):
    """The release version AWS picks for `version` when none is asked for: its latest AMI, here one of today."""
    return f"{version}.0-{utcnow():%Y%m%d}"


_original_create_nodegroup = EKSResponse.create_nodegroup


def _create_nodegroup(self):
    cluster = self.eks_backend.clusters.get(self._get_param("name"))
    existing = cluster.nodegroups.get(self._get_param("nodegroupName")) if cluster is not None else None
    repeated = _repeated_creation(existing, self)
    if repeated is not None:
        return ActionResult({"nodegroup": repeated})
    result = _original_create_nodegroup(self)
    nodegroup = result.result["nodegroup"]
    # moto's backend takes no updateConfig.
    if self._get_param("updateConfig"):
        nodegroup.update_config = self._get_param("updateConfig")
    if not self._get_param("version"):
        nodegroup.version = self.eks_backend.clusters[nodegroup.cluster_name].version
    if not self._get_param("releaseVersion"):
        nodegroup.release_version = _latest_release(nodegroup.version)
    return result


EKSResponse.create_nodegroup = _create_nodegroup

# 4. EKS updates: recorded on their cluster or node group, returned by DescribeUpdate.

_UPDATES = "_shim_updates"


def _record_update(owner, update_type, params):
    update = {
        "id": str(random.uuid4()),
        "status": "Successful",
        "type": update_type,
        "params": params,
        "createdAt": utcnow(),
        "errors": [],
    }
    owner.__dict__.setdefault(_UPDATES, {})[update["id"]] = update
    return update


def _param(param_type, value):
    return {"type": param_type, "value": value if isinstance(value, str) else json.dumps(value)}


def describe_update(self, name, update_id, nodegroup_name=None):
    if nodegroup_name:
        owner = self.describe_nodegroup(cluster_name=name, nodegroup_name=nodegroup_name)
    else:
        owner = self.describe_cluster(name=name)
    update = owner.__dict__.get(_UPDATES, {}).get(update_id)
    if update is None:
        raise ResourceNotFoundException(
            clusterName=name,
            nodegroupName=nodegroup_name,
            fargateProfileName=None,
            addonName=None,
            message=f"No update found for ID: {update_id}",
        )
    return update


def _describe_update_response(self):
    update = self.eks_backend.describe_update(
        name=self._get_param("name"),
        update_id=self._get_param("updateId"),
        nodegroup_name=self._get_param("nodegroupName"),
    )
    return ActionResult({"update": update})


EKSBackend.describe_update = describe_update
EKSResponse.describe_update = _describe_update_response

# The update type and parameters AWS reports for an UpdateClusterConfig request (one kind of change each).
_CLUSTER_CONFIG_UPDATES = [
    ("accessConfig", "AccessConfigUpdate", {"authenticationMode": "AuthenticationMode"}),
    ("logging", "LoggingUpdate", {"clusterLogging": "ClusterLogging"}),
    (
        "resourcesVpcConfig",
        "EndpointAccessUpdate",
        {
            "endpointPublicAccess": "EndpointPublicAccess",
            "endpointPrivateAccess": "EndpointPrivateAccess",
            "publicAccessCidrs": "PublicAccessCidrs",
        },
    ),
    ("resourcesVpcConfig", "VpcConfigUpdate", {"subnetIds": "Subnets", "securityGroupIds": "SecurityGroups"}),
    ("upgradePolicy", "UpgradePolicyUpdate", None),
    ("zonalShiftConfig", "ZonalShiftConfigUpdate", None),
    ("computeConfig", "AutoModeUpdate", None),
    ("storageConfig", "AutoModeUpdate", None),
    ("kubernetesNetworkConfig", "AutoModeUpdate", None),
    ("remoteNetworkConfig", "RemoteNetworkConfigUpdate", None),
]

_original_update_cluster_config = EKSResponse.update_cluster_config


def _update_cluster_config(self):
    name = self._get_param("name")
    cluster = self.eks_backend.clusters.get(name)
    vpc_config_before = dict(cluster.resources_vpc_config or {}) if cluster else {}
    cluster = _original_update_cluster_config(self).result["cluster"]
    requested_vpc_config = self._get_param("resourcesVpcConfig")
    if requested_vpc_config:
        cluster.resources_vpc_config = {**vpc_config_before, **requested_vpc_config}
    access_config = self._get_param("accessConfig") or {}
    if access_config.get("authenticationMode"):
        cluster.access_config = {**getattr(cluster, "access_config", {}), **access_config}

    update_type, params = "ConfigUpdate", []
    for key, candidate_type, param_types in _CLUSTER_CONFIG_UPDATES:
        requested = self._get_param(key)
        if not requested:
            continue
        if param_types is None:
            update_type, params = candidate_type, [_param(key[0].upper() + key[1:], requested)]
            break
        params = [_param(param_types[k], v) for k, v in requested.items() if k in param_types]
        if params:
            update_type = candidate_type
            break
    return ActionResult({"update": _record_update(cluster, update_type, params)})


EKSResponse.update_cluster_config = _update_cluster_config

# Parameters of an UpdateNodegroupConfig request as AWS names them in the update.
_NODEGROUP_CONFIG_PARAMS = {
    "labels": {"addOrUpdateLabels": "LabelsToAdd", "removeLabels": "LabelsToRemove"},
    "taints": {"addOrUpdateTaints": "TaintsToAdd", "removeTaints": "TaintsToRemove"},
    "scaling_config": {"minSize": "MinSize", "maxSize": "MaxSize", "desiredSize": "DesiredSize"},
    "update_config": {"maxUnavailable": "MaxUnavailable", "maxUnavailablePercentage": "MaxUnavailablePercentage"},
    "node_repair_config": {"enabled": "NodeRepairEnabled"},
}

_original_update_nodegroup_config = EKSBackend.update_nodegroup_config


def _update_nodegroup_config(self, cluster_name, nodegroup_name, **kwargs):
    update = _original_update_nodegroup_config(self, cluster_name, nodegroup_name, **kwargs)
    update["params"] = [
        _param(param_type, kwargs[argument][key])
        for argument, param_types in _NODEGROUP_CONFIG_PARAMS.items()
        for key, param_type in param_types.items()
        if (kwargs.get(argument) or {}).get(key) is not None
    ]
    nodegroup = self.clusters[cluster_name].nodegroups[nodegroup_name]
    nodegroup.__dict__.setdefault(_UPDATES, {})[update["id"]] = update
    return update


EKSBackend.update_nodegroup_config = _update_nodegroup_config

# 5. EKS version updates.


def _minor_version(version):
    try:
        major, minor = (int(part) for part in str(version).split("."))
    except ValueError:
        raise InvalidParameterException(message=f"Unsupported Kubernetes version: {version}")
    return major, minor


def update_cluster_version(self, name, version):
    cluster = self.describe_cluster(name=name)
    (major, minor), target = _minor_version(cluster.version), _minor_version(version)
    if target != (major, minor + 1):
        raise InvalidParameterException(
            clusterName=name,
            message=f"Unsupported Kubernetes minor version update from {cluster.version} to {version}",
        )
    cluster.version = version
    params = [_param("Version", version), _param("PlatformVersion", cluster.platformVersion)]
    return _record_update(cluster, "VersionUpdate", params)


def update_nodegroup_version(
    self, cluster_name, nodegroup_name, version=None, release_version=None, launch_template=None, force=False
):
    nodegroup = self.describe_nodegroup(cluster_name=cluster_name, nodegroup_name=nodegroup_name)
    cluster = self.clusters[cluster_name]
    version = version or cluster.version
    if _minor_version(version) > _minor_version(cluster.version):
        raise InvalidParameterException(
            clusterName=cluster_name,
            nodegroupName=nodegroup_name,
            message=f"Requested Nodegroup Kubernetes version {version} is above the cluster's {cluster.version}",
        )
    params = [_param("Version", version)]
    if launch_template:
        current = nodegroup.launch_template
        if not current:
            raise InvalidParameterException(
                clusterName=cluster_name,
                nodegroupName=nodegroup_name,
                message="A launch template can only be given for a node group created with one.",
            )
        if ("id" in launch_template) == ("name" in launch_template):
            raise InvalidParameterException(
                message="Either provide launch template ID or launch template name in the request."
            )
        if any(launch_template[key] != current.get(key) for key in ("id", "name") if key in launch_template):
            raise InvalidParameterException(
                clusterName=cluster_name,
                nodegroupName=nodegroup_name,
                message="The launch template of a node group cannot change, only its version.",
            )
        template_version = launch_template.get("version")
        if not template_version:
            from moto.ec2.models import ec2_backends

            ec2 = ec2_backends[self.account_id][self.region_name]
            template = ec2.describe_launch_templates(template_ids=[current["id"]])[0]
            template_version = str(template.default_version_number)
        current["version"] = template_version
        params += [_param("LaunchTemplateName", current.get("name")), _param("LaunchTemplateVersion", template_version)]
    nodegroup.version = version
    nodegroup.release_version = release_version or _latest_release(version)
    nodegroup.modified_at = utcnow()
    params.append(_param("ReleaseVersion", nodegroup.release_version))
    return _record_update(nodegroup, "VersionUpdate", params)


def _update_cluster_version_response(self):
    update = self.eks_backend.update_cluster_version(name=self._get_param("name"), version=self._get_param("version"))
    return ActionResult({"update": update})


def _update_nodegroup_version_response(self):
    update = self.eks_backend.update_nodegroup_version(
        cluster_name=self._get_param("name"),
        nodegroup_name=self._get_param("nodegroupName"),
        version=self._get_param("version"),
        release_version=self._get_param("releaseVersion"),
        launch_template=self._get_param("launchTemplate"),
        force=bool(self._get_param("force")),
    )
    return ActionResult({"update": update})


EKSBackend.update_cluster_version = update_cluster_version
EKSBackend.update_nodegroup_version = update_nodegroup_version
EKSResponse.update_cluster_version = _update_cluster_version_response
EKSResponse.update_nodegroup_version = _update_nodegroup_version_response

# The paths of the new operations, routed like moto's own (EKSResponse.dispatch finds the operation by method and
# path in the service model: POST .../updates is UpdateClusterVersion, GET .../updates/{updateId} DescribeUpdate).
eks_urls.url_paths.update(
    {
        "{0}/clusters/(?P<name>[^/]+)/updates$": eks_urls.response.dispatch,
        "{0}/clusters/(?P<name>[^/]+)/updates/(?P<updateId>[^/]+)$": eks_urls.response.dispatch,
        "{0}/clusters/(?P<name>[^/]+)/node-groups/(?P<nodegroupName>[^/]+)/update-version$": eks_urls.response.dispatch,
    }
)

# 6. Auto Scaling instance refreshes.

_LAUNCH_TEMPLATE = "_shim_launch_template"
_original_replace_instances = FakeAutoScalingGroup.replace_autoscaling_group_instances


def _replace_instances(self, count_needed, propagated_tags):
    before = len(self.instance_states)
    _original_replace_instances(self, count_needed, propagated_tags)
    template = self.ec2_launch_template
    if template is None:
        return
    number = str(template.get_version(self.launch_template_version).number)
    for state in self.instance_states[before:]:
        state.__dict__[_LAUNCH_TEMPLATE] = {
            "LaunchTemplateId": template.id,
            "LaunchTemplateName": template.name,
            "Version": number,
        }
        # moto launches with the template's default version; the data above comes from the group's version.
        state.instance.add_tags({"aws:ec2launchtemplate:version": number})


FakeAutoScalingGroup.replace_autoscaling_group_instances = _replace_instances

_original_state_launch_template = InstanceState.launch_template


def _state_launch_template(self):
    launched = self.__dict__.get(_LAUNCH_TEMPLATE)
    return dict(launched) if launched else _original_state_launch_template.fget(self)


InstanceState.launch_template = property(_state_launch_template)


_REFRESHES = "_shim_instance_refreshes"
_ACTIVE_REFRESH_STATUSES = {"Pending", "InProgress", "Cancelling", "Baking", "RollbackInProgress"}
# The preferences AWS reports for a refresh started without them.
_DEFAULT_REFRESH_PREFERENCES = {
    "MinHealthyPercentage": 90,
    "MaxHealthyPercentage": 100,
    "SkipMatching": False,
    "AutoRollback": False,
    "ScaleInProtectedInstances": "Ignore",
    "StandbyInstances": "Ignore",
}


def _refresh_group(backend, name):
    group = backend.autoscaling_groups.get(name)
    if group is None:
        raise AutoScalingValidationError(f"AutoScalingGroup name not found - AutoScalingGroup {name} not found")
    return group, group.__dict__.setdefault(_REFRESHES, [])


def start_instance_refresh(self, group_name, strategy=None, desired_configuration=None, preferences=None):
    group, refreshes = _refresh_group(self, group_name)
    if any(refresh["Status"] in _ACTIVE_REFRESH_STATUSES for refresh in refreshes):
        raise AutoscalingClientError(
            "InstanceRefreshInProgress",
            "An Instance Refresh is already in progress and blocks the execution of this Instance Refresh.",
        )
    preferences = {**_DEFAULT_REFRESH_PREFERENCES, **(preferences or {})}
    if desired_configuration:
        policy = desired_configuration.get("MixedInstancesPolicy")
        if policy:
            group.mixed_instances_policy = policy
            group._set_launch_configuration(None, {}, policy)
        elif desired_configuration.get("LaunchTemplate"):
            group.mixed_instances_policy = None
            group._set_launch_configuration(None, desired_configuration["LaunchTemplate"], None)
    target = None
    if group.ec2_launch_template is not None:
        number = group.ec2_launch_template.get_version(group.launch_template_version).number
        target = (group.ec2_launch_template.id, str(number))

    def replaced(state):
        if state.lifecycle_state != "InService":
            return False
        if state.protected_from_scale_in and preferences["ScaleInProtectedInstances"] != "Refresh":
            return False
        launched = state.launch_template or {}
        matching = target is not None and (launched.get("LaunchTemplateId"), str(launched.get("Version"))) == target
        return not (preferences["SkipMatching"] and matching)

    old = [state for state in group.instance_states if replaced(state)]
    refresh = {
        "InstanceRefreshId": str(random.uuid4()),
        "AutoScalingGroupName": group_name,
        "Status": "Successful",
        "StartTime": utcnow(),
        "PercentageComplete": 100,
        "InstancesToUpdate": 0,
        "ProgressDetails": {"LivePoolProgress": {"PercentageComplete": 100, "InstancesToUpdate": 0}},
        "Preferences": preferences,
        "Strategy": strategy or "Rolling",
    }
    if desired_configuration:
        refresh["DesiredConfiguration"] = desired_configuration
    if group.warm_pool is not None:
        refresh["ProgressDetails"]["WarmPoolProgress"] = {"PercentageComplete": 100, "InstancesToUpdate": 0}
    if old:
        group.instance_states = [state for state in group.instance_states if state not in old]
        self.ec2_backend.terminate_instances([state.instance.id for state in old])
        group.replace_autoscaling_group_instances(len(old), group.get_propagated_tags())
        self.update_attached_elbs(group_name)
        self.update_attached_target_groups(group_name)
    refresh["EndTime"] = utcnow()
    refreshes.append(refresh)
    return refresh["InstanceRefreshId"]


def describe_instance_refreshes(self, group_name, instance_refresh_ids=None):
    _, refreshes = _refresh_group(self, group_name)
    # Newest first, as AWS lists them.
    return [
        refresh
        for refresh in reversed(refreshes)
        if not instance_refresh_ids or refresh["InstanceRefreshId"] in instance_refresh_ids
    ]


def cancel_instance_refresh(self, group_name):
    _, refreshes = _refresh_group(self, group_name)
    for refresh in refreshes:
        if refresh["Status"] in _ACTIVE_REFRESH_STATUSES:
            refresh["Status"] = "Cancelled"
            refresh["EndTime"] = utcnow()
            return refresh["InstanceRefreshId"]
    raise AutoscalingClientError(
        "ActiveInstanceRefreshNotFound",
        f"No in progress or pending Instance Refresh found for Auto Scaling group {group_name}",
    )


def _start_instance_refresh_response(self):
    refresh_id = self.autoscaling_backend.start_instance_refresh(
        group_name=self._get_param("AutoScalingGroupName"),
        strategy=self._get_param("Strategy"),
        desired_configuration=self._get_param("DesiredConfiguration"),
        preferences=self._get_param("Preferences"),
    )
    return ActionResult({"InstanceRefreshId": refresh_id})


def _describe_instance_refreshes_response(self):
    refreshes = self.autoscaling_backend.describe_instance_refreshes(
        group_name=self._get_param("AutoScalingGroupName"),
        instance_refresh_ids=self._get_param("InstanceRefreshIds", []),
    )
    token = self._get_param("NextToken")
    ids = [refresh["InstanceRefreshId"] for refresh in refreshes]
    start = ids.index(token) + 1 if token in ids else 0
    max_records = self._get_int_param("MaxRecords") or 50
    page = refreshes[start : start + max_records]
    next_token = page[-1]["InstanceRefreshId"] if len(refreshes) > start + max_records else None
    return ActionResult({"InstanceRefreshes": page, "NextToken": next_token})


def _cancel_instance_refresh_response(self):
    refresh_id = self.autoscaling_backend.cancel_instance_refresh(
        group_name=self._get_param("AutoScalingGroupName")
    )
    return ActionResult({"InstanceRefreshId": refresh_id})


AutoScalingBackend.start_instance_refresh = start_instance_refresh
AutoScalingBackend.describe_instance_refreshes = describe_instance_refreshes
AutoScalingBackend.cancel_instance_refresh = cancel_instance_refresh
AutoScalingResponse.start_instance_refresh = _start_instance_refresh_response
AutoScalingResponse.describe_instance_refreshes = _describe_instance_refreshes_response
AutoScalingResponse.cancel_instance_refresh = _cancel_instance_refresh_response

# 8. User data of a new launch template version.

_original_create_version = LaunchTemplate.create_version


def _create_version(self, data, description):
    user_data = data.get("UserData")
    if user_data is not None and not isinstance(user_data, Base64EncodedString):
        data = {**data, "UserData": parse_user_data(user_data)}
    return _original_create_version(self, data, description)


LaunchTemplate.create_version = _create_version


# The error answers a test asks for.

_FAULTS = json.loads(os.environ.get("MOTO_SHIM_FAULTS", "[]"))
_FAULTS_LOCK = threading.Lock()
_original_call_action = BaseResponse.call_action


class _AskedForError(ServiceException):
    """Defined outside moto's packages, so that it is serialised in the format of the service that answers."""


def _take_fault(action):
    with _FAULTS_LOCK:
        for fault in _FAULTS:
            if fault["action"] == action and fault["times"] > 0:
                fault["times"] -= 1
                return fault
    return None


def _call_action(self):
    fault = _take_fault(self._get_action())
    if fault is None:
        return _original_call_action(self)
    return self.serialized(ActionResult(_AskedForError(fault["code"], fault["message"])))


BaseResponse.call_action = _call_action


if __name__ == "__main__":
    from moto.server import main

    sys.exit(main(sys.argv[1:]))

