# The provisioner's commands. `make run` and `make test-really-local` do all set-up on a fresh machine.

TEST_DATABASE_URL ?= postgres://postgres:postgres@127.0.0.1:5432/postgres
export TEST_DATABASE_URL

.PHONY: run test-really-local test test-unit schemathesis fuzz bench postgres control-plane node helm kubectl image tofu terraform-providers fake-gcs test-tools playground browser-test-tools dev-cluster gqlgen generate migrate fmt lint

## Starts the server on the embedded SQLite default (./data/provisioner.db) with a development auth-service;
## playground at http://127.0.0.1:3000/graphql
run:
	@# The service, the runner its image carries, and the supervisor of the local cluster and cloud (local-cloud).
	cargo build --locked -p provisioner -p terraform-runner -p test-support \
		--bin provisioner --bin terraform-runner --bin local-cloud
	@tools/dev-auth-service.py --port 8081 & auth=$$!; trap 'kill $$auth 2>/dev/null' EXIT INT TERM; \
	APP_LOG_FORMAT=$${APP_LOG_FORMAT:-text} \
	AUTH_SERVICE_BASE_URL=$${AUTH_SERVICE_BASE_URL:-http://127.0.0.1:8081} \
	APP_AUTH_OAUTH_PATH=$${APP_AUTH_OAUTH_PATH:-dev/auth-oauth.yaml} \
	APP_AUTH_ENABLED=$${APP_AUTH_ENABLED:-false} \
	APP_GRAPHQL_INTROSPECTION=$${APP_GRAPHQL_INTROSPECTION:-true} \
	APP_API_ALLOWED_CIDRS=$${APP_API_ALLOWED_CIDRS:-127.0.0.0/8} \
	APP_PLAYGROUND_ASSETS_DIR=$${APP_PLAYGROUND_ASSETS_DIR:-$$(tools/build-playground.sh | tail -n1)} \
	"$${CARGO_TARGET_DIR:-target}/debug/local-cloud"

## Installs and starts what the tests need (PostgreSQL, the test control plane and a real node, helm, kubectl, tofu,
## the Terraform providers, fake-gcs-server, moto and the AWS CLI, the playground's assets, Chromium and
## playwright-core), then builds the image from the tests' binaries and runs every test.
test-really-local: postgres control-plane node helm kubectl tofu terraform-providers fake-gcs test-tools playground browser-test-tools previous-release
	$(MAKE) --no-print-directory test
	$(MAKE) --no-print-directory schemathesis

## Runs the tests against an already running PostgreSQL and an already built control plane, tofu, providers and
## test tools.
test:
	@# Databases left by earlier test runs (each test creates its own).
	@psql "$(TEST_DATABASE_URL)" -qtA -c "SELECT format('DROP DATABASE %I WITH (FORCE);', datname) FROM pg_database WHERE datname LIKE 'provisioner\_test\_%'" \
		| psql "$(TEST_DATABASE_URL)" -q >/dev/null
	@# The runner and pipeline tests (package provisioner) run the binary of another package (the end-to-end test
	@# provisionerctl too, as the quick start does), which Cargo does not
	@# build for them.
	cargo build --locked -p terraform-runner -p provisionerctl
	$(TEST_ENV) cargo test --workspace --locked --no-run
	@# The end-to-end test's image holds the binaries just built (tools/build-image.sh; `make image` builds release).
	archive=$${TEST_IMAGE_ARCHIVE:-$$(RUST_BIN_DIR="$${CARGO_TARGET_DIR:-$(CURDIR)/target}/debug" tools/build-image.sh | tail -n1)} && \
		$(TEST_ENV) TEST_IMAGE_ARCHIVE="$$archive" cargo test --workspace --locked
	@# Flaky tests are found before they land: the fast tests that share the integration binary's process (no
	@# control-plane restarts) run twice more, with eight threads; their counts are not added to the total.
	@for round in 1 2; do \
		log="$${CARGO_TARGET_DIR:-$(CURDIR)/target}/flake-check.log"; \
		$(TEST_ENV) cargo test --locked -p provisioner --test integration -- --test-threads 8 $(FLAKE_CHECK_TESTS) \
			> "$$log" 2>&1 || { cat "$$log"; echo "flake check round $$round failed"; exit 1; }; \
		grep -E '^test result' "$$log" | sed "s/^test result: ok\./flake check round $$round:/"; \
	done

## The unit tests, which need no outside tool (no database server, cluster, tofu or cloud emulator): the fast loop
## while changing code (CONTRIBUTING.md). Pure rules live next to their code, so most changes are covered here.
test-unit:
	cargo test --locked --workspace --lib

## The packages that ship (the service, the runner and what they share), as opposed to tests and tools.
PRODUCT_PACKAGES = -p provisioner -p terraform-runner -p runner-contract -p process-support -p migrations -p provisionerctl

## The variables that point the tests at what `make test-really-local` built.
TEST_ENV = TEST_TERRAFORM_RUNNER_BIN="$${CARGO_TARGET_DIR:-$(CURDIR)/target}/debug/terraform-runner" \
	TEST_CONTROL_PLANE_BIN_DIR="$${TEST_CONTROL_PLANE_BIN_DIR:-$$(tools/build-control-plane.sh | tail -n1)}" \
	TEST_NODE_BIN_DIR="$${TEST_NODE_BIN_DIR:-$$(tools/build-node.sh | tail -n1)}" \
	TEST_HELM_BIN="$${TEST_HELM_BIN:-$$(tools/build-helm.sh | tail -n1)/helm}" \
	TEST_KUBECTL_BIN="$${TEST_KUBECTL_BIN:-$$(tools/build-kubectl.sh | tail -n1)/kubectl}" \
	TEST_TOFU_BIN="$${TEST_TOFU_BIN:-$$(tools/build-tofu.sh | tail -n1)/tofu}" \
	TEST_TERRAFORM_PROVIDERS="$${TEST_TERRAFORM_PROVIDERS:-$$(tools/build-terraform-providers.sh | tail -n1)}" \
	TEST_FAKE_GCS_BIN="$${TEST_FAKE_GCS_BIN:-$$(tools/build-fake-gcs.sh | tail -n1)/fake-gcs-server}" \
	TEST_AWS_TOOLS_BIN_DIR="$${TEST_AWS_TOOLS_BIN_DIR:-$$(tools/test-tools.sh | tail -n1)}" \
	TEST_IAM_TOOLS_DIR="$${TEST_IAM_TOOLS_DIR:-$$(tools/iam-test-tools.sh | tail -n1)}" \
	TEST_PLAYGROUND_ASSETS_DIR="$${TEST_PLAYGROUND_ASSETS_DIR:-$$(tools/build-playground.sh | tail -n1)}" \
	TEST_BROWSER_TOOLS_DIR="$${TEST_BROWSER_TOOLS_DIR:-$$(tools/browser-test-tools.sh | tail -n1)}" \
	TEST_PREVIOUS_RELEASE_BIN="$${TEST_PREVIOUS_RELEASE_BIN:-$$(tools/build-previous-release.sh | tail -n1)/provisioner}"
## The flake check's tests (module prefixes of the integration binary).
FLAKE_CHECK_TESTS = authn:: api:: limits:: history:: day_two:: cancel::

## Fuzzes the REST API with Schemathesis (installed into a venv under ~/.cache once) against its OpenAPI
## document, on a real server with SQLite in a temporary folder. SCHEMATHESIS_MAX_EXAMPLES, SCHEMATHESIS_SEED.
schemathesis:
	tools/schemathesis.sh

## cargo-fuzz targets (nightly; cargo-fuzz is installed into ~/.cache once): `validate` and `render`, each for
## FUZZ_RUNS runs.
FUZZ_RUNS ?= 50000
fuzz:
	tools/fuzz.sh $(FUZZ_RUNS)

## Benchmark (issue 8): start-up, status reads against a bare baseline, API-server requests per read, a burst of
## provisioning requests, memory. Prints a table and writes target/bench/results.json. BENCH_ARGS passes flags.
bench: postgres control-plane
	cargo build --release --locked --bin provisioner
	TEST_CONTROL_PLANE_BIN_DIR="$$(tools/build-control-plane.sh | tail -n1)" \
		TEST_DATABASE_URL="$(TEST_DATABASE_URL)" \
		cargo run --release --locked -p provisioner-bench --bin bench -- $(BENCH_ARGS)

postgres:
	tools/postgres.sh

## Builds etcd, kube-apiserver and kube-controller-manager from the Go module proxy into ~/.cache (once).
control-plane:
	tools/build-control-plane.sh

## Builds the real node (kubelet, containerd, the CNI loopback plugin, pause and busybox images) from the Go module
## proxy into ~/.cache (once); runc comes from Debian's packages. The real-node and end-to-end tests use it.
node:
	tools/build-node.sh

## Builds the helm CLI from the Go module proxy into ~/.cache (once): the chart's tests and `make generate` use it.
helm:
	tools/build-helm.sh

## Builds kubectl at the control plane's Kubernetes version from the Go module proxy into ~/.cache (once); the
## integration tests run it against the test control plane (TEST_KUBECTL_BIN).
kubectl:
	tools/build-kubectl.sh

## Builds OpenTofu's CLI (tofu) from the Go module proxy into ~/.cache (once); the runner and module tests use it.
tofu:
	tools/build-tofu.sh

## Builds the Terraform providers hashicorp/aws and hashicorp/google from the Go module proxy into ~/.cache (once;
## the AWS one takes about 40 min on two cores) as a tofu filesystem mirror; the module and runner tests use them.
terraform-providers:
	tools/build-terraform-providers.sh

## Installs the playground's browser assets (GraphiQL, React, graphql-ws, Swagger UI) from the npm registry as
## assets/playground/package-lock.json pins them, into ~/.cache (once per lock file); the service serves them.
playground:
	tools/build-playground.sh

## Installs Chromium from Debian's packages and playwright-core (pinned by tests/browser/package-lock.json) for the
## browser test.
browser-test-tools:
	tools/browser-test-tools.sh

## Builds fake-gcs-server (a local Google Cloud Storage) from the Go module proxy into ~/.cache (once); the runner's
## GCP tests use it.
fake-gcs:
	tools/build-fake-gcs.sh

## Installs moto's server and the AWS CLI v1 (pinned, into a venv under ~/.cache), shellcheck when missing, and the
## IAM policy simulator the module tests evaluate the node roles with (pinned by tests/iam/package-lock.json).
test-tools:
	tools/test-tools.sh
	tools/iam-test-tools.sh

## Builds the provisioner of the previous release (tests/fixtures/previous-release) once, for the mixed-version
## test (tools/build-previous-release.sh).
previous-release:
	tools/build-previous-release.sh

## Builds the image from the Dockerfile here, without a Docker engine or a registry (tools/build-image.sh: a
## shell-less Debian base made by mmdebstrap, release binaries, tofu and the providers from their caches, buildah)
## and writes it as an OCI archive under ~/.cache; the last line printed is its path.
image: tofu terraform-providers playground
	tools/build-image.sh

## Runs the same control plane in the foreground for local development and writes a kubeconfig.
dev-cluster: control-plane
	TEST_CONTROL_PLANE_BIN_DIR="$$(tools/build-control-plane.sh | tail -n1)" cargo run -p test-control-plane --bin dev-cluster

## Writes schema.graphql from the code.
gqlgen:
	./gqlgen.sh

## Writes every generated file: schema.graphql, assets/openapi.json, assets/database/provisioner.sql,
## docs/api/errors.md and resources/cluster-provisioner.yaml (the chart rendered for `kubectl apply -k resources/`).
generate: gqlgen
	cargo run --quiet --bin generate -- openapi > assets/openapi.json
	cargo run --quiet --bin generate -- sql > assets/database/provisioner.sql
	cargo run --quiet --bin generate -- errors > docs/api/errors.md
	cargo run --quiet --bin generate -- crd > charts/cluster-provisioner/files/crds/runtimes.provisioner.kubeopera.io.json
	cargo run --quiet --bin generate -- crd-reference > docs/reference/runtime-resource.md
	cargo run --quiet --bin generate -- configuration > docs/operator/configuration.md.generated \
		&& mv docs/operator/configuration.md.generated docs/operator/configuration.md
	tools/render-chart.sh "$$(tools/build-helm.sh | tail -n1)/helm" > resources/cluster-provisioner.yaml

## Applies the migrations to DATABASE_URL (the server also does this at start-up).
migrate:
	cargo run -p migrations -- up

fmt:
	cargo fmt --all

## Formatting, clippy with warnings as errors, no function of the product longer than clippy.toml's threshold (test
## scenarios read top to bottom and are exempt), and no import cycles between modules.
lint:
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets --locked -- -D warnings
	cargo clippy --locked $(PRODUCT_PACKAGES) --lib --bins -- -D warnings -W clippy::too_many_lines
	tools/import-cycles.py src migrations/src tools/test-control-plane/src benches/src crates/*/src
	@# A doc link to an item that moved or went is an error (private items too: most of the docs are theirs).
	RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links -A rustdoc::private_intra_doc_links" \
		cargo doc --locked --no-deps --workspace --document-private-items --quiet
