output "control_plane_security_group_id" {
  description = "Security group of the control-plane nodes."
  value       = aws_security_group.control_plane.id
}

output "worker_security_group_id" {
  description = "Security group of the worker nodes."
  value       = aws_security_group.worker.id
}
