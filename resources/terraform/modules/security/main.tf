# Security groups of a kubeadm cluster with Calico: one for control-plane nodes, one for workers. Each node has
# exactly one of them, and both carry the kubernetes.io/cluster/<name> tag, which is how the AWS cloud controller
# manager finds the group to open for Service load balancers.
#
# Ports: https://kubernetes.io/docs/reference/networking/ports-and-protocols/ and Calico's network requirements.

locals {
  cluster_tag = { "kubernetes.io/cluster/${var.cluster_name}" = "owned" }

  groups = {
    control_plane = aws_security_group.control_plane.id
    worker        = aws_security_group.worker.id
  }

  # What every node accepts from every other node, control plane or worker.
  node_to_node = {
    kubelet      = { protocol = "tcp", from = 10250, to = 10250, description = "kubelet API" }
    calico_bgp   = { protocol = "tcp", from = 179, to = 179, description = "Calico BGP" }
    calico_ipip  = { protocol = "4", from = null, to = null, description = "Calico IP-in-IP" }
    calico_vxlan = { protocol = "udp", from = 4789, to = 4789, description = "Calico VXLAN" }
    calico_typha = { protocol = "tcp", from = 5473, to = 5473, description = "Calico Typha" }
  }

  node_to_node_rules = {
    for combination in setproduct(keys(local.groups), keys(local.groups), keys(local.node_to_node)) :
    "${combination[0]}-from-${combination[1]}-${combination[2]}" => merge(local.node_to_node[combination[2]], {
      group  = combination[0]
      source = combination[1]
    })
  }

  # What only control-plane nodes accept.
  control_plane_rules = {
    api_from_workers       = { protocol = "tcp", from = 6443, to = 6443, source = "worker", description = "Kubernetes API from workers" }
    api_from_control_plane = { protocol = "tcp", from = 6443, to = 6443, source = "control_plane", description = "Kubernetes API from the control plane" }
    etcd                   = { protocol = "tcp", from = 2379, to = 2380, source = "control_plane", description = "etcd client and peer API" }
    controller_manager     = { protocol = "tcp", from = 10257, to = 10257, source = "control_plane", description = "kube-controller-manager" }
    scheduler              = { protocol = "tcp", from = 10259, to = 10259, source = "control_plane", description = "kube-scheduler" }
  }
}

resource "aws_security_group" "control_plane" {
  name_prefix = "${var.cluster_name}-control-plane-"
  description = "Kubernetes control-plane nodes"
  vpc_id      = var.vpc_id

  tags = merge(var.tags, local.cluster_tag, { Name = "${var.cluster_name}-control-plane" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_security_group" "worker" {
  name_prefix = "${var.cluster_name}-worker-"
  description = "Kubernetes worker nodes"
  vpc_id      = var.vpc_id

  tags = merge(var.tags, local.cluster_tag, { Name = "${var.cluster_name}-worker" })

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_ingress_rule" "node_to_node" {
  for_each = local.node_to_node_rules

  security_group_id            = local.groups[each.value.group]
  referenced_security_group_id = local.groups[each.value.source]
  ip_protocol                  = each.value.protocol
  from_port                    = each.value.from
  to_port                      = each.value.to
  description                  = "${each.value.description} from ${replace(each.value.source, "_", "-")} nodes"

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "control_plane" {
  for_each = local.control_plane_rules

  security_group_id            = aws_security_group.control_plane.id
  referenced_security_group_id = local.groups[each.value.source]
  ip_protocol                  = each.value.protocol
  from_port                    = each.value.from
  to_port                      = each.value.to
  description                  = each.value.description

  tags = var.tags
}

# The API through the Network Load Balancer (which does not preserve client addresses, so connections come from
# its addresses in the VPC) and from the clients allowed to reach it directly.
resource "aws_vpc_security_group_ingress_rule" "api_from_vpc" {
  security_group_id = aws_security_group.control_plane.id
  cidr_ipv4         = var.vpc_cidr
  ip_protocol       = "tcp"
  from_port         = 6443
  to_port           = 6443
  description       = "Kubernetes API from the VPC (load balancer)"

  tags = var.tags
}

resource "aws_vpc_security_group_ingress_rule" "api_from_clients" {
  for_each = toset(var.api_allowed_cidrs)

  security_group_id = aws_security_group.control_plane.id
  cidr_ipv4         = each.value
  ip_protocol       = "tcp"
  from_port         = 6443
  to_port           = 6443
  description       = "Kubernetes API from allowed clients"

  tags = var.tags
}

# Pods reach node-local services (the API server, kubelets, DNS on host-network pods) from their own addresses.
resource "aws_vpc_security_group_ingress_rule" "from_pods" {
  for_each = local.groups

  security_group_id = each.value
  cidr_ipv4         = var.pod_cidr
  ip_protocol       = "-1"
  description       = "Everything from pods"

  tags = var.tags
}

# NodePort Services, reached by Service load balancers and their health checks from inside the VPC.
resource "aws_vpc_security_group_ingress_rule" "node_ports" {
  for_each = toset(["tcp", "udp"])

  security_group_id = aws_security_group.worker.id
  cidr_ipv4         = var.vpc_cidr
  ip_protocol       = each.value
  from_port         = 30000
  to_port           = 32767
  description       = "NodePort Services from the VPC"

  tags = var.tags
}

# Nodes pull images and packages, reach AWS APIs and talk to each other without restriction.
resource "aws_vpc_security_group_egress_rule" "all" {
  for_each = local.groups

  security_group_id = each.value
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  description       = "Everything"

  tags = var.tags
}
