variable "cluster_name" {
  description = "Name of the Kubernetes cluster; names the resources and goes into the kubernetes.io/cluster/<name> subnet tags that cloud controllers use to find the subnets."
  type        = string
}

variable "cidr_block" {
  description = "IPv4 range of the VPC, for example 10.0.0.0/16."
  type        = string

  validation {
    condition     = can(cidrhost(var.cidr_block, 0))
    error_message = "cidr_block must be an IPv4 CIDR block such as 10.0.0.0/16."
  }
}

variable "availability_zones" {
  description = "Availability zones to spread the subnets over: one public and one private subnet in each, in this order."
  type        = list(string)

  validation {
    condition     = length(var.availability_zones) >= 1 && length(var.availability_zones) <= 8
    error_message = "Between 1 and 8 availability zones are supported."
  }
}

variable "subnet_newbits" {
  description = "Bits added to the VPC prefix for each subnet (4 turns a /16 into /20 subnets). The VPC holds 2^newbits subnets: private ones first, public ones from the middle on."
  type        = number
  default     = 4

  validation {
    condition     = var.subnet_newbits >= 4 && var.subnet_newbits <= 12
    error_message = "subnet_newbits must be between 4 and 12, leaving room for 8 private and 8 public subnets."
  }
}

variable "single_nat_gateway" {
  description = "One NAT gateway for all private subnets (cheaper) instead of one per availability zone (survives the loss of a zone)."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource of the module."
  type        = map(string)
  default     = {}
}
