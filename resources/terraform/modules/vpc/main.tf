# A VPC for one Kubernetes cluster: a public and a private subnet in every availability zone, an internet gateway
# for the public ones and NAT gateways for the private ones. Nodes live in the private subnets; public subnets hold
# the NAT gateways and internet-facing load balancers.

locals {
  zone_count = length(var.availability_zones)
  nat_count  = var.single_nat_gateway ? 1 : local.zone_count

  # Subnets get equal slices of the VPC: private ones from the start, public ones from the middle, so adding a
  # zone later never moves an existing subnet.
  half_of_slices = pow(2, var.subnet_newbits) / 2

  # The cloud controller manager and the AWS Load Balancer Controller find the cluster's subnets by this tag.
  cluster_tag = { "kubernetes.io/cluster/${var.cluster_name}" = "owned" }
}

resource "aws_vpc" "this" {
  cidr_block = var.cidr_block
  # Private DNS host names are the node names the AWS cloud controller manager and EKS expect.
  enable_dns_support   = true
  enable_dns_hostnames = true

  tags = merge(var.tags, { Name = var.cluster_name })
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id

  tags = merge(var.tags, { Name = var.cluster_name })
}

resource "aws_subnet" "public" {
  count = local.zone_count

  vpc_id            = aws_vpc.this.id
  availability_zone = var.availability_zones[count.index]
  cidr_block        = cidrsubnet(var.cidr_block, var.subnet_newbits, local.half_of_slices + count.index)
  # Only NAT gateways, load balancers and Elastic IPs are public; nothing gets an address by default.
  map_public_ip_on_launch = false

  tags = merge(var.tags, local.cluster_tag, {
    Name                     = "${var.cluster_name}-public-${var.availability_zones[count.index]}"
    "kubernetes.io/role/elb" = "1"
  })
}

resource "aws_subnet" "private" {
  count = local.zone_count

  vpc_id            = aws_vpc.this.id
  availability_zone = var.availability_zones[count.index]
  cidr_block        = cidrsubnet(var.cidr_block, var.subnet_newbits, count.index)

  tags = merge(var.tags, local.cluster_tag, {
    Name                              = "${var.cluster_name}-private-${var.availability_zones[count.index]}"
    "kubernetes.io/role/internal-elb" = "1"
  })
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id

  tags = merge(var.tags, { Name = "${var.cluster_name}-public" })
}

resource "aws_route" "public_internet" {
  route_table_id         = aws_route_table.public.id
  destination_cidr_block = "0.0.0.0/0"
  gateway_id             = aws_internet_gateway.this.id
}

resource "aws_route_table_association" "public" {
  count = local.zone_count

  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public.id
}

resource "aws_eip" "nat" {
  count = local.nat_count

  domain = "vpc"

  tags = merge(var.tags, { Name = "${var.cluster_name}-nat-${var.availability_zones[count.index]}" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_nat_gateway" "this" {
  count = local.nat_count

  allocation_id = aws_eip.nat[count.index].id
  subnet_id     = aws_subnet.public[count.index].id

  tags = merge(var.tags, { Name = "${var.cluster_name}-${var.availability_zones[count.index]}" })

  depends_on = [aws_internet_gateway.this]
}

resource "aws_route_table" "private" {
  count = local.zone_count

  vpc_id = aws_vpc.this.id

  tags = merge(var.tags, { Name = "${var.cluster_name}-private-${var.availability_zones[count.index]}" })
}

resource "aws_route" "private_nat" {
  count = local.zone_count

  route_table_id         = aws_route_table.private[count.index].id
  destination_cidr_block = "0.0.0.0/0"
  nat_gateway_id         = aws_nat_gateway.this[count.index % local.nat_count].id
}

resource "aws_route_table_association" "private" {
  count = local.zone_count

  subnet_id      = aws_subnet.private[count.index].id
  route_table_id = aws_route_table.private[count.index].id
}
