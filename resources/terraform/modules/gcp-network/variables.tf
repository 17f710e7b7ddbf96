variable "name" {
  description = "Name of the network, its subnetwork, router and NAT (the cluster's name)."
  type        = string
}

variable "region" {
  description = "Region of the subnetwork, router and NAT."
  type        = string
}

variable "subnet_cidr" {
  description = "Primary IPv4 range of the subnetwork: the nodes' addresses."
  type        = string

  validation {
    condition     = can(cidrhost(var.subnet_cidr, 0))
    error_message = "subnet_cidr must be an IPv4 CIDR block."
  }
}

variable "pods_cidr" {
  description = "Secondary IPv4 range for the pods (VPC-native cluster)."
  type        = string

  validation {
    condition     = can(cidrhost(var.pods_cidr, 0))
    error_message = "pods_cidr must be an IPv4 CIDR block."
  }
}

variable "services_cidr" {
  description = "Secondary IPv4 range for the Services."
  type        = string

  validation {
    condition     = can(cidrhost(var.services_cidr, 0))
    error_message = "services_cidr must be an IPv4 CIDR block."
  }
}

variable "pods_range_name" {
  description = "Name of the pods' secondary range."
  type        = string
  default     = "pods"
}

variable "services_range_name" {
  description = "Name of the Services' secondary range."
  type        = string
  default     = "services"
}
