variable "cluster_name" {
  description = "Name of the EKS cluster."
  type        = string
}

variable "description" {
  description = "Free-text description of the cluster; becomes the description of the node groups' launch templates (cut to 255 characters)."
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

variable "availability_zones" {
  description = "Availability zones of subnet_ids, in the same order (subnet_ids[i] is in availability_zones[i]): a pool's zones pick its subnets."
  type        = list(string)
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

variable "oidc_identity_provider" {
  description = <<-EOT
    An OpenID Connect provider whose ID tokens sign in to the API server (EKS takes one per cluster), or null for
    none. issuer_url is https; client_id the tokens' audience; username_claim and groups_claim the claims that name
    the user and their groups, "" for EKS's defaults (sub, and no groups); username_prefix and groups_prefix what
    EKS puts before them ("" for its defaults: for the username the issuer URL and #, unless the claim is email;
    "-" for none); required_claims the claims every token must carry, with their values. Any change replaces the
    association: sign-in through the provider stops for the minutes EKS takes to remove the old one and add the new.
  EOT
  type = object({
    issuer_url      = string
    client_id       = string
    username_claim  = string
    username_prefix = string
    groups_claim    = string
    groups_prefix   = string
    required_claims = map(string)
  })
  default = null

  validation {
    condition     = var.oidc_identity_provider == null ? true : startswith(var.oidc_identity_provider.issuer_url, "https://") && var.oidc_identity_provider.client_id != ""
    error_message = "oidc_identity_provider needs an https issuer_url and a client_id."
  }

  # EKS's limits on required claims.
  validation {
    condition = var.oidc_identity_provider == null ? true : alltrue([
      for claim, value in var.oidc_identity_provider.required_claims : length(claim) >= 1 && length(claim) <= 63 && length(value) >= 1 && length(value) <= 253
    ])
    error_message = "Every required claim of oidc_identity_provider needs a name of 1 to 63 characters and a value of 1 to 253."
  }
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
  description = "Tags for every resource of the module (and the nodes and volumes the node groups start)."
  type        = map(string)
  default     = {}
}
