variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string
}

variable "description" {
  description = "Free-text description of the cluster; becomes the description of the node group's launch template (cut to 255 characters)."
  type        = string
  default     = ""
}

variable "kubernetes_version" {
  description = "Kubernetes minor version of the control plane, for example 1.33 (EKS picks the platform version)."
  type        = string

  validation {
    condition     = can(regex("^1\\.[0-9]+$", var.kubernetes_version))
    error_message = "kubernetes_version must be a minor version such as 1.33."
  }
}

variable "vpc_id" {
  description = "VPC of the cluster; every subnet in subnet_ids must belong to it."
  type        = string
}

variable "subnet_ids" {
  description = "Subnets (in at least two availability zones) for the control plane's network interfaces and the nodes; private subnets with NAT."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 2
    error_message = "EKS needs subnets in at least two availability zones."
  }
}

variable "service_cidr" {
  description = "IPv4 range of the Services. Pods get VPC addresses from the VPC CNI, so there is no pod range."
  type        = string

  validation {
    condition     = can(cidrhost(var.service_cidr, 0))
    error_message = "service_cidr must be an IPv4 CIDR block."
  }
}

variable "endpoint_public_access_cidrs" {
  description = "IPv4 ranges that may reach the public API endpoint: terraform-runner's egress and host-cluster-controller's must be among them (both run outside the VPC; the nodes use the private endpoint). Required, with no default: the provisioner renders the request's list or the operator's APP_API_ALLOWED_CIDRS. Never empty, which EKS would read as 0.0.0.0/0."
  type        = list(string)

  validation {
    condition     = length(var.endpoint_public_access_cidrs) >= 1 && length(var.endpoint_public_access_cidrs) <= 20
    error_message = "endpoint_public_access_cidrs must list 1 to 20 IPv4 ranges."
  }

  validation {
    condition     = alltrue([for cidr in var.endpoint_public_access_cidrs : can(cidrnetmask(cidr))])
    error_message = "Every entry of endpoint_public_access_cidrs must be an IPv4 CIDR block such as 203.0.113.0/24."
  }
}

variable "node_instance_type" {
  description = "EC2 instance type of the managed node group (x86_64 or arm64; the AMI type follows it)."
  type        = string
}

variable "node_min_size" {
  description = "Minimum (and initial) size of the managed node group."
  type        = number
}

variable "worker_scaling" {
  description = <<-EOT
    How the run sets the node group's desired size: "initial" (a new group starts at its minimum), "keep_current"
    (what the cluster autoscaler set, kept within min..max), "zero" (hibernated: no nodes, minimum 0) or "minimum"
    (woken up: back at the minimum).
  EOT
  type        = string
  default     = "initial"

  validation {
    condition     = contains(["initial", "keep_current", "zero", "minimum"], var.worker_scaling)
    error_message = "worker_scaling must be initial, keep_current, zero or minimum."
  }
}

variable "node_max_size" {
  description = "Maximum size of the managed node group."
  type        = number
}

variable "node_disk_size_gb" {
  description = "Root volume size of the nodes, in GiB."
  type        = number
}

variable "runtime_id" {
  description = "ID of the provisioner's runtime this cluster belongs to, the value of its kubeopera.io/runtime-id tag: the node role may tag, change or delete nothing that carries another runtime's ID."
  type        = string

  validation {
    condition     = can(regex("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", var.runtime_id))
    error_message = "runtime_id must be a lowercase UUID."
  }
}

variable "tags" {
  description = "Tags for every resource of the module (and the nodes and volumes the node group starts)."
  type        = map(string)
  default     = {}
}
