#!/usr/bin/env bash
# Shared by control-plane.sh and worker.sh (sourced, not run): settings, logging, SSM Parameter Store, waiting,
# and the node preparation (container runtime, kubeadm, kubelet, kubectl).
#
# The env file (written by the compute module's user data) sets:
#   CLUSTER_NAME, AWS_REGION, SSM_PREFIX, API_ENDPOINT, API_PORT, KUBERNETES_VERSION, NODE_ROLE,
#   POLL_INTERVAL_SECONDS, WAIT_TIMEOUT_SECONDS; control-plane nodes also NODE_INDEX, CONTROL_PLANE_COUNT,
#   CONTROL_PLANE_ENDPOINT, POD_CIDR, SERVICE_CIDR, CALICO_VERSION, AWS_CCM_VERSION; workers of a pool with node
#   labels or taints NODE_LABELS (key=value,...) and NODE_TAINTS (key=value:Effect,...).
# Optional (tests, other environments): AWS_ENDPOINT_URL, NODE_NAME and NODE_IP (instead of instance metadata),
# KUBERNETES_DIR (instead of /etc/kubernetes), BOOTSTRAP_SKIP_INSTALL=true (no packages, kernel settings or
# systemd units: for a machine that is not a fresh node).

# Everything the nodes publish, relative to SSM_PREFIX. Workers may read join/ (and control-plane/0/joined) but
# not the certificate key, which decrypts the control plane's certificates uploaded by kubeadm init.
# shellcheck disable=SC2034 # used by the scripts that source this file
readonly PARAM_JOIN_ENDPOINT=join/endpoint PARAM_JOIN_TOKEN=join/token PARAM_JOIN_CA_CERT_HASH=join/ca-cert-hash \
  PARAM_JOIN_CERTIFICATE_KEY=control-plane/certificate-key PARAM_KUBECONFIG=kubeconfig \
  PARAM_UPGRADE_TARGET=control-plane/upgrade-target

log() {
  printf '%s [%s] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${LOG_TAG:-bootstrap}" "$*" >&2
}

die() {
  log "ERROR: $*"
  exit 1
}

is_true() {
  [[ ${1:-} == true || ${1:-} == 1 || ${1:-} == yes ]]
}

# Reads the env file and checks what every role needs.
load_settings() {
  local env_file=${1:-}
  [[ -n $env_file && -r $env_file ]] || die "usage: $0 ENV_FILE (cannot read '${env_file}')"
  # shellcheck source=/dev/null
  source "$env_file"

  : "${CLUSTER_NAME:?is not set in ${env_file}}"
  : "${AWS_REGION:?is not set in ${env_file}}"
  : "${SSM_PREFIX:?is not set in ${env_file}}"
  : "${API_ENDPOINT:?is not set in ${env_file}}"
  : "${KUBERNETES_VERSION:?is not set in ${env_file}}"
  API_PORT=${API_PORT:-6443}
  POLL_INTERVAL_SECONDS=${POLL_INTERVAL_SECONDS:-10}
  WAIT_TIMEOUT_SECONDS=${WAIT_TIMEOUT_SECONDS:-3600}
  KUBERNETES_DIR=${KUBERNETES_DIR:-/etc/kubernetes}
  BOOTSTRAP_SKIP_INSTALL=${BOOTSTRAP_SKIP_INSTALL:-false}
  SSM_PREFIX=${SSM_PREFIX%/}
  [[ $WAIT_TIMEOUT_SECONDS =~ ^[0-9]+$ ]] || die "WAIT_TIMEOUT_SECONDS must be a whole number of seconds"
  export AWS_REGION AWS_DEFAULT_REGION=$AWS_REGION
}

# The AWS CLI in this region, at AWS_ENDPOINT_URL when one is set (passed explicitly: older CLIs ignore the
# variable).
aws_cli() {
  local endpoint=()
  if [[ -n ${AWS_ENDPOINT_URL:-} ]]; then
    endpoint=(--endpoint-url "$AWS_ENDPOINT_URL")
  fi
  aws --region "$AWS_REGION" "${endpoint[@]}" "$@"
}

# Prints the (decrypted) value of SSM_PREFIX/NAME; fails when it does not exist.
ssm_get() {
  aws_cli ssm get-parameter --name "${SSM_PREFIX}/$1" --with-decryption --query Parameter.Value --output text
}

# Writes SSM_PREFIX/NAME (overwriting). TYPE is String or SecureString. The value goes through a private file,
# so secrets never appear on a command line. TIER is Standard (up to 4 KB) or Intelligent-Tiering.
ssm_put() {
  local name=$1 type=$2 value=$3 tier=${4:-Standard} file status=0
  file=$(mktemp)
  chmod 600 "$file"
  printf '%s' "$value" >"$file"
  aws_cli ssm put-parameter --name "${SSM_PREFIX}/${name}" --type "$type" --tier "$tier" --overwrite \
    --value "file://${file}" >/dev/null || status=$?
  rm -f "$file"
  ((status == 0)) || die "could not write SSM parameter ${SSM_PREFIX}/${name}"
  log "published ${SSM_PREFIX}/${name}"
}

# Waits until SSM_PREFIX/NAME exists and prints its value; polls every POLL_INTERVAL_SECONDS and gives up (the
# whole bootstrap fails) after WAIT_TIMEOUT_SECONDS.
wait_for_parameter() {
  local name=$1 value errors deadline=$((SECONDS + WAIT_TIMEOUT_SECONDS))
  errors=$(mktemp)
  log "waiting for ${SSM_PREFIX}/${name}"
  until value=$(ssm_get "$name" 2>"$errors"); do
    if ! grep -q ParameterNotFound "$errors"; then
      log "reading ${SSM_PREFIX}/${name} failed, retrying: $(tr '\n' ' ' <"$errors")"
    fi
    if ((SECONDS >= deadline)); then
      rm -f "$errors"
      die "gave up waiting for ${SSM_PREFIX}/${name} after ${WAIT_TIMEOUT_SECONDS}s"
    fi
    sleep "$POLL_INTERVAL_SECONDS"
  done
  rm -f "$errors"
  printf '%s' "$value"
}

# Waits until node 0's join credentials are all published and reads them, in one call, into JOIN_ENDPOINT,
# JOIN_TOKEN and JOIN_CA_CERT_HASH.
read_join_parameters() {
  local deadline=$((SECONDS + WAIT_TIMEOUT_SECONDS)) lines name value
  while :; do
    JOIN_ENDPOINT='' JOIN_TOKEN='' JOIN_CA_CERT_HASH=''
    if lines=$(aws_cli ssm get-parameters-by-path --path "${SSM_PREFIX}/join" --with-decryption \
      --query 'Parameters[].[Name,Value]' --output text); then
      while IFS=$'\t' read -r name value; do
        case ${name#"${SSM_PREFIX}/"} in
          "$PARAM_JOIN_ENDPOINT") JOIN_ENDPOINT=$value ;;
          "$PARAM_JOIN_TOKEN") JOIN_TOKEN=$value ;;
          "$PARAM_JOIN_CA_CERT_HASH") JOIN_CA_CERT_HASH=$value ;;
        esac
      done <<<"$lines"
    fi
    if [[ -n $JOIN_ENDPOINT && -n $JOIN_TOKEN && -n $JOIN_CA_CERT_HASH ]]; then
      return
    fi
    ((SECONDS < deadline)) || die "gave up waiting for the join parameters under ${SSM_PREFIX}/join"
    sleep "$POLL_INTERVAL_SECONDS"
  done
}

# Runs a command until it succeeds, up to ATTEMPTS times, 10 seconds apart (network hiccups while a fresh node
# installs packages or talks to an API server that is still starting).
retry() {
  local attempts=$1 attempt=1
  shift
  until "$@"; do
    ((attempt < attempts)) || return 1
    log "'$1' failed (attempt ${attempt} of ${attempts}); retrying"
    attempt=$((attempt + 1))
    sleep 10
  done
}

# Random lowercase hex, N bytes.
random_hex() {
  od -An -v -N"$1" -tx1 /dev/urandom | tr -d ' \n'
}

# kubeadm's --discovery-token-ca-cert-hash value for a CA certificate: sha256 of its public key (DER).
ca_cert_hash() {
  local hash
  hash=$(openssl x509 -pubkey -noout -in "$1" | openssl pkey -pubin -outform der | sha256sum)
  printf 'sha256:%s' "${hash%% *}"
}

# NODE_NAME (the private DNS name, which the AWS cloud controller manager expects as the node name), NODE_IP
# (the private address) and INSTANCE_TYPE, from the env file or the instance metadata service (IMDSv2).
discover_node() {
  if [[ -n ${NODE_NAME:-} && -n ${NODE_IP:-} && -n ${INSTANCE_TYPE:-} ]]; then
    return
  fi
  local token
  token=$(curl -fsS --retry 5 -X PUT http://169.254.169.254/latest/api/token \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  NODE_NAME=${NODE_NAME:-$(curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: ${token}" \
    http://169.254.169.254/latest/meta-data/local-hostname)}
  NODE_IP=${NODE_IP:-$(curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: ${token}" \
    http://169.254.169.254/latest/meta-data/local-ipv4)}
  INSTANCE_TYPE=${INSTANCE_TYPE:-$(curl -fsS --retry 5 -H "X-aws-ec2-metadata-token: ${token}" \
    http://169.254.169.254/latest/meta-data/instance-type)}
}

# The package repository's minor version: 1.34 for 1.34 and for 1.34.1.
kubernetes_minor() {
  local major minor _
  IFS=. read -r major minor _ <<<"$KUBERNETES_VERSION"
  printf '%s.%s' "$major" "$minor"
}

# True once this machine is part of the cluster (a re-run after a reboot must not init or join again).
already_joined() {
  [[ -f ${KUBERNETES_DIR}/kubelet.conf ]]
}

# Installs (or upgrades to) the named packages of KUBERNETES_VERSION's minor release from pkgs.k8s.io, whose
# repository is per minor version.
install_kubernetes_packages() {
  if is_true "$BOOTSTRAP_SKIP_INSTALL"; then
    log "BOOTSTRAP_SKIP_INSTALL is set: not installing $*"
    return
  fi
  local minor
  minor=$(kubernetes_minor)
  cat >/etc/yum.repos.d/kubernetes.repo <<REPO
[kubernetes]
name=Kubernetes
baseurl=https://pkgs.k8s.io/core:/stable:/v${minor}/rpm/
enabled=1
gpgcheck=1
gpgkey=https://pkgs.k8s.io/core:/stable:/v${minor}/rpm/repodata/repomd.xml.key
exclude=kubelet kubeadm kubectl cri-tools kubernetes-cni
REPO
  retry 5 dnf install -y --disableexcludes=kubernetes "$@"
}

# Prepares a fresh Amazon Linux 2023 node: kernel settings, containerd with the systemd cgroup driver, and
# kubeadm, kubelet and kubectl from pkgs.k8s.io, with the kubelet set up for the external cloud provider (and
# given KUBELET_NODE_FLAGS, space-separated, when the caller has set it).
install_node() {
  if is_true "$BOOTSTRAP_SKIP_INSTALL"; then
    log "BOOTSTRAP_SKIP_INSTALL is set: not installing anything"
    return
  fi
  local minor
  minor=$(kubernetes_minor)
  log "installing containerd and Kubernetes ${minor} packages"

  printf 'overlay\nbr_netfilter\n' >/etc/modules-load.d/kubernetes.conf
  modprobe overlay
  modprobe br_netfilter
  cat >/etc/sysctl.d/99-kubernetes.conf <<'SYSCTL'
net.bridge.bridge-nf-call-iptables  = 1
net.bridge.bridge-nf-call-ip6tables = 1
net.ipv4.ip_forward                 = 1
SYSCTL
  sysctl --system >/dev/null
  swapoff -a

  retry 5 dnf install -y containerd
  install_kubernetes_packages kubelet kubeadm kubectl

  mkdir -p /etc/containerd
  containerd config default >/etc/containerd/config.toml
  sed -i 's/SystemdCgroup = false/SystemdCgroup = true/' /etc/containerd/config.toml
  systemctl enable --now containerd

  # Nodes start tainted as uninitialized until the AWS cloud controller manager has set them up. kubeadm's
  # systemd drop-in passes these to the kubelet after its own flags.
  local kubelet_flags="--cloud-provider=external --node-ip=${NODE_IP} ${KUBELET_NODE_FLAGS:-}"
  printf 'KUBELET_EXTRA_ARGS=%s\n' "${kubelet_flags% }" >/etc/sysconfig/kubelet
  systemctl enable kubelet
}
