# A regional GKE cluster (VPC-native, private nodes, a public endpoint for the authorized networks only) without
# its default node pool, and a separately managed autoscaling node pool. Workload Identity is not enabled.

data "google_client_config" "current" {}

locals {
  project = data.google_client_config.current.project

  # The smallest per-zone start that reaches the total minimum; the autoscaler takes over from there.
  initial_node_count_per_zone = max(1, ceil(var.total_min_node_count / length(var.node_locations)))
}

resource "google_service_account" "nodes" {
  count = var.create_node_service_account ? 1 : 0

  account_id   = "gke-${substr(sha1(var.cluster_name), 0, 20)}"
  display_name = "Nodes of GKE cluster ${var.cluster_name}"
}

resource "google_project_iam_member" "nodes" {
  for_each = toset(var.create_node_service_account ? [
    "roles/logging.logWriter",
    "roles/monitoring.metricWriter",
    "roles/monitoring.viewer",
    "roles/stackdriver.resourceMetadata.writer",
    "roles/autoscaling.metricsWriter",
    "roles/artifactregistry.reader",
  ] : [])

  project = local.project
  role    = each.value
  member  = google_service_account.nodes[0].member
}

resource "google_container_cluster" "this" {
  name               = var.cluster_name
  description        = var.description
  location           = var.region
  node_locations     = var.node_locations
  min_master_version = var.kubernetes_version

  network         = var.network
  subnetwork      = var.subnetwork
  networking_mode = "VPC_NATIVE"

  ip_allocation_policy {
    cluster_secondary_range_name  = var.pods_range_name
    services_secondary_range_name = var.services_range_name
  }

  # The node pool below replaces the default one, which GKE insists on creating first.
  remove_default_node_pool = true
  initial_node_count       = 1

  release_channel {
    channel = "REGULAR"
  }

  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }

  # Only these ranges reach the public endpoint, and not Google Cloud's own public addresses (any project's Cloud
  # Build or Compute Engine).
  master_authorized_networks_config {
    gcp_public_cidrs_access_enabled = false

    dynamic "cidr_blocks" {
      for_each = var.master_authorized_cidrs

      content {
        cidr_block = cidr_blocks.value
      }
    }
  }

  resource_labels = var.labels

  # terraform-runner destroys clusters when their runtime is deleted.
  deletion_protection = false
}

resource "google_container_node_pool" "workers" {
  name           = "workers"
  cluster        = google_container_cluster.this.id
  location       = var.region
  node_locations = var.node_locations

  # Upgrades go the platform's way: the master first (the cluster above), then the pool to the master's exact
  # version, rolled with one surge node at a time and none taken away before its replacement is ready.
  version = google_container_cluster.this.master_version

  upgrade_settings {
    strategy        = "SURGE"
    max_surge       = 1
    max_unavailable = 0
  }

  initial_node_count = local.initial_node_count_per_zone
  # Set only to hibernate (no nodes) and to wake up (back at the minimum); otherwise the autoscaler's count stays.
  node_count = (
    var.worker_scaling == "zero" ? 0 :
    var.worker_scaling == "minimum" ? ceil(var.total_min_node_count / length(var.node_locations)) :
    null
  )

  # Hibernated, there is no autoscaler: it would start nodes for the system pods left pending.
  dynamic "autoscaling" {
    for_each = var.worker_scaling == "zero" ? [] : [1]

    content {
      total_min_node_count = var.total_min_node_count
      total_max_node_count = var.total_max_node_count
      location_policy      = "BALANCED"
    }
  }

  management {
    auto_repair  = true
    auto_upgrade = true
  }

  network_config {
    enable_private_nodes = true
  }

  node_config {
    machine_type    = var.machine_type
    disk_size_gb    = var.disk_size_gb
    disk_type       = "pd-balanced"
    image_type      = "COS_CONTAINERD"
    service_account = var.create_node_service_account ? google_service_account.nodes[0].email : null
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    resource_labels = var.labels

    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }

    metadata = {
      disable-legacy-endpoints = "true"
    }
  }

  lifecycle {
    # Only the start size; changing it would recreate the pool.
    ignore_changes = [initial_node_count]

    precondition {
      condition     = var.total_min_node_count <= var.total_max_node_count
      error_message = "total_min_node_count must not be above total_max_node_count."
    }
  }

  depends_on = [google_project_iam_member.nodes]
}
