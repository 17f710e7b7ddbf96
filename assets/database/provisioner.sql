-- Generated from the migrations crate by `make generate`; do not edit by hand.
-- The service applies these migrations itself at start-up (or run `cargo run -p migrations -- up`).

CREATE TABLE "runtime" ( "id" uuid NOT NULL PRIMARY KEY, "name" varchar(63) NOT NULL, "description" text, "labels" jsonb NOT NULL, "topology" varchar(32) NOT NULL, "cloud" varchar(16) NOT NULL, "region" varchar(64) NOT NULL, "environment" varchar(63) NOT NULL, "credential_id" varchar(255) NOT NULL, "cluster_config" jsonb NOT NULL, "last_operation_id" uuid, "created_at" timestamp with time zone NOT NULL, "updated_at" timestamp with time zone NOT NULL, "deleted_at" timestamp with time zone );

CREATE TABLE "operation" ( "id" uuid NOT NULL PRIMARY KEY, "runtime_id" uuid NOT NULL, "operation_type" varchar(16) NOT NULL, "state" varchar(16) NOT NULL, "stage" varchar(64) NOT NULL, "message" text NOT NULL, "last_error_message" text, "last_error_reason" varchar(64), "last_error_component" varchar(64), "attempts" integer NOT NULL DEFAULT 0, "owner" varchar(255), "lease_expires_at" timestamp with time zone, "created_at" timestamp with time zone NOT NULL, "started_at" timestamp with time zone, "updated_at" timestamp with time zone NOT NULL, "finished_at" timestamp with time zone, CONSTRAINT "operation_runtime_id_fkey" FOREIGN KEY ("runtime_id") REFERENCES "runtime" ("id") ON DELETE RESTRICT );

CREATE TABLE "idempotency_key" ( "key" varchar(255) NOT NULL PRIMARY KEY, "request_fingerprint" varchar(64) NOT NULL, "runtime_id" uuid NOT NULL, "operation_id" uuid NOT NULL, "created_at" timestamp with time zone NOT NULL, CONSTRAINT "idempotency_key_runtime_id_fkey" FOREIGN KEY ("runtime_id") REFERENCES "runtime" ("id") ON DELETE CASCADE );

CREATE INDEX "operation_runtime_id_created_at_idx" ON "operation" ("runtime_id", "created_at");

CREATE INDEX "operation_state_created_at_idx" ON "operation" ("state", "created_at");

CREATE UNIQUE INDEX "operation_one_active_per_runtime_idx" ON "operation" ("runtime_id") WHERE "state" IN ('Pending', 'InProgress');

CREATE UNIQUE INDEX "runtime_live_name_idx" ON "runtime" ("name") WHERE "deleted_at" IS NULL;

ALTER TABLE "operation" ADD COLUMN "claim_token" uuid;

ALTER TABLE "operation" ADD COLUMN "claims" integer NOT NULL DEFAULT 0;

ALTER TABLE "operation" ADD COLUMN "progress_since_claim" bool NOT NULL DEFAULT FALSE;

UPDATE "operation" SET "claims" = "attempts";

ALTER TABLE "operation" ADD COLUMN "terraform_provider" varchar;

ALTER TABLE "operation" ADD COLUMN "plan_summary" text;

ALTER TABLE "operation" ADD COLUMN "target_config" json;

ALTER TABLE "operation" ADD COLUMN "dry_run" bool NOT NULL DEFAULT FALSE;

ALTER TABLE "runtime" ADD COLUMN "preview" bool NOT NULL DEFAULT FALSE;

DROP INDEX "runtime_live_name_idx";

CREATE UNIQUE INDEX "runtime_live_name_idx" ON "runtime" ("name") WHERE "deleted_at" IS NULL AND NOT "preview";

ALTER TABLE "runtime" ADD COLUMN "hibernated" bool NOT NULL DEFAULT FALSE;

ALTER TABLE "operation" ADD COLUMN "requested_by" varchar(255);

CREATE TABLE "operation_stage" ( "operation_id" uuid NOT NULL, "stage" varchar(64) NOT NULL, "entered_at" timestamp with time zone NOT NULL, PRIMARY KEY ("operation_id", "stage"), CONSTRAINT "operation_stage_operation_id_fkey" FOREIGN KEY ("operation_id") REFERENCES "operation" ("id") ON DELETE CASCADE );

ALTER TABLE "operation" ADD COLUMN "cancel_requested_by" varchar(255);

CREATE TABLE "operation_log" ( "operation_id" uuid NOT NULL, "container" varchar(64) NOT NULL, "content" bytea NOT NULL, "printed_bytes" bigint NOT NULL, "archived_at" timestamp with time zone NOT NULL, PRIMARY KEY ("operation_id", "container"), CONSTRAINT "operation_log_operation_id_fkey" FOREIGN KEY ("operation_id") REFERENCES "operation" ("id") ON DELETE CASCADE );

CREATE INDEX "operation_log_archived_at_idx" ON "operation_log" ("archived_at");

ALTER TABLE "operation" ADD COLUMN "kubeconfig_sha256" varchar(64) NULL;

ALTER TABLE "runtime" ADD COLUMN "state_bucket" varchar(63) NULL;

CREATE TABLE "caller_idempotency_key" ( "caller" varchar(512) NOT NULL, "key" varchar(255) NOT NULL, "request_fingerprint" varchar(64) NOT NULL, "runtime_id" uuid NOT NULL, "operation_id" uuid NOT NULL, "created_at" timestamp with time zone NOT NULL, PRIMARY KEY ("caller", "key") );

CREATE INDEX "caller_idempotency_key_created_at_idx" ON "caller_idempotency_key" ("created_at");

ALTER TABLE "runtime" ADD COLUMN "tenant" varchar(64) NULL;

CREATE INDEX "runtime_by_tenant" ON "runtime" ("tenant", "id");

ALTER TABLE "operation" ADD COLUMN "retry_of" uuid NULL;

ALTER TABLE "runtime" ADD COLUMN "deletion_protection" bool NOT NULL DEFAULT FALSE;

ALTER TABLE "runtime" ADD COLUMN "approval_policy" text NOT NULL DEFAULT 'auto';

ALTER TABLE "operation" ADD COLUMN "saved_plan_sha256" text;

ALTER TABLE "operation" ADD COLUMN "approval_expires_at" timestamp with time zone;

ALTER TABLE "operation" ADD COLUMN "approved_by" text;

ALTER TABLE "operation" ADD COLUMN "approved_at" timestamp with time zone;

DROP INDEX "operation_one_active_per_runtime_idx";

CREATE UNIQUE INDEX "operation_one_active_per_runtime_idx" ON "operation" ("runtime_id") WHERE "state" IN ('Pending', 'InProgress', 'AwaitingApproval');

ALTER TABLE "operation" ADD COLUMN "forced" text NULL;

ALTER TABLE "operation" ADD COLUMN "approval_policy" text NULL;

ALTER TABLE "operation" ADD COLUMN "trace_parent" text NULL;

CREATE INDEX "runtime_labels_idx" ON "runtime" USING GIN ("labels" jsonb_path_ops);

DROP INDEX "runtime_live_name_idx";

CREATE UNIQUE INDEX "runtime_live_name_idx" ON "runtime" ("name") WHERE "deleted_at" IS NULL AND NOT "preview" AND "tenant" IS NULL;

CREATE UNIQUE INDEX "runtime_live_tenant_name_idx" ON "runtime" ("tenant", "name") WHERE "deleted_at" IS NULL AND NOT "preview" AND "tenant" IS NOT NULL;

ALTER TABLE "runtime" ADD COLUMN "api_allowed_cidrs" json NULL;

ALTER TABLE "operation" ADD COLUMN "target_api_allowed_cidrs" json NULL;

ALTER TABLE "runtime" ADD COLUMN "managed_by" varchar NULL;

CREATE INDEX "operation_updated_at_idx" ON "operation" ("updated_at");

CREATE INDEX "runtime_managed_idx" ON "runtime" ("id") WHERE "managed_by" IS NOT NULL;

ALTER TABLE "operation" ADD COLUMN "minors" text NULL;

ALTER TABLE "runtime" ADD COLUMN "kubeconfig_expires_at" timestamp with time zone NULL;

ALTER TABLE "runtime" ADD COLUMN "certificates" text NULL;

ALTER TABLE "runtime" ADD COLUMN "certificates_due_at" timestamp with time zone NULL;

CREATE INDEX "runtime_by_certificates_due_at" ON "runtime" ("certificates_due_at");

ALTER TABLE "operation" ALTER COLUMN "operation_type" TYPE varchar(32), ALTER COLUMN "operation_type" SET NOT NULL;
