variable "cluster_name" {
  description = "Name of the Kubernetes cluster: names and tags the resources (kubernetes.io/cluster/<name>) and is the AWS cloud controller manager's --cluster-name."
  type        = string
}

variable "description" {
  description = "Free-text description of the cluster; becomes the description of the workers' launch templates (cut to 255 characters)."
  type        = string
  default     = ""
}

variable "kubernetes_version" {
  description = "Kubernetes minor version (1.34) or full version (1.34.1); picks the pkgs.k8s.io package repository the nodes install kubeadm, kubelet and kubectl from."
  type        = string

  validation {
    condition     = can(regex("^1\\.[0-9]+(\\.[0-9]+)?$", var.kubernetes_version))
    error_message = "kubernetes_version must look like 1.34 or 1.34.1."
  }
}

variable "availability_zones" {
  description = "Availability zones of the subnets, in the same order as private_subnet_ids and public_subnet_ids; control-plane node i goes into zone i modulo their number, and a worker pool's zones pick its private subnets."
  type        = list(string)
}

variable "vpc_id" {
  description = "VPC of the cluster (the API load balancer's target group lives in it)."
  type        = string
}

variable "private_subnet_ids" {
  description = "Private subnets, one per availability zone, for the nodes."
  type        = list(string)
}

variable "public_subnet_ids" {
  description = "Public subnets, one per availability zone, for the internet-facing API load balancer (or the single control-plane node without one)."
  type        = list(string)
}

variable "pod_cidr" {
  description = "IPv4 range of the pods (kubeadm --pod-network-cidr; Calico picks it up from kubeadm's configuration)."
  type        = string

  validation {
    condition     = can(cidrhost(var.pod_cidr, 0))
    error_message = "pod_cidr must be an IPv4 CIDR block."
  }
}

variable "service_cidr" {
  description = "IPv4 range of the Services (kubeadm --service-cidr)."
  type        = string

  validation {
    condition     = can(cidrhost(var.service_cidr, 0))
    error_message = "service_cidr must be an IPv4 CIDR block."
  }
}

variable "control_plane_count" {
  description = "Number of control-plane nodes; node 0 runs kubeadm init, the others join one after another. An odd number keeps etcd's quorum."
  type        = number

  validation {
    condition     = var.control_plane_count >= 1 && var.control_plane_count <= 7 && floor(var.control_plane_count) == var.control_plane_count
    error_message = "control_plane_count must be a whole number from 1 to 7."
  }
}

variable "control_plane_instance_type" {
  description = "EC2 instance type of the control-plane nodes (x86_64 or arm64; the AMI follows it)."
  type        = string
}

variable "control_plane_disk_size_gb" {
  description = "Root volume size of the control-plane nodes, in GiB."
  type        = number
  default     = 50
}

variable "control_plane_security_group_id" {
  description = "Security group of the control-plane nodes."
  type        = string
}

variable "create_api_load_balancer" {
  description = "Put an internet-facing Network Load Balancer (TCP 6443) in front of every API server and advertise it as the cluster endpoint. Required with more than one control-plane node; without it the single node gets an Elastic IP."
  type        = bool
}

variable "worker_scaling" {
  description = <<-EOT
    How the run sets every pool's size: "initial" (a new cluster: each pool starts at its minimum),
    "keep_current" (an upgrade: what the cluster autoscaler set, moved into the pool's new bounds by Auto Scaling
    itself), "zero" (hibernated: no workers, and the control-plane instances stopped) or "minimum" (woken up: the
    control plane started, each pool back at its own minimum).
  EOT
  type        = string
  default     = "initial"

  validation {
    condition     = contains(["initial", "keep_current", "zero", "minimum"], var.worker_scaling)
    error_message = "worker_scaling must be initial, keep_current, zero or minimum."
  }
}

variable "worker_pools" {
  description = <<-EOT
    The cluster's worker pools by name (a DNS label), each its own EKS managed node group, Auto Scaling Group or
    GKE node pool. The pool named "default" is the one clusters had before pools had names: it keeps that
    group's cloud name. Per pool: machine_type; min_size and max_size, the pool's totals across its zones;
    disk_size_gb; spot capacity or not (sized by worker_scaling); zones, a subset of the cluster's zones (empty: every zone of the cluster);
    labels and taints, the Kubernetes node labels and taints its nodes register with (effects spelled the
    Kubernetes way, NoSchedule, PreferNoSchedule or NoExecute; a taint's value may be "").
  EOT
  type = map(object({
    machine_type = string
    min_size     = number
    max_size     = number
    disk_size_gb = number
    spot         = bool
    zones        = list(string)
    labels       = map(string)
    taints = list(object({
      key    = string
      value  = string
      effect = string
    }))
  }))

  validation {
    condition     = length(var.worker_pools) >= 1
    error_message = "worker_pools must name at least one pool."
  }

  validation {
    condition     = alltrue([for name in keys(var.worker_pools) : can(regex("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", name))])
    error_message = "Every pool name must be a DNS label: lowercase letters, digits and '-', at most 63 characters."
  }

  validation {
    condition = alltrue([
      for pool in values(var.worker_pools) :
      floor(pool.min_size) == pool.min_size && floor(pool.max_size) == pool.max_size &&
      pool.min_size >= 0 && pool.max_size >= 1 && pool.min_size <= pool.max_size
    ])
    error_message = "Every pool's min_size and max_size must be whole numbers with 0 <= min_size <= max_size and max_size >= 1."
  }

  validation {
    condition = alltrue(flatten([
      for pool in values(var.worker_pools) : [
        for taint in pool.taints : contains(["NoSchedule", "PreferNoSchedule", "NoExecute"], taint.effect)
      ]
    ]))
    error_message = "Every taint's effect must be NoSchedule, PreferNoSchedule or NoExecute."
  }

  # The renderer has checked these already; checked here too because they end up unquoted in kubelet flags and
  # in the cloud's APIs.
  validation {
    condition = alltrue(flatten([
      for pool in values(var.worker_pools) : [
        for pair in concat([for key, value in pool.labels : [key, value]], [for taint in pool.taints : [taint.key, taint.value]]) : (
          can(regex("^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$", pair[0])) &&
          can(regex("^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$", pair[1]))
        )
      ]
    ]))
    error_message = "Label and taint keys and values must follow the Kubernetes label rules."
  }
}

variable "authentication_config" {
  description = "The API servers' structured authentication configuration (kube-apiserver --authentication-config): an apiserver.config.k8s.io AuthenticationConfiguration as compact JSON, with the JWT (OIDC) issuers to trust. Not secret. A change reaches the running API servers within about two minutes, without a restart (not its anonymous section, which kube-apiserver takes only at start; nor on control-plane nodes bootstrapped before this variable existed, which never read it)."
  type        = string
  default     = "{\"apiVersion\":\"apiserver.config.k8s.io/v1beta1\",\"kind\":\"AuthenticationConfiguration\",\"jwt\":[]}"

  validation {
    condition     = try(jsondecode(var.authentication_config).kind == "AuthenticationConfiguration", false)
    error_message = "authentication_config must be an AuthenticationConfiguration as JSON."
  }

  # The size of an advanced SSM parameter, which carries it to the nodes.
  validation {
    condition     = length(var.authentication_config) <= 8192
    error_message = "authentication_config must be at most 8 KB."
  }
}

variable "worker_security_group_id" {
  description = "Security group of the worker nodes."
  type        = string
}

variable "ssm_parameter_prefix" {
  description = "SSM Parameter Store path /kubeopera/<runtime_id>/ under which the nodes publish their join credentials, join markers and the admin kubeconfig; each creation of the cluster uses its own sub-path below it. The nodes may use no other parameter but AWS's public ones."
  type        = string

  validation {
    condition     = can(regex("^(/[A-Za-z0-9_.-]+)+/?$", var.ssm_parameter_prefix))
    error_message = "ssm_parameter_prefix must be an absolute SSM path such as /kubeopera/<id>/."
  }
}

variable "ami_id" {
  description = "AMI of the nodes. Null means the latest Amazon Linux 2023 for the instance type's architecture (the bootstrap scripts use dnf, so another AMI must be compatible)."
  type        = string
  default     = null
}

variable "calico_version" {
  description = "Calico release whose manifest the first control-plane node applies."
  type        = string
  default     = "v3.30.3"
}

variable "aws_cloud_controller_manager_version" {
  description = "Image tag of the AWS cloud controller manager; null means v<kubernetes minor>.0."
  type        = string
  default     = null
}

variable "bootstrap_poll_interval_seconds" {
  description = "How often a node waiting for another one (a control-plane join, the join credentials) polls SSM."
  type        = number
  default     = 10
}

variable "bootstrap_timeout_seconds" {
  description = "How long a node waits for the node before it, or for the join credentials, before its bootstrap fails."
  type        = number
  default     = 3600
}

variable "runtime_id" {
  description = "ID of the provisioner's runtime this cluster belongs to, the value of its kubeopera.io/runtime-id tag: the control-plane role changes and deletes only what carries this ID or the cluster's own tag, and no node role anything that carries another runtime's ID."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", var.runtime_id))
    error_message = "runtime_id must be a lowercase UUID."
  }
}

variable "tags" {
  description = "Tags for every resource of the module (and the instances and volumes it starts)."
  type        = map(string)
  default     = {}
}

variable "root_device_name" {
  description = "Root device of the AMI (/dev/xvda on Amazon Linux 2023); the workers' launch templates size it."
  type        = string
  default     = "/dev/xvda"
}
