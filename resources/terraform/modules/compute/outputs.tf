output "kubeconfig_ssm_parameter" {
  description = "SSM parameter (SecureString) the first control-plane node publishes the admin kubeconfig to, with the server set to api_endpoint. It appears only once the control plane has booted: poll it."
  value       = "${local.ssm_path}/kubeconfig"
}

output "api_endpoint" {
  description = "URL of the Kubernetes API: the Network Load Balancer with create_api_load_balancer, otherwise the single control-plane node's Elastic IP."
  value       = "https://${local.api_host}:${local.api_port}"
}

output "ssm_parameter_path" {
  description = "SSM path of everything the nodes publish for this creation of the cluster (join credentials, join markers, kubeconfig); delete it after a destroy."
  value       = local.ssm_path
}

output "control_plane_instance_ids" {
  description = "EC2 instance IDs of the control-plane nodes, node 0 first."
  value       = aws_instance.control_plane[*].id
}

output "control_plane_private_ips" {
  description = "Private addresses of the control-plane nodes, node 0 first."
  value       = aws_instance.control_plane[*].private_ip
}

output "worker_autoscaling_group_names" {
  description = "Name of each worker pool's Auto Scaling Group, by pool name."
  value       = { for name, group in aws_autoscaling_group.worker : name => group.name }
}

output "worker_autoscaling_group_name" {
  description = "Name of the Auto Scaling Group of the pool named default (the single group before pools had names); null without such a pool."
  value       = try(aws_autoscaling_group.worker["default"].name, null)
}
