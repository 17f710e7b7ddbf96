#!/usr/bin/env bash
# Bootstraps control-plane node NODE_INDEX of a kubeadm cluster, coordinated with the other nodes through SSM
# Parameter Store (see lib.sh for the env file): joins, upgrades, machine type changes and certificate renewals,
# one node at a time in index order (docs/design/control-plane-coordination.md; user data is limited to 16 KB).
#
# Usage: control-plane.sh ENV_FILE [bootstrap|refresh-token|upgrade|report-ready]
#   refresh-token  publishes a new 24-hour bootstrap token for workers (a timer, every 12 hours).
#   upgrade        syncs the authentication configuration, then upgrades or renews when asked (a timer, every minute).
#   report-ready   publishes control-plane/<i>/running/<type> once the API server is ready (at every boot).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

readonly TOKEN_TTL=24h0m0s PARAM_AUTHENTICATION_CONFIG=control-plane/authentication-config \
  PARAM_CERTIFICATES_RENEWAL=control-plane/certificates-renewal \
  AUTHENTICATION_MOUNT=/etc/kubernetes/authentication

joined_marker() {
  printf 'control-plane/%s/joined' "$1"
}

# NODE TYPE: published by node NODE at every boot on an instance of TYPE, once its API server is ready.
running_marker() {
  printf 'control-plane/%s/running/%s' "$1" "$2"
}

# NODE VERSION (MAJOR.MINOR): published once node NODE runs VERSION.
upgraded_marker() {
  printf 'control-plane/%s/upgraded/%s' "$1" "$2"
}

# NODE REQUEST: published once node NODE renewed its certificates for renewal request REQUEST.
renewed_marker() {
  printf 'control-plane/%s/renewed/%s' "$1" "$2"
}

# NODE: published at bootstrap by a node that renews on request.
renews_certificates_marker() {
  printf 'control-plane/%s/renews-certificates' "$1"
}

init_cluster() {
  local token certificate_key endpoint version
  token="$(random_hex 3).$(random_hex 8)"
  certificate_key=$(random_hex 32)
  # With a load balancer every kubeconfig and join goes through it; a single node is reached at its own address
  # inside the VPC and at API_ENDPOINT (its Elastic IP) from outside, so both are in the serving certificate.
  endpoint="${CONTROL_PLANE_ENDPOINT:-$NODE_IP}:${API_PORT}"
  version=$(kubeadm version -o short)
  prepare_api_server

  log "kubeadm init ${version}, control-plane endpoint ${endpoint}"
  kubeadm init \
    --upload-certs \
    --certificate-key "$certificate_key" \
    --token "$token" \
    --token-ttl "$TOKEN_TTL" \
    --control-plane-endpoint "$endpoint" \
    --apiserver-advertise-address "$NODE_IP" \
    --apiserver-bind-port "$API_PORT" \
    --apiserver-cert-extra-sans "$API_ENDPOINT" \
    --pod-network-cidr "$POD_CIDR" \
    --service-cidr "$SERVICE_CIDR" \
    --node-name "$NODE_NAME" \
    --kubernetes-version "$version" \
    --patches "$PATCHES_DIR"

  ssm_put "$PARAM_JOIN_ENDPOINT" String "$endpoint"
  ssm_put "$PARAM_JOIN_CA_CERT_HASH" String "$(ca_cert_hash "${KUBERNETES_DIR}/pki/ca.crt")"
  ssm_put "$PARAM_JOIN_TOKEN" SecureString "$token"
  ssm_put "$PARAM_JOIN_CERTIFICATE_KEY" SecureString "$certificate_key"

  install_addons
  publish_kubeconfig
}

join_control_plane() {
  local previous=$((NODE_INDEX - 1)) certificate_key
  wait_for_parameter "$(joined_marker "$previous")" >/dev/null
  log "control-plane node ${previous} has joined; joining next"
  read_join_parameters
  certificate_key=$(wait_for_parameter "$PARAM_JOIN_CERTIFICATE_KEY")
  prepare_api_server

  log "kubeadm join --control-plane ${JOIN_ENDPOINT}"
  kubeadm join "$JOIN_ENDPOINT" \
    --token "$JOIN_TOKEN" \
    --discovery-token-ca-cert-hash "$JOIN_CA_CERT_HASH" \
    --control-plane \
    --certificate-key "$certificate_key" \
    --apiserver-advertise-address "$NODE_IP" \
    --apiserver-bind-port "$API_PORT" \
    --node-name "$NODE_NAME" \
    --patches "$PATCHES_DIR"
}

# Before kubeadm init or join: the authentication configuration, and the patch that passes it to kube-apiserver
# (its folder mounted: a file mounted alone would stay the old one).
prepare_api_server() {
  local config
  config=$(wait_for_parameter "$PARAM_AUTHENTICATION_CONFIG")
  write_authentication_config "$config"
  mkdir -p "$PATCHES_DIR"
  cat >"${PATCHES_DIR}/kube-apiserver+json.json" <<PATCH
[{"op":"add","path":"/spec/containers/0/command/-","value":"--authentication-config=${AUTHENTICATION_MOUNT}/config.json"},
{"op":"add","path":"/spec/volumes/-","value":{"name":"authentication","hostPath":{"path":"${AUTHENTICATION_DIR}"}}},
{"op":"add","path":"/spec/containers/0/volumeMounts/-","value":{"name":"authentication","mountPath":"${AUTHENTICATION_MOUNT}","readOnly":true}}]
PATCH
}

# Replaces the file by a rename when CONFIG differs: kube-apiserver rereads it, and must never read half of it.
write_authentication_config() {
  local file=${AUTHENTICATION_DIR}/config.json temp
  [[ -f $file && $(<"$file") == "$1" ]] && return
  install -d -m 700 "$AUTHENTICATION_DIR"
  temp=$(mktemp "${file}.XXXXXX")
  printf '%s' "$1" >"$temp"
  mv -f "$temp" "$file"
  log "wrote ${file}"
}

install_addons() {
  export KUBECONFIG=${KUBERNETES_DIR}/admin.conf
  local manifest
  manifest=$(mktemp --suffix=.yaml)

  # Calico takes the pod range from kubeadm's configuration (--pod-network-cidr). Server-side apply: its CRDs are
  # too large for the last-applied annotation.
  log "installing Calico ${CALICO_VERSION}"
  retry 30 kubectl apply --server-side --force-conflicts \
    -f "https://raw.githubusercontent.com/projectcalico/calico/${CALICO_VERSION}/manifests/calico.yaml"

  log "installing the AWS cloud controller manager ${AWS_CCM_VERSION}"
  cloud_controller_manager_manifest >"$manifest"
  retry 30 kubectl apply --server-side --force-conflicts -f "$manifest"
  rm -f "$manifest"
}

# The AWS cloud controller manager on every control-plane node, as in cloud-provider-aws's
# examples/existing-cluster. It initializes the nodes (removing the uninitialized taint the kubelet's
# --cloud-provider=external sets) and runs Service load balancers.
cloud_controller_manager_manifest() {
  cat <<MANIFEST
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cloud-controller-manager
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:cloud-controller-manager
rules:
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch, update]
  - apiGroups: [""]
    resources: [nodes]
    verbs: ["*"]
  - apiGroups: [""]
    resources: [nodes/status]
    verbs: [patch]
  - apiGroups: [""]
    resources: [services, services/status]
    verbs: [list, patch, update, watch]
  - apiGroups: [""]
    resources: [serviceaccounts]
    verbs: [create, get]
  - apiGroups: [""]
    resources: [serviceaccounts/token]
    verbs: [create]
  - apiGroups: [""]
    resources: [persistentvolumes]
    verbs: [get, list, update, watch]
  - apiGroups: [""]
    resources: [endpoints]
    verbs: [create, get, list, watch, update]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create, get, list, watch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:cloud-controller-manager
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:cloud-controller-manager
subjects:
  - kind: ServiceAccount
    name: cloud-controller-manager
    namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cloud-controller-manager:apiserver-authentication-reader
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
  - kind: ServiceAccount
    name: cloud-controller-manager
    namespace: kube-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: aws-cloud-controller-manager
  namespace: kube-system
  labels:
    k8s-app: aws-cloud-controller-manager
spec:
  selector:
    matchLabels:
      k8s-app: aws-cloud-controller-manager
  updateStrategy:
    type: RollingUpdate
  template:
    metadata:
      labels:
        k8s-app: aws-cloud-controller-manager
    spec:
      nodeSelector:
        node-role.kubernetes.io/control-plane: ""
      tolerations:
        - key: node.cloudprovider.kubernetes.io/uninitialized
          value: "true"
          effect: NoSchedule
        - key: node-role.kubernetes.io/control-plane
          effect: NoSchedule
        - key: node.kubernetes.io/not-ready
          effect: NoSchedule
      serviceAccountName: cloud-controller-manager
      hostNetwork: true
      priorityClassName: system-node-critical
      containers:
        - name: aws-cloud-controller-manager
          image: registry.k8s.io/provider-aws/cloud-controller-manager:${AWS_CCM_VERSION}
          args:
            - --v=2
            - --cloud-provider=aws
            - --use-service-account-credentials=true
            - --configure-cloud-routes=false
            - --allocate-node-cidrs=false
            - "--cluster-name=${CLUSTER_NAME}"
          resources:
            requests:
              cpu: 200m
MANIFEST
}

# The admin kubeconfig, pointed at the advertised endpoint, for terraform-runner to collect. It is larger than
# the 4 KB of a standard parameter, so it may go to the advanced tier.
publish_kubeconfig() {
  local kubeconfig
  kubeconfig=$(sed -E "s#^([[:space:]]*server:[[:space:]]*).*#\\1https://${API_ENDPOINT}:${API_PORT}#" \
    "${KUBERNETES_DIR}/admin.conf")
  ssm_put "$PARAM_KUBECONFIG" SecureString "$kubeconfig" Intelligent-Tiering
}

# The systemd units that run refresh-token, upgrade and report-ready (see Usage above).
install_timers() {
  if is_true "$BOOTSTRAP_SKIP_INSTALL"; then
    return
  fi
  local script
  script=$(readlink -f "${BASH_SOURCE[0]}")
  cat >/etc/systemd/system/kubeopera-join-token.service <<UNIT
[Unit]
Description=Publish a fresh kubeadm bootstrap token to SSM Parameter Store

[Service]
Type=oneshot
ExecStart=${script} ${ENV_FILE} refresh-token
UNIT
  cat >/etc/systemd/system/kubeopera-join-token.timer <<UNIT
[Unit]
Description=Publish a fresh kubeadm bootstrap token every 12 hours

[Timer]
OnActiveSec=12h
OnUnitActiveSec=12h
RandomizedDelaySec=30m

[Install]
WantedBy=timers.target
UNIT
  cat >/etc/systemd/system/kubeopera-ready.service <<UNIT
[Unit]
Description=Publish that this control-plane node runs, once its API server is ready
After=kubelet.service network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=${script} ${ENV_FILE} report-ready

[Install]
WantedBy=multi-user.target
UNIT
  cat >/etc/systemd/system/kubeopera-upgrade.service <<UNIT
[Unit]
Description=Sync the authentication configuration and look for a control-plane upgrade

[Service]
Type=oneshot
ExecStart=${script} ${ENV_FILE} upgrade
UNIT
  cat >/etc/systemd/system/kubeopera-upgrade.timer <<UNIT
[Unit]
Description=Sync the authentication configuration and look for a control-plane upgrade every minute

[Timer]
OnActiveSec=1min
OnUnitInactiveSec=1min

[Install]
WantedBy=timers.target
UNIT
  systemctl daemon-reload
  systemctl enable --now kubeopera-join-token.timer kubeopera-upgrade.timer
  systemctl enable kubeopera-ready.service
}

report_ready() {
  discover_node
  wait_until_api_server_ready
  ssm_put "$(running_marker "$NODE_INDEX" "$INSTANCE_TYPE")" String "$NODE_NAME"
}

# The upgrade above, if there is one. A run that fails (or a reboot) is repeated by the next timer run: kubeadm
# upgrade is safe to run again.
upgrade() {
  local target previous version
  if ! target=$(ssm_get "$PARAM_UPGRADE_TARGET" 2>/dev/null); then
    log "no upgrade target is published"
    return
  fi
  if ssm_get "$(upgraded_marker "$NODE_INDEX" "$target")" >/dev/null 2>&1; then
    return
  fi
  if ((NODE_INDEX > 0)); then
    previous=$((NODE_INDEX - 1))
    wait_for_parameter "$(upgraded_marker "$previous" "$target")" >/dev/null
    log "control-plane node ${previous} runs ${target}; upgrading next"
  fi
  KUBERNETES_VERSION=$target
  install_kubernetes_packages kubeadm
  version=$(kubeadm version -o short)
  if ((NODE_INDEX == 0)); then
    log "kubeadm upgrade apply ${version}"
    kubeadm upgrade apply "$version" --yes --patches "$PATCHES_DIR"
  else
    log "kubeadm upgrade node (${version})"
    kubeadm upgrade node --patches "$PATCHES_DIR"
  fi
  install_kubernetes_packages kubelet kubectl
  systemctl daemon-reload
  systemctl restart kubelet
  if ((NODE_INDEX == 0)); then
    publish_kubeconfig # renewed by the upgrade
  fi
  ssm_put "$(upgraded_marker "$NODE_INDEX" "$target")" String "$version"
  log "control-plane node ${NODE_INDEX} runs ${version}"
}

# A requested renewal not done here yet; the next timer run repeats a failed one.
renew_certificates() {
  local request previous
  if ! request=$(ssm_get "$PARAM_CERTIFICATES_RENEWAL" 2>/dev/null); then
    return
  fi
  if ssm_get "$(renewed_marker "$NODE_INDEX" "$request")" >/dev/null 2>&1; then
    return
  fi
  if ((NODE_INDEX > 0)); then
    previous=$((NODE_INDEX - 1))
    wait_for_parameter "$(renewed_marker "$previous" "$request")" >/dev/null
    log "control-plane node ${previous} renewed its certificates; renewing next"
  fi
  log "kubeadm certs renew all (request ${request})"
  kubeadm certs renew all
  restart_static_pods
  wait_until_api_server_ready
  if ((NODE_INDEX == 0)); then
    publish_kubeconfig
  fi
  ssm_put "$(renewed_marker "$NODE_INDEX" "$request")" String "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  log "control-plane node ${NODE_INDEX} renewed its certificates"
}

# Static pods read their certificates at start: the kubelet stops them while their manifests are away.
restart_static_pods() {
  local manifests=${KUBERNETES_DIR}/manifests parked=${KUBERNETES_DIR}/manifests-parked
  mkdir -p "$manifests" "$parked"
  find "$manifests" -maxdepth 1 -name '*.yaml' -exec mv -t "$parked" {} +
  sleep "${STATIC_POD_STOP_SECONDS:-20}"
  find "$parked" -maxdepth 1 -name '*.yaml' -exec mv -t "$manifests" {} +
}

wait_until_api_server_ready() {
  local deadline=$((SECONDS + WAIT_TIMEOUT_SECONDS))
  until curl -fsk --max-time 5 "https://127.0.0.1:${API_PORT}/readyz" >/dev/null; do
    ((SECONDS < deadline)) || die "the API server of this node was not ready within ${WAIT_TIMEOUT_SECONDS}s"
    sleep "$POLL_INTERVAL_SECONDS"
  done
}

upgrade_then_renew() {
  upgrade
  renew_certificates
}

refresh_token() {
  local token
  token=$(kubeadm token create --ttl "$TOKEN_TTL" --kubeconfig "${KUBERNETES_DIR}/admin.conf")
  ssm_put "$PARAM_JOIN_TOKEN" SecureString "$token"
}

bootstrap() {
  discover_node
  install_node
  if already_joined; then
    log "${KUBERNETES_DIR}/kubelet.conf exists: this node is already part of the cluster"
  elif ((NODE_INDEX == 0)); then
    init_cluster
  else
    join_control_plane
  fi
  install_timers
  ssm_put "$(joined_marker "$NODE_INDEX")" String "$NODE_NAME"
  ssm_put "$(upgraded_marker "$NODE_INDEX" "$(kubernetes_minor)")" String "$(kubeadm version -o short)"
  ssm_put "$(running_marker "$NODE_INDEX" "$INSTANCE_TYPE")" String "$NODE_NAME"
  ssm_put "$(renews_certificates_marker "$NODE_INDEX")" String "$NODE_NAME"
  log "control-plane node ${NODE_INDEX} is ready"
}

# One upgrade at a time on a node: a timer run that finds the previous one still waiting or upgrading leaves.
with_upgrade_lock() {
  local lock_file=${KUBERNETES_DIR}/.kubeopera-upgrade.lock
  mkdir -p "$KUBERNETES_DIR"
  exec 9>"$lock_file"
  if ! flock -n 9; then
    log "an upgrade is already running on this node"
    return
  fi
  "$@"
}

main() {
  load_settings "${1:-}"
  ENV_FILE=$(readlink -f "$1")
  : "${NODE_INDEX:?is not set in ${ENV_FILE}}"
  [[ $NODE_INDEX =~ ^[0-9]+$ ]] || die "NODE_INDEX must be a whole number"
  : "${POD_CIDR:?is not set in ${ENV_FILE}}" "${SERVICE_CIDR:?is not set in ${ENV_FILE}}"
  : "${CALICO_VERSION:?is not set in ${ENV_FILE}}" "${AWS_CCM_VERSION:?is not set in ${ENV_FILE}}"
  CONTROL_PLANE_ENDPOINT=${CONTROL_PLANE_ENDPOINT:-}
  LOG_TAG="control-plane-${NODE_INDEX}"
  PATCHES_DIR=${KUBERNETES_DIR}/patches AUTHENTICATION_DIR=${KUBERNETES_DIR}/authentication

  case ${2:-bootstrap} in
    bootstrap) bootstrap ;;
    refresh-token) refresh_token ;;
    upgrade)
      config=$(ssm_get "$PARAM_AUTHENTICATION_CONFIG") && write_authentication_config "$config"
      with_upgrade_lock upgrade_then_renew
      ;;
    report-ready) report_ready ;;
    *) die "unknown command '$2' (bootstrap, refresh-token, upgrade or report-ready)" ;;
  esac
}

main "$@"
