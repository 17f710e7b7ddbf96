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
  description = "Zones of the region the cluster's nodes run in; a worker pool runs in a subset of them (every one for a pool without zones)."
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

variable "worker_scaling" {
  description = <<-EOT
    How the run sets every pool's size: "initial" (a new cluster: each pool starts at its minimum), "keep_current"
    (an upgrade: what the cluster autoscaler set, kept within the pool's min..max; a pool the upgrade adds starts
    at its minimum), "zero" (hibernated: no nodes, minimum 0) or "minimum" (woken up: each pool back at its own
    minimum).
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
  description = "GCP labels for the cluster and the node pools' instances (already mapped onto GCP's label rules)."
  type        = map(string)
  default     = {}
}

variable "create_node_service_account" {
  description = "Run the nodes as a new least-privilege service account (logging, monitoring, image pulls). Needs permission to create service accounts and grant project roles; false runs them as the project's default compute service account."
  type        = bool
  default     = true
}
