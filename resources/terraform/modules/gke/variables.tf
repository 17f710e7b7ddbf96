variable "cluster_name" {
  description = "Name of the GKE cluster."
  type        = string
}

variable "description" {
  description = "Free-text description of the cluster."
  type        = string
  default     = ""
}

variable "kubernetes_version" {
  description = "Minimum Kubernetes version of the control plane, as a prefix (1.34) GKE resolves to its newest patch; nodes follow the control plane."
  type        = string
}

variable "region" {
  description = "Region of the (regional) cluster."
  type        = string
}

variable "node_locations" {
  description = "Zones of the region the nodes run in."
  type        = list(string)

  validation {
    condition     = length(var.node_locations) >= 1
    error_message = "At least one zone is needed."
  }
}

variable "network" {
  description = "Self link of the VPC network."
  type        = string
}

variable "subnetwork" {
  description = "Self link of the subnetwork, which has the pods' and Services' secondary ranges."
  type        = string
}

variable "pods_range_name" {
  description = "Name of the subnetwork's secondary range for pods."
  type        = string
}

variable "services_range_name" {
  description = "Name of the subnetwork's secondary range for Services."
  type        = string
}

variable "machine_type" {
  description = "Compute Engine machine type of the nodes."
  type        = string
}

variable "total_min_node_count" {
  description = "Minimum number of nodes in the node pool, across all zones."
  type        = number
}

variable "worker_scaling" {
  description = <<-EOT
    How the run sets the node pool's size: "initial" (a new pool starts with its initial count), "keep_current"
    (what the cluster autoscaler set), "zero" (hibernated: no nodes, no autoscaling) or "minimum" (woken up:
    back at the minimum, autoscaling again).
  EOT
  type        = string
  default     = "initial"

  validation {
    condition     = contains(["initial", "keep_current", "zero", "minimum"], var.worker_scaling)
    error_message = "worker_scaling must be initial, keep_current, zero or minimum."
  }
}

variable "total_max_node_count" {
  description = "Maximum number of nodes in the node pool, across all zones."
  type        = number
}

variable "disk_size_gb" {
  description = "Boot disk size of the nodes, in GB."
  type        = number
}

variable "master_authorized_cidrs" {
  description = "IPv4 ranges that may reach the cluster's public API endpoint (master authorized networks): terraform-runner's egress and host-cluster-controller's must be among them; the nodes use the private endpoint. Required, with no default: the provisioner renders the request's list or the operator's APP_API_ALLOWED_CIDRS."
  type        = list(string)

  validation {
    condition     = length(var.master_authorized_cidrs) >= 1 && length(var.master_authorized_cidrs) <= 20
    error_message = "master_authorized_cidrs must list 1 to 20 IPv4 ranges."
  }

  validation {
    condition     = alltrue([for cidr in var.master_authorized_cidrs : can(cidrnetmask(cidr))])
    error_message = "Every entry of master_authorized_cidrs must be an IPv4 CIDR block such as 203.0.113.0/24."
  }
}

variable "labels" {
  description = "GCP labels for the cluster and the node pool's instances (already mapped onto GCP's label rules)."
  type        = map(string)
  default     = {}
}

variable "create_node_service_account" {
  description = "Run the nodes as a new least-privilege service account (logging, monitoring, image pulls). Needs permission to create service accounts and grant project roles; false runs them as the project's default compute service account."
  type        = bool
  default     = true
}
