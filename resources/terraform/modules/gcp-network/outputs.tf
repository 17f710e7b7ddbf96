output "network_self_link" {
  description = "Self link of the network."
  value       = google_compute_network.this.self_link
}

output "subnetwork_self_link" {
  description = "Self link of the subnetwork."
  value       = google_compute_subnetwork.this.self_link
}

output "pods_range_name" {
  description = "Name of the pods' secondary range of the subnetwork."
  value       = google_compute_subnetwork.this.secondary_ip_range[0].range_name
}

output "services_range_name" {
  description = "Name of the Services' secondary range of the subnetwork."
  value       = google_compute_subnetwork.this.secondary_ip_range[1].range_name
}
