CREATE TABLE "connector_exit_ips" (
	"connector_id" uuid NOT NULL,
	"ip" text NOT NULL,
	"project_id" uuid NOT NULL,
	"first_seen_at" timestamp with time zone NOT NULL,
	"last_seen_at" timestamp with time zone NOT NULL,
	"state_at" timestamp with time zone NOT NULL,
	"country" text,
	"region" text,
	"city" text,
	"asn" integer,
	"claimed_country" text,
	"sources" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"observations" bigint DEFAULT 0 NOT NULL,
	"hand_outs" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "connector_exit_ips_connector_id_ip_pk" PRIMARY KEY("connector_id","ip")
);
--> statement-breakpoint
CREATE TABLE "geo_databases" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"format" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"position" integer DEFAULT 0 NOT NULL,
	"origin" text NOT NULL,
	"url" text,
	"auth" jsonb,
	"update_interval_hours" integer,
	"checksum" text,
	"size_bytes" bigint,
	"entries" integer,
	"version" text,
	"last_update_at" timestamp with time zone,
	"last_error" text,
	"last_error_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "geo_databases_format_check" CHECK ("geo_databases"."format" in ('mmdb', 'geofeed')),
	CONSTRAINT "geo_databases_origin_check" CHECK ("geo_databases"."origin" in ('upload', 'url'))
);
--> statement-breakpoint
CREATE TABLE "geo_files" (
	"checksum" text PRIMARY KEY NOT NULL,
	"bytes" "bytea" NOT NULL,
	"size_bytes" bigint NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "geo_settings" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"location_sources" jsonb DEFAULT '["database","vendor","endpoint"]'::jsonb NOT NULL,
	"location_conflict_rule" text DEFAULT 'consensus' NOT NULL,
	"observation_retention_days" integer DEFAULT 30 NOT NULL,
	"exit_ip_retention_days" integer,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "geo_settings_single_row" CHECK ("geo_settings"."id" = 1),
	CONSTRAINT "geo_settings_conflict_rule_check" CHECK ("geo_settings"."location_conflict_rule" in ('consensus', 'first'))
);
--> statement-breakpoint
CREATE TABLE "ip_observations" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"observed_at" timestamp with time zone NOT NULL,
	"ip" text NOT NULL,
	"project_id" uuid,
	"connector_id" uuid,
	"proxy_id" uuid,
	"source" text NOT NULL,
	"session_id" varchar(255),
	"instance_id" varchar(64),
	"country" text,
	"region" text,
	"city" text,
	"asn" integer,
	"claimed_country" text,
	"hand_out" boolean DEFAULT false NOT NULL
);
--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "location_sources" jsonb;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "location_conflict_rule" text;--> statement-breakpoint
ALTER TABLE "proxies" ADD COLUMN "vendor_country" text;--> statement-breakpoint
ALTER TABLE "proxies" ADD COLUMN "location_conflict" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "proxies" ADD COLUMN "location" jsonb;--> statement-breakpoint
ALTER TABLE "proxies" ADD COLUMN "location_checked_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "connector_exit_ips" ADD CONSTRAINT "connector_exit_ips_connector_id_connectors_id_fk" FOREIGN KEY ("connector_id") REFERENCES "public"."connectors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "connector_exit_ips_project_idx" ON "connector_exit_ips" USING btree ("project_id","last_seen_at");--> statement-breakpoint
CREATE INDEX "connector_exit_ips_last_seen_idx" ON "connector_exit_ips" USING btree ("last_seen_at");--> statement-breakpoint
CREATE UNIQUE INDEX "geo_databases_name_key" ON "geo_databases" USING btree (lower("name"));--> statement-breakpoint
CREATE INDEX "ip_observations_observed_idx" ON "ip_observations" USING btree ("observed_at");--> statement-breakpoint
CREATE INDEX "ip_observations_connector_idx" ON "ip_observations" USING btree ("connector_id","observed_at");--> statement-breakpoint
CREATE INDEX "ip_observations_proxy_idx" ON "ip_observations" USING btree ("proxy_id","observed_at");--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_location_conflict_rule_check" CHECK ("projects"."location_conflict_rule" is null or "projects"."location_conflict_rule" in ('consensus', 'first'));--> statement-breakpoint
INSERT INTO "geo_settings" ("id") VALUES (1) ON CONFLICT DO NOTHING;
--> statement-breakpoint
UPDATE "proxies" SET "vendor_country" = "country" WHERE "country_source" = 'vendor';
