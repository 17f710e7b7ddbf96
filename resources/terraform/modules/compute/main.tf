# A self-bootstrapping kubeadm cluster on EC2: control-plane instances and an Auto Scaling Group of workers per
# worker pool, set up entirely from their user data (no SSH). The user data is a cloud-config that writes the
# bash scripts in scripts/ and an env file with the node's parameters, then runs the script for the node's role:
#
#   - control-plane node 0 runs `kubeadm init --upload-certs`, installs Calico and the AWS cloud controller
#     manager, and publishes the join credentials and the admin kubeconfig to SSM Parameter Store;
#   - control-plane node i > 0 waits until node i-1 has published its "joined" marker, then runs
#     `kubeadm join --control-plane`: the etcd members join one at a time, in order;
#   - workers wait for node 0's credentials and run `kubeadm join`, their kubelet registering with the pool's
#     node labels and taints.
#
# Everything the nodes publish lives under <ssm_parameter_prefix>/<generation>, where the generation is new
# every time the cluster is created, so parameters left by an earlier cluster of the same runtime are never
# taken for this one's.

data "aws_region" "current" {}

data "aws_partition" "current" {}

data "aws_caller_identity" "current" {}

locals {
  # The runtime's SSM path (/kubeopera/<runtime-id>), which only its nodes may use
  # (policies/runtime-guard.json.tftpl), and this creation's below it.
  runtime_ssm_path = trimsuffix(var.ssm_parameter_prefix, "/")
  runtime_ssm_arn  = "arn:${data.aws_partition.current.partition}:ssm:${data.aws_region.current.region}:${data.aws_caller_identity.current.account_id}:parameter${local.runtime_ssm_path}"
  ssm_path         = "${local.runtime_ssm_path}/${terraform_data.generation.id}"
  ssm_arn          = "${local.runtime_ssm_arn}/${terraform_data.generation.id}"

  # Load balancer and target group names: at most 32 characters, unique per cluster.
  short_id = substr(sha1("${var.cluster_name}${var.ssm_parameter_prefix}"), 0, 20)

  cluster_tag = { "kubernetes.io/cluster/${var.cluster_name}" = "owned" }

  api_port = 6443

  # The two kinds of node, each with its IAM role and instance profile.
  node_roles = toset(["control-plane", "worker"])
  # What clients (and the kubeconfig) use: the load balancer, or the single node's Elastic IP.
  api_host = var.create_api_load_balancer ? one(aws_lb.api[*].dns_name) : one(aws_eip.api[*].public_ip)

  kubernetes_minor = join(".", slice(split(".", var.kubernetes_version), 0, 2))
  ccm_version      = coalesce(var.aws_cloud_controller_manager_version, "v${local.kubernetes_minor}.0")
}

# A new ID every time the cluster is created (and only then).
resource "terraform_data" "generation" {}

# ---------------------------------------------------------------------------------------------------------------
# AMIs: the latest Amazon Linux 2023 for each instance type's architecture, unless ami_id is set.

# The control plane's instance type and every pool's.
data "aws_ec2_instance_type" "node" {
  for_each = toset(concat([var.control_plane_instance_type], [for pool in values(var.worker_pools) : pool.machine_type]))

  instance_type = each.value
}

locals {
  architecture = {
    for name, type in data.aws_ec2_instance_type.node : name => contains(type.supported_architectures, "arm64") ? "arm64" : "x86_64"
  }
}

data "aws_ssm_parameter" "al2023" {
  for_each = toset(var.ami_id == null ? values(local.architecture) : [])

  name = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-${each.value}"
}

locals {
  # The AMI of each instance type.
  ami = {
    for type, architecture in local.architecture : type => var.ami_id != null ? var.ami_id : try(data.aws_ssm_parameter.al2023[architecture].insecure_value, null)
  }
}

# ---------------------------------------------------------------------------------------------------------------
# User data

locals {
  script_dir = "/opt/kubeopera/bootstrap"
  env_path   = "/etc/kubeopera/bootstrap.env"

  common_env = {
    CLUSTER_NAME          = var.cluster_name
    AWS_REGION            = data.aws_region.current.region
    SSM_PREFIX            = local.ssm_path
    API_ENDPOINT          = local.api_host
    API_PORT              = tostring(local.api_port)
    KUBERNETES_VERSION    = var.kubernetes_version
    POLL_INTERVAL_SECONDS = tostring(var.bootstrap_poll_interval_seconds)
    WAIT_TIMEOUT_SECONDS  = tostring(var.bootstrap_timeout_seconds)
  }

  control_plane_envs = [
    for index in range(var.control_plane_count) : merge(local.common_env, {
      NODE_ROLE           = "control-plane"
      NODE_INDEX          = tostring(index)
      CONTROL_PLANE_COUNT = tostring(var.control_plane_count)
      # The address kubeadm puts into every kubeconfig; empty means the first node's private address.
      CONTROL_PLANE_ENDPOINT = var.create_api_load_balancer ? one(aws_lb.api[*].dns_name) : ""
      POD_CIDR               = var.pod_cidr
      SERVICE_CIDR           = var.service_cidr
      CALICO_VERSION         = var.calico_version
      AWS_CCM_VERSION        = local.ccm_version
    })
  ]
  # Each pool's workers, with its node labels and taints in the kubelet flags' own formats: key=value,... and
  # key=value:Effect,... (key:Effect without a value). Left out when empty, so that a pool without any (the
  # default pool of a cluster from before pools had names) keeps its user data, and its nodes.
  worker_envs = {
    for name, pool in var.worker_pools : name => merge(
      local.common_env,
      { NODE_ROLE = "worker" },
      length(pool.labels) == 0 ? {} : { NODE_LABELS = join(",", [for key, value in pool.labels : "${key}=${value}"]) },
      length(pool.taints) == 0 ? {} : {
        NODE_TAINTS = join(",", [for taint in pool.taints : taint.value == "" ? "${taint.key}:${taint.effect}" : "${taint.key}=${taint.value}:${taint.effect}"])
      },
    )
  }

  # KEY='value' lines for bash to source; a single quote inside a value becomes '\''.
  control_plane_env_files = [
    for env in local.control_plane_envs : join("", [for key in sort(keys(env)) : "${key}='${replace(env[key], "'", "'\\''")}'\n"])
  ]
  worker_env_files = {
    for name, env in local.worker_envs : name => join("", [for key in sort(keys(env)) : "${key}='${replace(env[key], "'", "'\\''")}'\n"])
  }

  scripts = {
    control_plane = ["lib.sh", "control-plane.sh"]
    worker        = ["lib.sh", "worker.sh"]
  }
  script_files = {
    for role, names in local.scripts : role => [
      for name in names : {
        path        = "${local.script_dir}/${name}"
        permissions = "0755"
        owner       = "root:root"
        encoding    = "gz+b64"
        content     = base64gzip(file("${path.module}/scripts/${name}"))
      }
    ]
  }

  control_plane_user_data = [
    for env_file in local.control_plane_env_files : "#cloud-config\n${yamlencode({
      write_files = concat(local.script_files.control_plane, [{
        path        = local.env_path
        permissions = "0600"
        owner       = "root:root"
        encoding    = "b64"
        content     = base64encode(env_file)
      }])
      runcmd = [["${local.script_dir}/control-plane.sh", local.env_path]]
    })}"
  ]

  worker_user_data = {
    for name, env_file in local.worker_env_files : name => "#cloud-config\n${yamlencode({
      write_files = concat(local.script_files.worker, [{
        path        = local.env_path
        permissions = "0600"
        owner       = "root:root"
        encoding    = "b64"
        content     = base64encode(env_file)
      }])
      runcmd = [["${local.script_dir}/worker.sh", local.env_path]]
    })}"
  }
}

# ---------------------------------------------------------------------------------------------------------------
# IAM: instance profiles for both roles. No SSH key: Session Manager (AmazonSSMManagedInstanceCore) is the way in.

data "aws_iam_policy_document" "ec2_assume_role" {
  statement {
    actions = ["sts:AssumeRole"]

    principals {
      type        = "Service"
      identifiers = ["ec2.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "node" {
  for_each = local.node_roles

  name_prefix        = "${substr(var.cluster_name, 0, 24)}-${each.key == "control-plane" ? "cp" : "worker"}-"
  description        = "Kubernetes ${each.key} nodes of cluster ${var.cluster_name}"
  assume_role_policy = data.aws_iam_policy_document.ec2_assume_role.json

  tags = var.tags
}

# Keyed by the role names, never `for_each = aws_iam_role.node`: that reads each whole role object, including its
# deprecated `managed_policy_arns`.
resource "aws_iam_role_policy_attachment" "session_manager" {
  for_each = local.node_roles

  role       = aws_iam_role.node[each.key].name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"
}

resource "aws_iam_instance_profile" "node" {
  for_each = local.node_roles

  name_prefix = aws_iam_role.node[each.key].name_prefix
  role        = aws_iam_role.node[each.key].name

  tags = var.tags
}

# The roles' permissions (policies/control-plane.json.tftpl, policies/worker.json.tftpl) and, beside them on both,
# the guard (policies/runtime-guard.json.tftpl) that keeps the provisioner's tags and other runtimes' resources out
# of a cluster's reach. Templates rather than policy documents in HCL, so the module tests evaluate exactly these
# documents with an IAM policy simulator.
resource "aws_iam_role_policy" "node" {
  for_each = {
    "control-plane" = templatefile("${path.module}/policies/control-plane.json.tftpl", {
      ssm_arn      = local.ssm_arn
      cluster_name = var.cluster_name
      runtime_id   = var.runtime_id
    })
    "worker" = templatefile("${path.module}/policies/worker.json.tftpl", { ssm_arn = local.ssm_arn })
  }

  name   = "kubeadm-${each.key}"
  role   = aws_iam_role.node[each.key].id
  policy = each.value

  # Granted only while the guard is attached: after it on creation, removed before it on destruction.
  depends_on = [aws_iam_role_policy.runtime_guard]
}

resource "aws_iam_role_policy" "runtime_guard" {
  for_each = local.node_roles

  name = "runtime-guard"
  role = aws_iam_role.node[each.key].id
  policy = templatefile("${path.module}/policies/runtime-guard.json.tftpl", {
    runtime_id             = var.runtime_id
    partition              = data.aws_partition.current.partition
    runtime_parameters_arn = local.runtime_ssm_arn
  })

  lifecycle {
    # The guard leaves the nodes the parameters under this path only: it must be this runtime's.
    precondition {
      condition     = local.runtime_ssm_path == "/kubeopera/${var.runtime_id}"
      error_message = "ssm_parameter_prefix must be /kubeopera/<runtime_id>/."
    }
  }
}

# ---------------------------------------------------------------------------------------------------------------
# The API endpoint: a Network Load Balancer in front of every API server, or the single node's Elastic IP.

resource "aws_lb" "api" {
  count = var.create_api_load_balancer ? 1 : 0

  name                             = "k8s-api-${local.short_id}"
  load_balancer_type               = "network"
  internal                         = false
  subnets                          = var.public_subnet_ids
  enable_cross_zone_load_balancing = true

  tags = merge(var.tags, local.cluster_tag, { Name = "${var.cluster_name}-api" })
}

resource "aws_lb_target_group" "api" {
  count = var.create_api_load_balancer ? 1 : 0

  name        = "k8s-api-${local.short_id}"
  port        = local.api_port
  protocol    = "TCP"
  target_type = "instance"
  vpc_id      = var.vpc_id
  # Without client IP preservation a control-plane node reaching the API through the load balancer can be sent
  # to itself (with it, such hairpinned connections time out).
  preserve_client_ip   = "false"
  deregistration_delay = "30"

  health_check {
    protocol            = "TCP"
    port                = "traffic-port"
    interval            = 10
    healthy_threshold   = 2
    unhealthy_threshold = 2
  }

  tags = merge(var.tags, local.cluster_tag, { Name = "${var.cluster_name}-api" })
}

resource "aws_lb_listener" "api" {
  count = var.create_api_load_balancer ? 1 : 0

  load_balancer_arn = aws_lb.api[0].arn
  port              = local.api_port
  protocol          = "TCP"

  default_action {
    type             = "forward"
    target_group_arn = aws_lb_target_group.api[0].arn
  }

  tags = var.tags
}

resource "aws_lb_target_group_attachment" "api" {
  count = var.create_api_load_balancer ? var.control_plane_count : 0

  target_group_arn = aws_lb_target_group.api[0].arn
  target_id        = aws_instance.control_plane[count.index].id
  port             = local.api_port
}

resource "aws_eip" "api" {
  count = var.create_api_load_balancer ? 0 : 1

  domain = "vpc"

  tags = merge(var.tags, { Name = "${var.cluster_name}-api" })
}

resource "aws_eip_association" "api" {
  count = var.create_api_load_balancer ? 0 : 1

  allocation_id = aws_eip.api[0].id
  instance_id   = aws_instance.control_plane[0].id
}

# ---------------------------------------------------------------------------------------------------------------
# Control-plane nodes

# The API servers' structured authentication configuration: each control-plane node writes it to the file its
# kube-apiserver runs with before kubeadm init or join, and its upgrade timer keeps that file in step with this
# parameter (kube-apiserver reloads the file by itself). AWS moves it to the advanced tier only when it is over 4 KB.
resource "aws_ssm_parameter" "authentication_config" {
  name           = "${local.ssm_path}/control-plane/authentication-config"
  type           = "String"
  tier           = "Intelligent-Tiering"
  insecure_value = var.authentication_config
  tags           = var.tags
}

resource "aws_instance" "control_plane" {
  count = var.control_plane_count

  ami           = local.ami[var.control_plane_instance_type]
  instance_type = var.control_plane_instance_type
  # Behind the load balancer the nodes are private and spread over the zones; a single node without one sits in a
  # public subnet (with a public address from launch until its Elastic IP is attached).
  subnet_id                   = var.create_api_load_balancer ? var.private_subnet_ids[count.index % length(var.private_subnet_ids)] : var.public_subnet_ids[0]
  associate_public_ip_address = !var.create_api_load_balancer
  vpc_security_group_ids      = [var.control_plane_security_group_id]
  iam_instance_profile        = aws_iam_instance_profile.node["control-plane"].name
  user_data                   = local.control_plane_user_data[count.index]

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  root_block_device {
    volume_type           = "gp3"
    volume_size           = var.control_plane_disk_size_gb
    encrypted             = true
    delete_on_termination = true

    tags = merge(var.tags, local.cluster_tag, { Name = "${var.cluster_name}-control-plane-${count.index}" })
  }

  tags = merge(var.tags, local.cluster_tag, {
    Name                     = "${var.cluster_name}-control-plane-${count.index}"
    "kubeopera.io/node-role" = "control-plane"
  })

  lifecycle {
    # A new AMI release or a change to the bootstrap must not replace running etcd members.
    ignore_changes = [ami, user_data]

    precondition {
      condition     = var.create_api_load_balancer || var.control_plane_count == 1
      error_message = "More than one control-plane node needs create_api_load_balancer = true."
    }

    precondition {
      condition     = length(var.private_subnet_ids) == length(var.availability_zones) && length(var.public_subnet_ids) == length(var.availability_zones)
      error_message = "private_subnet_ids and public_subnet_ids need one subnet per availability zone, in the order of availability_zones."
    }

    precondition {
      condition     = length(local.control_plane_user_data[count.index]) <= 16384
      error_message = "The control-plane user data is over EC2's 16 KB limit."
    }
  }

  # The nodes read it before kubeadm init or join (and wait for it, so this only spares them the wait).
  depends_on = [aws_ssm_parameter.authentication_config]
}

# ---------------------------------------------------------------------------------------------------------------
# Workers: a launch template and an Auto Scaling Group per worker pool

locals {
  # The private subnets of each pool's zones (private_subnet_ids[i] is in availability_zones[i]); every one for a
  # pool without zones.
  worker_subnet_ids = {
    for name, pool in var.worker_pools : name => [
      for index, subnet_id in var.private_subnet_ids : subnet_id
      if length(pool.zones) == 0 || contains(pool.zones, try(var.availability_zones[index], ""))
    ]
  }

  # The cluster autoscaler's node-template tags of each pool: a label's value, a taint's value:Effect (one per
  # key: the first taint of a key that has several effects). A key too long for a tag (128 characters) is left
  # out; the autoscaler then learns it only from a running node of the pool.
  autoscaler_node_templates = {
    for name, pool in var.worker_pools : name => {
      for key, values in merge(
        { for key, value in pool.labels : "k8s.io/cluster-autoscaler/node-template/label/${key}" => [value] },
        { for taint in pool.taints : "k8s.io/cluster-autoscaler/node-template/taint/${taint.key}" => "${taint.value}:${taint.effect}"... },
      ) : key => values[0] if length(key) <= 128
    }
  }

  # The Name tag of each pool's instances, volumes and group; the default pool's as before pools had names.
  worker_names = {
    for name in keys(var.worker_pools) : name => name == "default" ? "${var.cluster_name}-worker" : "${var.cluster_name}-worker-${name}"
  }
}

resource "aws_launch_template" "worker" {
  for_each = var.worker_pools

  # The default pool's prefix is the one its template had before pools had names (a new one would replace it).
  name_prefix            = each.key == "default" ? "${var.cluster_name}-worker-" : "${var.cluster_name}-worker-${each.key}-"
  description            = var.description != "" ? substr(var.description, 0, 255) : null
  image_id               = local.ami[each.value.machine_type]
  instance_type          = each.value.machine_type
  vpc_security_group_ids = [var.worker_security_group_id]
  user_data              = base64encode(local.worker_user_data[each.key])
  update_default_version = true

  iam_instance_profile {
    arn = aws_iam_instance_profile.node["worker"].arn
  }

  block_device_mappings {
    device_name = var.root_device_name

    ebs {
      volume_type           = "gp3"
      volume_size           = each.value.disk_size_gb
      encrypted             = true
      delete_on_termination = true
    }
  }

  # Spot workers are one-time requests: EC2 takes one back at two minutes' notice and the group replaces it.
  dynamic "instance_market_options" {
    for_each = each.value.spot ? [1] : []

    content {
      market_type = "spot"
    }
  }

  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 1
  }

  tag_specifications {
    resource_type = "instance"
    tags = merge(var.tags, local.cluster_tag, {
      Name                     = local.worker_names[each.key]
      "kubeopera.io/node-role" = "worker"
    })
  }

  tag_specifications {
    resource_type = "volume"
    tags          = merge(var.tags, local.cluster_tag, { Name = local.worker_names[each.key] })
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = length(local.worker_user_data[each.key]) <= 16384
      error_message = "The user data of worker pool ${each.key} is over EC2's 16 KB limit."
    }
  }
}

# The single worker template before pools had names is the default pool's.
moved {
  from = aws_launch_template.worker
  to   = aws_launch_template.worker["default"]
}

# The version the control plane runs: each control-plane node's upgrade timer upgrades it when this names a newer
# one, node 0 first (kubeadm upgrade apply), the others one at a time after it (kubeadm upgrade node), each
# publishing control-plane/<i>/upgraded/<version>; terraform-runner applies this first and waits for the last
# node's marker before the workers roll.
resource "aws_ssm_parameter" "upgrade_target" {
  name  = "${local.ssm_path}/control-plane/upgrade-target"
  type  = "String"
  value = var.kubernetes_version
  tags  = var.tags
}

# Hibernated, the control plane is stopped (its disks and addresses stay) and started again on wake-up, before
# the workers (which need it to rejoin); terraform-runner then waits until the API server answers.
resource "aws_ec2_instance_state" "control_plane" {
  count = var.control_plane_count

  instance_id = aws_instance.control_plane[count.index].id
  state       = var.worker_scaling == "zero" ? "stopped" : "running"
}

resource "aws_autoscaling_group" "worker" {
  for_each = var.worker_pools

  # The default pool's prefix is the one its group had before pools had names (a new one would replace it).
  name_prefix = each.key == "default" ? "${var.cluster_name}-worker-" : "${var.cluster_name}-worker-${each.key}-"
  # Hibernated, no worker runs; the maximum stays, so the recorded sizes are all a wake-up needs.
  min_size = var.worker_scaling == "zero" ? 0 : each.value.min_size
  max_size = each.value.max_size
  # Left out (null) for an upgrade: the group keeps what the cluster autoscaler set, and Auto Scaling itself
  # moves it into new bounds.
  desired_capacity    = var.worker_scaling == "keep_current" ? null : var.worker_scaling == "zero" ? 0 : each.value.min_size
  vpc_zone_identifier = local.worker_subnet_ids[each.key]
  health_check_type   = "EC2"
  # A spot worker EC2 is about to take back is replaced ahead of time.
  capacity_rebalance = each.value.spot

  launch_template {
    id      = aws_launch_template.worker[each.key].id
    version = aws_launch_template.worker[each.key].latest_version
  }

  # A new launch template version (machine type, disk, user data) rolls the pool's workers: replaced a few at a
  # time, at least 90 % of the group in service throughout. The control plane is never part of it.
  instance_refresh {
    strategy = "Rolling"

    preferences {
      min_healthy_percentage = 90
    }
  }

  # Tags of the group itself (the launch template tags the instances): the cluster autoscaler discovers the group
  # by the enabled and cluster tags, and learns from the node-template ones which labels and taints a node of
  # the pool will have, so that it can scale a pool up from zero for pods that need them.
  dynamic "tag" {
    for_each = merge(
      var.tags,
      {
        Name                                            = local.worker_names[each.key]
        "k8s.io/cluster-autoscaler/enabled"             = "true"
        "k8s.io/cluster-autoscaler/${var.cluster_name}" = "owned"
      },
      local.autoscaler_node_templates[each.key],
    )

    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = false
    }
  }

  # The pool's name, on the group and (from the group, not the launch template: a new template version would
  # roll the default pool's workers) on the instances it starts.
  tag {
    key                 = "kubeopera.io/worker-pool"
    value               = each.key
    propagate_at_launch = true
  }

  lifecycle {
    precondition {
      condition     = alltrue([for zone in each.value.zones : contains(var.availability_zones, zone)])
      error_message = "The zones of worker pool ${each.key} must be among availability_zones."
    }
  }

  # Woken up, workers start once the control plane runs again (hibernating, they stop after it: Terraform keeps
  # one order, and a stopped cluster has no work to drain anyway).
  depends_on = [aws_ec2_instance_state.control_plane]
}

# The single worker group before pools had names is the default pool's.
moved {
  from = aws_autoscaling_group.worker
  to   = aws_autoscaling_group.worker["default"]
}
