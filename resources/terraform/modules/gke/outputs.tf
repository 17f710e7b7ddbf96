output "cluster_name" {
  description = "Name of the GKE cluster."
  value       = google_container_cluster.this.name
}

output "endpoint" {
  description = "Address (IP, no scheme) of the cluster's public API endpoint."
  value       = google_container_cluster.this.endpoint
}

output "ca_certificate" {
  description = "Base64-encoded CA certificate of the API server (public, not a secret)."
  value       = google_container_cluster.this.master_auth[0].cluster_ca_certificate
}

output "location" {
  description = "Location (region) of the cluster, for gcloud and kubeconfig names."
  value       = google_container_cluster.this.location
}

output "node_pool_names" {
  description = "Name of each worker pool's GKE node pool, by pool name."
  value       = { for name, pool in google_container_node_pool.workers : name => pool.name }
}

output "node_pool_name" {
  description = "Name of the node pool of the pool named default (the single pool before pools had names); null without such a pool."
  value       = try(google_container_node_pool.workers["default"].name, null)
}

output "node_service_account_email" {
  description = "Service account the nodes run as (null: the default compute service account)."
  value       = one(google_service_account.nodes[*].email)
}
