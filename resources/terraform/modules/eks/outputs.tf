output "cluster_name" {
  description = "Name of the EKS cluster."
  value       = aws_eks_cluster.this.name
}

output "cluster_endpoint" {
  description = "URL of the cluster's API server."
  value       = aws_eks_cluster.this.endpoint
}

output "cluster_certificate_authority_data" {
  description = "Base64-encoded CA certificate of the API server (public, not a secret)."
  value       = aws_eks_cluster.this.certificate_authority[0].data
}

output "cluster_arn" {
  description = "ARN of the EKS cluster."
  value       = aws_eks_cluster.this.arn
}

output "cluster_security_group_id" {
  description = "Security group EKS created for the control plane and the nodes."
  value       = aws_eks_cluster.this.vpc_config[0].cluster_security_group_id
}

output "node_group_arns" {
  description = "ARN of each worker pool's managed node group, by pool name."
  value       = { for name, group in aws_eks_node_group.this : name => group.arn }
}

output "node_group_arn" {
  description = "ARN of the managed node group of the pool named default (the single group before pools had names); null without such a pool."
  value       = try(aws_eks_node_group.this["default"].arn, null)
}

output "node_role_arn" {
  description = "IAM role of the nodes."
  value       = aws_iam_role.node.arn
}
