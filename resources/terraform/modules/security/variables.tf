variable "cluster_name" {
  description = "Name of the Kubernetes cluster; names the security groups and goes into their kubernetes.io/cluster/<name> tag."
  type        = string
}

variable "vpc_id" {
  description = "VPC the security groups belong to."
  type        = string
}

variable "vpc_cidr" {
  description = "IPv4 range of the VPC: load balancer health checks and NodePort traffic come from it."
  type        = string
}

variable "pod_cidr" {
  description = "IPv4 range of the pods (Calico's IP pool): pods reach the API server and kubelets from it."
  type        = string
}

variable "api_allowed_cidrs" {
  description = "IPv4 ranges outside the VPC that may reach the Kubernetes API on port 6443 (the single control-plane node's public address): terraform-runner's egress and host-cluster-controller's must be among them. Required, with no default: the provisioner renders the request's list or the operator's APP_API_ALLOWED_CIDRS. Behind the API load balancer (more than one control-plane node) connections arrive from the load balancer's addresses in the VPC, so this list does not narrow them (docs/security.md)."
  type        = list(string)

  validation {
    condition     = length(var.api_allowed_cidrs) >= 1 && length(var.api_allowed_cidrs) <= 20
    error_message = "api_allowed_cidrs must list 1 to 20 IPv4 ranges."
  }

  validation {
    condition     = alltrue([for cidr in var.api_allowed_cidrs : can(cidrnetmask(cidr))])
    error_message = "Every entry of api_allowed_cidrs must be an IPv4 CIDR block such as 203.0.113.0/24."
  }
}

variable "tags" {
  description = "Tags for every resource of the module."
  type        = map(string)
  default     = {}
}
