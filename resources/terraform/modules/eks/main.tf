# An EKS cluster with a managed node group per worker pool in existing (private) subnets. The identity that
# applies this becomes cluster admin through an EKS access entry, which is how terraform-runner's kubeconfig
# (short-lived tokens for the same credentials) gets in.

data "aws_partition" "current" {}

# Each pool's instance type, whose architecture picks the pool's AMI type.
data "aws_ec2_instance_type" "node" {
  for_each = toset([for pool in values(var.worker_pools) : pool.machine_type])

  instance_type = each.value
}

# Read to check that the subnets are in vpc_id.
data "aws_subnet" "selected" {
  count = length(var.subnet_ids)

  id = var.subnet_ids[count.index]
}

locals {
  policy_prefix = "arn:${data.aws_partition.current.partition}:iam::aws:policy"
  # The AMI type of each pool's instance type.
  ami_type = {
    for type, info in data.aws_ec2_instance_type.node : type => contains(info.supported_architectures, "arm64") ? "AL2023_ARM_64_STANDARD" : "AL2023_x86_64_STANDARD"
  }
}

# ---------------------------------------------------------------------------------------------------------------
# Control plane

data "aws_iam_policy_document" "cluster_assume_role" {
  statement {
    actions = ["sts:AssumeRole", "sts:TagSession"]

    principals {
      type        = "Service"
      identifiers = ["eks.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "cluster" {
  name_prefix        = "${substr(var.cluster_name, 0, 24)}-eks-"
  description        = "EKS control plane of cluster ${var.cluster_name}"
  assume_role_policy = data.aws_iam_policy_document.cluster_assume_role.json

  tags = var.tags
}

resource "aws_iam_role_policy_attachment" "cluster" {
  role       = aws_iam_role.cluster.name
  policy_arn = "${local.policy_prefix}/AmazonEKSClusterPolicy"
}

resource "aws_eks_cluster" "this" {
  name     = var.cluster_name
  version  = var.kubernetes_version
  role_arn = aws_iam_role.cluster.arn

  vpc_config {
    subnet_ids              = var.subnet_ids
    endpoint_private_access = true
    endpoint_public_access  = true
    public_access_cidrs     = var.endpoint_public_access_cidrs
  }

  kubernetes_network_config {
    service_ipv4_cidr = var.service_cidr
  }

  access_config {
    authentication_mode                         = "API_AND_CONFIG_MAP"
    bootstrap_cluster_creator_admin_permissions = true
  }

  enabled_cluster_log_types = ["api", "audit", "authenticator"]

  tags = var.tags

  lifecycle {
    precondition {
      condition     = alltrue([for subnet in data.aws_subnet.selected : subnet.vpc_id == var.vpc_id])
      error_message = "Every subnet in subnet_ids must belong to vpc_id."
    }
  }

  # The role must keep its policy until the cluster is gone, or EKS cannot clean up.
  depends_on = [aws_iam_role_policy_attachment.cluster]
}

# ---------------------------------------------------------------------------------------------------------------
# Managed node groups, one per worker pool

data "aws_iam_policy_document" "node_assume_role" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  name_prefix        = "${substr(var.cluster_name, 0, 24)}-node-"
  description        = "EKS nodes of cluster ${var.cluster_name}"
  assume_role_policy = data.aws_iam_policy_document.node_assume_role.json

  tags = var.tags
}

resource "aws_iam_role_policy_attachment" "node" {
  for_each = toset([
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    # Session Manager instead of SSH.
    "AmazonSSMManagedInstanceCore",
  ])

  role       = aws_iam_role.node.name
  policy_arn = "${local.policy_prefix}/${each.value}"

  # Granted only while the guard is attached: after it on creation, removed before it on destruction.
  depends_on = [aws_iam_role_policy.runtime_guard]
}

# The managed policies above let the nodes tag and change network interfaces anywhere in the account (the VPC CNI's
# needs) and read every SSM parameter (AmazonSSMManagedInstanceCore); the guard (policies/runtime-guard.json.tftpl)
# keeps the provisioner's tags, other runtimes' resources and every parameter but AWS's public ones out of a
# cluster's reach.
resource "aws_iam_role_policy" "runtime_guard" {
  name = "runtime-guard"
  role = aws_iam_role.node.id
  policy = templatefile("${path.module}/policies/runtime-guard.json.tftpl", {
    runtime_id = var.runtime_id
    partition  = data.aws_partition.current.partition
    # EKS nodes publish no SSM parameters and read none but AWS's public ones.
    runtime_parameters_arn = null
  })
}

locals {
  # The pool named default keeps the group clusters had before pools had names: EKS replaces a node group whose
  # name changes, all its nodes at once.
  node_group_names = {
    for name in keys(var.worker_pools) : name => name == "default" ? "workers" : "pool-${name}"
  }

  # The subnets of each pool's zones (subnet_ids[i] is in availability_zones[i]); every subnet for a pool without
  # zones.
  pool_subnet_ids = {
    for name, pool in var.worker_pools : name => [
      for index, subnet_id in var.subnet_ids : subnet_id
      if length(pool.zones) == 0 || contains(pool.zones, try(var.availability_zones[index], ""))
    ]
  }

  # The Name tag of each pool's instances and volumes; the default pool's as before pools had names (a change
  # would be a new launch template version, rolling every node).
  node_names = {
    for name in keys(var.worker_pools) : name => name == "default" ? "${var.cluster_name}-node" : "${var.cluster_name}-node-${name}"
  }

  # Kubernetes spells taint effects NoSchedule, the EKS API NO_SCHEDULE.
  taint_effects = {
    NoSchedule       = "NO_SCHEDULE"
    PreferNoSchedule = "PREFER_NO_SCHEDULE"
    NoExecute        = "NO_EXECUTE"
  }
}

# Each pool's instance type, encrypted gp3 root volumes of the requested size and IMDSv2 only; EKS fills in the
# AMI and its bootstrap. A change here is a new template version, which the node group rolls out node by node
# (the node group's own instance_types could only change by replacing the group, all its nodes at once).
resource "aws_launch_template" "node" {
  for_each = var.worker_pools

  # The default pool's prefix is the one its template had before pools had names (a new one would replace it).
  name_prefix            = each.key == "default" ? "${var.cluster_name}-node-" : "${var.cluster_name}-node-${each.key}-"
  description            = var.description != "" ? substr(var.description, 0, 255) : null
  instance_type          = each.value.machine_type
  update_default_version = true

  block_device_mappings {
    device_name = "/dev/xvda"

    ebs {
      volume_type           = "gp3"
      volume_size           = each.value.disk_size_gb
      encrypted             = true
      delete_on_termination = true
    }
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  tag_specifications {
    resource_type = "instance"
    tags          = merge(var.tags, { Name = local.node_names[each.key] })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, { Name = local.node_names[each.key] })
  }

  tags = var.tags
}

# The single node group's template before pools had names is the default pool's.
moved {
  from = aws_launch_template.node
  to   = aws_launch_template.node["default"]
}

# The node groups that exist, for an upgrade: a pool it adds has none yet and starts at its minimum.
data "aws_eks_node_groups" "existing" {
  count = var.worker_scaling == "keep_current" ? 1 : 0

  cluster_name = var.cluster_name
}

# What the autoscaler has set, for an upgrade of an existing group (it keeps it).
data "aws_eks_node_group" "current" {
  for_each = toset([
    for name in keys(var.worker_pools) : name
    if var.worker_scaling == "keep_current" && contains(try(data.aws_eks_node_groups.existing[0].names, []), local.node_group_names[name])
  ])

  cluster_name    = var.cluster_name
  node_group_name = local.node_group_names[each.key]
}

locals {
  node_scaling = {
    for name, pool in var.worker_pools : name => {
      # Hibernated, the group keeps its maximum (EKS needs at least 1) and nothing runs.
      min_size = var.worker_scaling == "zero" ? 0 : pool.min_size
      # EKS refuses a desired size outside min..max, so the autoscaler's choice is kept within the new bounds.
      desired_size = (
        var.worker_scaling == "zero" ? 0 :
        contains(keys(data.aws_eks_node_group.current), name) ? min(max(data.aws_eks_node_group.current[name].scaling_config[0].desired_size, pool.min_size), pool.max_size) :
        pool.min_size
      )
    }
  }
}

resource "aws_eks_node_group" "this" {
  for_each = var.worker_pools

  cluster_name    = aws_eks_cluster.this.name
  node_group_name = local.node_group_names[each.key]
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = local.pool_subnet_ids[each.key]
  ami_type        = local.ami_type[each.value.machine_type]
  capacity_type   = each.value.spot ? "SPOT" : "ON_DEMAND"
  # The nodes follow the control plane: an upgrade updates the cluster first (this reference orders it), then
  # rolls the nodes to its version (UpdateNodegroupVersion, max_unavailable at a time).
  version = aws_eks_cluster.this.version

  # The nodes register with these (EKS adds its own eks.amazonaws.com/ labels, the pool's group name among them).
  labels = each.value.labels

  dynamic "taint" {
    for_each = each.value.taints

    content {
      key    = taint.value.key
      value  = taint.value.value != "" ? taint.value.value : null
      effect = local.taint_effects[taint.value.effect]
    }
  }

  scaling_config {
    min_size     = local.node_scaling[each.key].min_size
    max_size     = each.value.max_size
    desired_size = local.node_scaling[each.key].desired_size
  }

  update_config {
    max_unavailable = 1
  }

  launch_template {
    id      = aws_launch_template.node[each.key].id
    version = aws_launch_template.node[each.key].latest_version
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = length(var.availability_zones) == length(var.subnet_ids)
      error_message = "availability_zones must name the zone of each subnet in subnet_ids, in the same order."
    }

    precondition {
      condition     = alltrue([for zone in each.value.zones : contains(var.availability_zones, zone)])
      error_message = "The zones of worker pool ${each.key} must be among availability_zones."
    }

    precondition {
      condition     = length(local.node_group_names[each.key]) <= 63
      error_message = "The name of worker pool ${each.key} is too long for an EKS node group name (pool-<name>, 63 characters)."
    }
  }

  depends_on = [aws_iam_role_policy_attachment.node]
}

# The single node group before pools had names is the default pool's, with the same name.
moved {
  from = aws_eks_node_group.this
  to   = aws_eks_node_group.this["default"]
}

# ---------------------------------------------------------------------------------------------------------------
# OpenID Connect sign-in: EKS configures its API server with the provider (the --oidc-* flags), and the tokens'
# users and groups get what the cluster's RBAC grants them. Every argument forces a new association; EKS accepts
# no "" for the optional ones, which take its defaults when null.

resource "aws_eks_identity_provider_config" "oidc" {
  count = var.oidc_identity_provider == null ? 0 : 1

  cluster_name = aws_eks_cluster.this.name

  oidc {
    identity_provider_config_name = "kubeopera-oidc"
    issuer_url                    = var.oidc_identity_provider.issuer_url
    client_id                     = var.oidc_identity_provider.client_id
    username_claim                = var.oidc_identity_provider.username_claim != "" ? var.oidc_identity_provider.username_claim : null
    username_prefix               = var.oidc_identity_provider.username_prefix != "" ? var.oidc_identity_provider.username_prefix : null
    groups_claim                  = var.oidc_identity_provider.groups_claim != "" ? var.oidc_identity_provider.groups_claim : null
    # A groups prefix without a groups claim prefixes nothing.
    groups_prefix   = var.oidc_identity_provider.groups_claim != "" && var.oidc_identity_provider.groups_prefix != "" ? var.oidc_identity_provider.groups_prefix : null
    required_claims = length(var.oidc_identity_provider.required_claims) > 0 ? var.oidc_identity_provider.required_claims : null
  }

  tags = var.tags
}
