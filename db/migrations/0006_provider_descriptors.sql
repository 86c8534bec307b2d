CREATE TABLE "provider_audit_log" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"descriptor_id" text NOT NULL,
	"version" integer NOT NULL,
	"action" text NOT NULL,
	"actor" text NOT NULL,
	"document" jsonb,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "provider_audit_log_action_check" CHECK ("provider_audit_log"."action" in ('created', 'updated', 'deleted'))
);
--> statement-breakpoint
CREATE TABLE "provider_descriptors" (
	"id" text PRIMARY KEY NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"document" jsonb NOT NULL,
	"confirmed_hosts" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "provider_audit_log_descriptor_idx" ON "provider_audit_log" USING btree ("descriptor_id","at");