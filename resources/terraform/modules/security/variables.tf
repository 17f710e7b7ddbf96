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
  description = "IPv4 ranges that may reach the Kubernetes API on port 6443 (through the load balancer or the single control-plane node's public address). terraform-runner and host-cluster-controller reach it from outside the VPC, so the default is open; the API server authenticates every request."
  type        = list(string)
  default     = ["0.0.0.0/0"]
}

variable "tags" {
  description = "Tags for every resource of the module."
  type        = map(string)
  default     = {}
}
