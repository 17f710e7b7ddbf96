# syntax=docker/dockerfile:1.7
# One image for the service and for its Jobs (TERRAFORM_RUNNER_IMAGE names the same image):
#   the Deployment runs `provisioner` (the default command, also named by the Deployment);
#   each Job (src/executor/job.rs) names its own commands: the init container `git clone ...`, the runner
#   container `terraform-runner --action apply|destroy` (crates/terraform-runner). There is deliberately no ENTRYPOINT: the default is only
#   CMD ["provisioner"], so `docker run IMAGE terraform-runner --action apply` runs the runner as well.
# Both run as the non-root user 65532 with a read-only root filesystem; only mounted volumes are writable.
#
# ONE definition, two ways to feed it (the runtime stage and its layers are the same either way):
#
#   Anywhere (Docker/BuildKit, podman, buildah): everything is built from source and the signed repositories:
#     docker build -t kubeopera/cluster-provisioner:0.1.0 .
#   Here (`make image`, tools/build-image.sh, buildah without a Docker engine or registry):
#     --build-arg BASE_IMAGE=localhost/kubeopera-base:trixie   a root filesystem made by mmdebstrap from Debian's
#                                                              packages (ca-certificates, git, awscli, user 65532; no shell)
#     --build-arg ARTIFACTS=artifacts-prebuilt --build-context prebuilt=DIR
#                                                              DIR holds the same tree as the artifacts-built stage
#   Without gke-gcloud-auth-plugin (it comes only from Google's apt repository): --build-arg ARTIFACTS=artifacts-built.
#
# buildah 1.28 (Debian 12) resolves `FROM ${ARG}` to a stage only when the argument is given with --build-arg
# (its default is looked up as an image: containers/buildah#6719, #3939), so scripts pass BASE_IMAGE and ARTIFACTS
# explicitly. BuildKit and newer buildah honour the defaults below.
#
# Every tool is verified: Rust crates by Cargo.lock (--locked), OpenTofu and its Go modules by the hashes in
# tools/opentofu/go.sum, the Terraform providers by the registry's signed checksums (`tofu providers mirror`),
# Debian packages (git, AWS CLI v2) and gke-gcloud-auth-plugin by their signed apt repositories, the playground's
# npm packages by the integrity hashes of assets/playground/package-lock.json.

ARG RUST_VERSION=1.95
ARG GO_VERSION=1.26
ARG DEBIAN_RELEASE=trixie
# A stage name (runtime-base-apt) or an image that already has ca-certificates, git, awscli (v2), the user and group
# 65532 and /workspace owned by it (tools/build-image.sh makes one with mmdebstrap).
ARG BASE_IMAGE=runtime-base-apt
# artifacts-built-gke (default), artifacts-built (no gke-gcloud-auth-plugin), or artifacts-prebuilt.
ARG ARTIFACTS=artifacts-built-gke

# --- the two Rust binaries --------------------------------------------------------------------------------------
FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS rust-build
# The context has no .git: `--build-arg PROVISIONER_COMMIT=$(git rev-parse HEAD)` names the commit (build.rs).
ARG PROVISIONER_COMMIT=unknown
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p provisioner -p terraform-runner --bin provisioner --bin terraform-runner \
 && install -D -m 0755 -t /out target/release/provisioner target/release/terraform-runner

# --- OpenTofu, built from source at the version pinned by tools/opentofu/go.mod (the same tofu the tests use) ----
FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS tofu-build
# The go directive of the wrapper module must be met by this image's Go; never download another toolchain.
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
WORKDIR /src/tools/opentofu
COPY tools/opentofu/ ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" \
      -o /out/tofu github.com/opentofu/opentofu/cmd/tofu \
 && /out/tofu version

# --- The Terraform providers the configurations pin, mirrored at image build: Jobs never reach a registry ---------
# The versions are crates/runner-contract/src/providers.rs's (a test checks that these ARGs agree). For each one:
# `tofu providers mirror` downloads the release packages (linux/amd64 and linux/arm64) with their registry
# checksums, `tofu providers lock` writes the lock file the runner installs for that version (the release hashes
# of both platforms), and the package of the image's own platform is unpacked, so that `init` links the provider
# instead of extracting about a gigabyte per Job. Keep earlier versions here while clusters created with them
# exist: a destroy runs the version its cluster was applied with.
FROM tofu-build AS providers
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG AWS_PROVIDER_VERSION=6.47.0
ARG GOOGLE_PROVIDER_VERSION=8.0.0
RUN apt-get update && apt-get install -y --no-install-recommends unzip && rm -rf /var/lib/apt/lists/*
RUN set -eu; \
    for provider in "aws ${AWS_PROVIDER_VERSION}" "google ${GOOGLE_PROVIDER_VERSION}"; do \
      set -- $provider; name=$1; version=$2; \
      mkdir -p "/tmp/$name" && cd "/tmp/$name"; \
      printf 'terraform {\n  required_providers {\n    %s = {\n      source  = "hashicorp/%s"\n      version = "%s"\n    }\n  }\n}\n' \
        "$name" "$name" "$version" > main.tf; \
      /out/tofu providers mirror -platform=linux_amd64 -platform=linux_arm64 /tmp/packed; \
      /out/tofu providers lock -fs-mirror=/tmp/packed -platform=linux_amd64 -platform=linux_arm64; \
      install -D -m 0644 .terraform.lock.hcl "/out/locks/hashicorp-$name-$version.terraform.lock.hcl"; \
      platform="${TARGETOS}_${TARGETARCH}"; \
      unpacked="/out/providers/registry.opentofu.org/hashicorp/$name/$version/$platform"; \
      mkdir -p "$unpacked"; \
      unzip -q "/tmp/packed/registry.opentofu.org/hashicorp/$name/terraform-provider-${name}_${version}_${platform}.zip" -d "$unpacked"; \
    done; \
    printf 'provider_installation {\n  filesystem_mirror {\n    path = "%s"\n  }\n}\n' \
      /usr/local/share/kubeopera/terraform/providers > /out/tofurc

# --- The playground's browser assets, from the npm registry as assets/playground/package-lock.json pins them -----
# Node.js 24 (the LTS line of 2026) only runs npm here; nothing of it reaches the final image.
FROM node:24-${DEBIAN_RELEASE}-slim AS playground
WORKDIR /src
COPY assets/playground/package.json assets/playground/package-lock.json assets/playground/
COPY tools/build-playground.sh tools/
COPY tools/lib/npm-ci-cached.sh tools/lib/
RUN XDG_CACHE_HOME=/tmp/cache tools/build-playground.sh /out/playground

# --- gke-gcloud-auth-plugin (the exec plugin of GKE kubeconfigs), from Google's signed apt repository ------------
# Only the plugin's static binary is kept; it authenticates with Application Default Credentials
# (--use_application_default_credentials / GOOGLE_APPLICATION_CREDENTIALS), so gcloud itself is not needed.
FROM debian:${DEBIAN_RELEASE}-slim AS gke-auth
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gpg \
 && curl -fsSL https://packages.cloud.google.com/apt/doc/apt-key.gpg \
      | gpg --dearmor -o /usr/share/keyrings/cloud.google.gpg \
 && echo "deb [signed-by=/usr/share/keyrings/cloud.google.gpg] https://packages.cloud.google.com/apt cloud-sdk main" \
      > /etc/apt/sources.list.d/google-cloud-sdk.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends google-cloud-cli-gke-gcloud-auth-plugin \
 && install -D -m 0755 "$(readlink -f "$(command -v gke-gcloud-auth-plugin)")" /out/gke-gcloud-auth-plugin \
 && /out/gke-gcloud-auth-plugin --version

# --- The artifacts, as one tree: the runtime stage copies it in layers that change from rarely to often -------------
#   terraform/{providers/,locks/,tofurc}  tools/{tofu,gke-gcloud-auth-plugin}  playground/  app/{provisioner,terraform-runner}
FROM scratch AS artifacts-built
COPY --from=providers /out/providers /terraform/providers
COPY --from=providers /out/locks /terraform/locks
COPY --from=providers /out/tofurc /terraform/tofurc
COPY --from=tofu-build /out/tofu /tools/tofu
COPY --from=playground /out/playground /playground
COPY --from=rust-build /out/provisioner /out/terraform-runner /app/

FROM artifacts-built AS artifacts-built-gke
COPY --from=gke-auth /out/gke-gcloud-auth-plugin /tools/gke-gcloud-auth-plugin

# The same tree, built elsewhere (tools/build-image.sh: cargo --release, tools/build-tofu.sh, ...).
FROM scratch AS artifacts-prebuilt
COPY --from=prebuilt / /

FROM ${ARTIFACTS} AS artifacts

# --- runtime base from Debian's slim image and apt (the default) ------------------------------------------------
# git: the Job's init container clones the modules. awscli: Debian packages AWS CLI v2, whose `aws eks get-token`
# is the exec plugin of EKS kubeconfigs (checked below). ca-certificates: TLS to the clouds and the API server.
FROM debian:${DEBIAN_RELEASE}-slim AS runtime-base-apt
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git awscli \
 && rm -rf /var/lib/apt/lists/* \
 && aws --version | grep -q '^aws-cli/2\.' \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /workspace --shell /usr/sbin/nologin nonroot \
 && install -d -o 65532 -g 65532 -m 0755 /workspace

# --- runtime: no RUN here, so a base without a shell works --------------------------------------------------------
FROM ${BASE_IMAGE}
COPY --from=artifacts /terraform/ /usr/local/share/kubeopera/terraform/
COPY --from=artifacts /tools/ /usr/local/bin/
COPY --from=artifacts /playground/ /usr/local/share/kubeopera/playground/
COPY --from=artifacts /app/ /usr/local/bin/
# The Job mounts an emptyDir at /workspace (the only writable place there); the Deployment sets HOME=/tmp.
# TF_CLI_CONFIG_FILE: providers from the image's mirror only (no `direct` installation, so no registry).
ENV HOME=/workspace \
    TF_CLI_CONFIG_FILE=/usr/local/share/kubeopera/terraform/tofurc \
    TF_IN_AUTOMATION=1 \
    CHECKPOINT_DISABLE=1 \
    AWS_PAGER="" \
    USE_GKE_GCLOUD_AUTH_PLUGIN=True
USER 65532:65532
WORKDIR /workspace
EXPOSE 3000 9000
CMD ["provisioner"]
