#!/usr/bin/env bash
# `make image`: builds the service's image here, without a Docker engine or a registry, from the project's one
# Dockerfile, and writes it as an OCI archive (loaded into containerd when CONTAINERD_ADDRESS names a socket).
#   base       tools/image/mkrootfs.sh: a shell-less Debian root filesystem from Debian's packages (mmdebstrap),
#              made once per suite and kept in the cache
#   artifacts  provisioner and terraform-runner by `cargo build --release` (RUST_BIN_DIR to use others), tofu, the
#              Terraform providers' mirror and the playground from tools/build-*.sh, passed as the build context
#              `prebuilt` (the Dockerfile's artifacts-prebuilt stage)
#   builder    buildah from Debian's packages; its storage, configuration and temporary files stay in the cache
# Environment: IMAGE (default kubeopera/cluster-provisioner:<package version>), SUITE (trixie), RUST_BIN_DIR,
# GKE_AUTH_PLUGIN (a gke-gcloud-auth-plugin binary to include; none can be fetched here), CONTAINERD_ADDRESS.
# Progress goes to stderr; the last line of stdout is the OCI archive.
set -euo pipefail
repository=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeopera-provisioner/image"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repository/Cargo.toml" | head -n1)
IMAGE=${IMAGE:-kubeopera/cluster-provisioner:$version}
SUITE=${SUITE:-trixie}
started=$SECONDS
step() { echo "== $* ($((SECONDS - started)) s)" >&2; }

missing=()
for tool in mmdebstrap:mmdebstrap buildah:buildah; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
if ((${#missing[@]})); then
  step "installing ${missing[*]} from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2
fi

mkdir -p "$cache/conf" "$cache/tmp"
# buildah's configuration of our own: nothing in /etc/containers is read, no registry is ever asked.
echo '{"default":[{"type":"insecureAcceptAnything"}]}' > "$cache/conf/policy.json"
printf 'unqualified-search-registries = []\nshort-name-mode = "permissive"\n' > "$cache/conf/registries.conf"
: > "$cache/conf/containers.conf"
export CONTAINERS_REGISTRIES_CONF="$cache/conf/registries.conf" CONTAINERS_CONF="$cache/conf/containers.conf"
export TMPDIR="$cache/tmp" BUILDAH_ISOLATION=chroot
buildah_() {
  nice -n 10 buildah --root "$cache/storage/root" --runroot "$cache/storage/run" --storage-driver overlay \
    --registries-conf "$cache/conf/registries.conf" "$@"
}
policy=(--signature-policy "$cache/conf/policy.json")
load_into_containerd() {
  if [[ -n ${CONTAINERD_ADDRESS:-} && -S ${CONTAINERD_ADDRESS} ]]; then
    step "loading it into containerd at $CONTAINERD_ADDRESS"
    ctr --address "$CONTAINERD_ADDRESS" -n k8s.io images import "$archive" >&2
  fi
}
# buildah 1.28 leaves each stage's working container mounted after a build.
trap 'buildah_ rm --all >/dev/null 2>&1 || true' EXIT

# --- the base: keyed by the suite and the scripts that make it --------------------------------------------------
key=$(cat "$repository"/tools/image/*.sh | sha256sum | cut -c1-12)
base_ref="localhost/kubeopera-base:$SUITE-$key"
base_tar="$cache/base-$SUITE-$key.tar"
if [[ ! -s $base_tar ]]; then
  step "making the base root filesystem ($SUITE) with mmdebstrap"
  "$repository/tools/image/mkrootfs.sh" "$SUITE" "$base_tar.tmp" >&2
  mv "$base_tar.tmp" "$base_tar"
fi
if ! buildah_ inspect --type image "$base_ref" >/dev/null 2>&1; then
  step "importing the base as $base_ref"
  container=$(buildah_ from scratch)
  buildah_ add "$container" "$base_tar" / >&2
  buildah_ config --user 65532:65532 --workingdir /workspace --env HOME=/workspace "$container"
  buildah_ commit "${policy[@]}" --rm "$container" "$base_ref" >&2
fi

# --- the artifacts: hard links into the caches, laid out as the Dockerfile's artifacts-built stage ----------------
if [[ -z ${RUST_BIN_DIR:-} ]]; then
  step "cargo build --release"
  (cd "$repository" && PROVISIONER_COMMIT=${PROVISIONER_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)} \
    cargo build --release --locked -p provisioner -p terraform-runner --bin provisioner --bin terraform-runner >&2)
  RUST_BIN_DIR="${CARGO_TARGET_DIR:-$repository/target}/release"
fi
tofu_dir=$("$repository/tools/build-tofu.sh" | tail -n1)
providers=$(dirname "$("$repository/tools/build-terraform-providers.sh" | tail -n1)")
playground=$("$repository/tools/build-playground.sh" | tail -n1)
# The archive names the image as the CRI looks it up (kubeopera/x:t is docker.io/kubeopera/x:t there). It is kept
# with the key of everything that goes into it: an unchanged image is not built again.
case ${IMAGE%%/*} in
  *.*|*:*|localhost) reference=$IMAGE ;;
  *) reference=docker.io/$IMAGE ;;
esac
archive="$cache/$(echo "$IMAGE" | tr '/:' '__').oci.tar"
inputs=$({
  echo "$reference $base_ref ${GKE_AUTH_PLUGIN:-}"
  sha256sum "$RUST_BIN_DIR/provisioner" "$RUST_BIN_DIR/terraform-runner" "$repository/Dockerfile" \
    ${GKE_AUTH_PLUGIN:+"$GKE_AUTH_PLUGIN"} | cut -c1-64
  # The tool caches are written once and never changed in place: names, sizes and times tell them apart. The
  # playground's script copies its few megabytes again on every call, so they are keyed by their content.
  find "$providers/mirror" "$providers/test-locks" "$tofu_dir/tofu" -type f -printf '%P %s %T@\n' | sort
  (cd "$playground" && find . -type f -exec sha256sum {} + | sort)
} | sha256sum | cut -c1-16)
if [[ -s $archive && $(cat "$archive.inputs" 2>/dev/null) == "$inputs" ]]; then
  step "unchanged since the last build ($inputs): $archive"
  load_into_containerd
  echo "$archive"
  exit 0
fi

tree="$cache/prebuilt"
rm -rf "$tree"
mkdir -p "$tree/terraform" "$tree/tools" "$tree/app"
cp -al "$providers/mirror" "$tree/terraform/providers"
# The lock files of these providers, built from source here (the Dockerfile's default build locks the releases').
cp -al "$providers/test-locks" "$tree/terraform/locks"
printf 'provider_installation {\n  filesystem_mirror {\n    path = "%s"\n  }\n}\n' \
  /usr/local/share/kubeopera/terraform/providers > "$tree/terraform/tofurc"
cp -l "$tofu_dir/tofu" "$tree/tools/tofu"
if [[ -n ${GKE_AUTH_PLUGIN:-} ]]; then cp "$GKE_AUTH_PLUGIN" "$tree/tools/gke-gcloud-auth-plugin"; fi
cp -al "$playground" "$tree/playground"
# Without debug information: the tests' debug binaries would otherwise carry hundreds of megabytes of it.
for binary in provisioner terraform-runner; do
  strip --strip-debug -o "$tree/app/$binary" "$RUST_BIN_DIR/$binary"
done
chmod -R a+rX,go-w "$tree"

# --- the one Dockerfile ------------------------------------------------------------------------------------------
step "buildah build $IMAGE"
# buildah 1.28 resolves `FROM ${ARG}` to a stage only when the argument is passed, so both are.
buildah_ build "${policy[@]}" --pull=never --layers=true \
  --build-arg BASE_IMAGE="$base_ref" --build-arg ARTIFACTS=artifacts-prebuilt --build-context prebuilt="$tree" \
  -f "$repository/Dockerfile" -t "$IMAGE" "$repository" >&2

step "writing $archive"
rm -f "$archive" "$archive.inputs"
buildah_ push "${policy[@]}" "$IMAGE" "oci-archive:$archive:$reference" >&2
echo "$inputs" > "$archive.inputs"
# Each build leaves the previous image and its stages unnamed: without this the storage grew by 1.4 GB a build. The
# stages' working containers go first (they hold their images); a prune that fails leaves the archive as it is.
buildah_ rm --all >/dev/null 2>&1 || true
buildah_ rmi --prune >/dev/null 2>&1 || true
load_into_containerd
step "done: $(du -h "$archive" | cut -f1) compressed"
echo "$archive"
