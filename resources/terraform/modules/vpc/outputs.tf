output "vpc_id" {
  description = "ID of the VPC."
  value       = aws_vpc.this.id
}

output "vpc_cidr_block" {
  description = "IPv4 range of the VPC."
  value       = aws_vpc.this.cidr_block
}

output "public_subnet_ids" {
  description = "Public subnets, one per availability zone in the order of availability_zones."
  value       = aws_subnet.public[*].id
}

output "private_subnet_ids" {
  description = "Private subnets (routed through NAT), one per availability zone in the order of availability_zones."
  value       = aws_subnet.private[*].id
}

output "private_route_table_ids" {
  description = "Route tables of the private subnets, in the order of availability_zones."
  value       = aws_route_table.private[*].id
}

output "nat_gateway_public_ips" {
  description = "Addresses the private subnets reach the internet from (for allow lists elsewhere)."
  value       = aws_eip.nat[*].public_ip
}
