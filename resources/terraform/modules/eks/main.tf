# An EKS cluster with a managed node group in existing (private) subnets. The identity that applies this becomes
# cluster admin through an EKS access entry, which is how terraform-runner's kubeconfig (short-lived tokens for
# the same credentials) gets in.

data "aws_partition" "current" {}

data "aws_ec2_instance_type" "node" {
  instance_type = var.node_instance_type
}

# Read to check that the subnets are in vpc_id.
data "aws_subnet" "selected" {
  count = length(var.subnet_ids)

  id = var.subnet_ids[count.index]
}

locals {
  policy_prefix = "arn:${data.aws_partition.current.partition}:iam::aws:policy"
  ami_type      = contains(data.aws_ec2_instance_type.node.supported_architectures, "arm64") ? "AL2023_ARM_64_STANDARD" : "AL2023_x86_64_STANDARD"
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
# Managed node group

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

# The nodes' instance type, encrypted gp3 root volumes of the requested size and IMDSv2 only; EKS fills in the
# AMI and its bootstrap. A change here is a new template version, which the node group rolls out node by node
# (the node group's own instance_types could only change by replacing the group, all its nodes at once).
resource "aws_launch_template" "node" {
  name_prefix            = "${var.cluster_name}-node-"
  description            = var.description != "" ? substr(var.description, 0, 255) : null
  instance_type          = var.node_instance_type
  update_default_version = true

  block_device_mappings {
    device_name = "/dev/xvda"

    ebs {
      volume_type           = "gp3"
      volume_size           = var.node_disk_size_gb
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
    tags          = merge(var.tags, { Name = "${var.cluster_name}-node" })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, { Name = "${var.cluster_name}-node" })
  }

  tags = var.tags
}

# What the autoscaler has set, for a run that changes the existing group (an upgrade keeps it).
data "aws_eks_node_group" "current" {
  count = var.worker_scaling == "keep_current" ? 1 : 0

  cluster_name    = var.cluster_name
  node_group_name = "workers"
}

locals {
  # Hibernated, the group keeps its maximum (EKS needs at least 1) and nothing runs.
  node_min_size = var.worker_scaling == "zero" ? 0 : var.node_min_size
  # EKS refuses a desired size outside min..max, so the autoscaler's choice is kept within the new bounds.
  node_desired_size = (
    var.worker_scaling == "zero" ? 0 :
    var.worker_scaling == "keep_current" ? min(max(one(data.aws_eks_node_group.current[*].scaling_config[0].desired_size), var.node_min_size), var.node_max_size) :
    var.node_min_size
  )
}

resource "aws_eks_node_group" "this" {
  cluster_name    = aws_eks_cluster.this.name
  node_group_name = "workers"
  node_role_arn   = aws_iam_role.node.arn
  subnet_ids      = var.subnet_ids
  ami_type        = local.ami_type
  capacity_type   = "ON_DEMAND"
  # The nodes follow the control plane: an upgrade updates the cluster first (this reference orders it), then
  # rolls the nodes to its version (UpdateNodegroupVersion, max_unavailable at a time).
  version = aws_eks_cluster.this.version

  scaling_config {
    min_size     = local.node_min_size
    max_size     = var.node_max_size
    desired_size = local.node_desired_size
  }

  update_config {
    max_unavailable = 1
  }

  launch_template {
    id      = aws_launch_template.node.id
    version = aws_launch_template.node.latest_version
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.node_min_size <= var.node_max_size
      error_message = "node_min_size must not be above node_max_size."
    }
  }

  depends_on = [aws_iam_role_policy_attachment.node]
}
