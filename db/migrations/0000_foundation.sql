CREATE TABLE "api_tokens" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"user_id" uuid NOT NULL,
	"name" text NOT NULL,
	"token_hash" text NOT NULL,
	"token_prefix" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "connector_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"connector_id" uuid NOT NULL,
	"bucket_start" timestamp with time zone NOT NULL,
	"bucket_seconds" integer NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"failures" bigint DEFAULT 0 NOT NULL,
	"bytes_sent" bigint DEFAULT 0 NOT NULL,
	"bytes_received" bigint DEFAULT 0 NOT NULL,
	"latency_sum_ms" double precision DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "connectors" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"project_id" uuid NOT NULL,
	"credential_id" uuid,
	"name" text NOT NULL,
	"kind" text NOT NULL,
	"provider" text DEFAULT 'static' NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"weight" integer DEFAULT 1 NOT NULL,
	"countries" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"domain_allow" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"domain_deny" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"healthcheck_url" text,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"rate_limit_config" jsonb,
	"traffic_config" jsonb,
	"traffic_reset_at" timestamp with time zone,
	"pending_deletion" boolean DEFAULT false NOT NULL,
	"last_error" text,
	"consecutive_errors" integer DEFAULT 0 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "connectors_weight_check" CHECK ("connectors"."weight" between 1 and 100),
	CONSTRAINT "connectors_kind_check" CHECK ("connectors"."kind" in ('static', 'vendor', 'provider_api', 'cloud'))
);
--> statement-breakpoint
CREATE TABLE "credentials" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"project_id" uuid NOT NULL,
	"name" text NOT NULL,
	"provider" text NOT NULL,
	"config" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "failure_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"connector_id" uuid,
	"kind" text NOT NULL,
	"vendor_status" integer,
	"bucket_start" timestamp with time zone NOT NULL,
	"bucket_seconds" integer NOT NULL,
	"count" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "host_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"connector_id" uuid,
	"host" text NOT NULL,
	"bucket_start" timestamp with time zone NOT NULL,
	"bucket_seconds" integer NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"failures" bigint DEFAULT 0 NOT NULL,
	"bytes_sent" bigint DEFAULT 0 NOT NULL,
	"bytes_received" bigint DEFAULT 0 NOT NULL,
	"latency_sum_ms" double precision DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "metric_flushes" (
	"flush_id" text PRIMARY KEY NOT NULL,
	"committed_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "metric_totals" (
	"entity_kind" text NOT NULL,
	"entity_id" uuid NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"failures" bigint DEFAULT 0 NOT NULL,
	"bytes_sent" bigint DEFAULT 0 NOT NULL,
	"bytes_received" bigint DEFAULT 0 NOT NULL,
	"latency_sum_ms" double precision DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "metric_totals_entity_kind_entity_id_pk" PRIMARY KEY("entity_kind","entity_id"),
	CONSTRAINT "metric_totals_kind_check" CHECK ("metric_totals"."entity_kind" in ('proxy', 'project', 'tunnel_device'))
);
--> statement-breakpoint
CREATE TABLE "project_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"bucket_start" timestamp with time zone NOT NULL,
	"bucket_seconds" integer NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"failures" bigint DEFAULT 0 NOT NULL,
	"bytes_sent" bigint DEFAULT 0 NOT NULL,
	"bytes_received" bigint DEFAULT 0 NOT NULL,
	"latency_sum_ms" double precision DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "projects" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"username" text NOT NULL,
	"password" text NOT NULL,
	"strategy" text DEFAULT 'round_robin' NOT NULL,
	"location_policy" text DEFAULT 'off' NOT NULL,
	"location_preflight" text DEFAULT 'off' NOT NULL,
	"session_ttl_seconds" integer DEFAULT 300 NOT NULL,
	"sticky_quarantine" boolean DEFAULT false NOT NULL,
	"metrics_retention_days" integer DEFAULT 90 NOT NULL,
	"connection_timeout_seconds" integer DEFAULT 30 NOT NULL,
	"max_retries" integer DEFAULT 2 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "projects_strategy_check" CHECK ("projects"."strategy" in ('round_robin', 'random', 'least_used', 'health_based', 'sticky')),
	CONSTRAINT "projects_location_policy_check" CHECK ("projects"."location_policy" in ('off', 'warn', 'strict')),
	CONSTRAINT "projects_location_preflight_check" CHECK ("projects"."location_preflight" in ('off', 'report', 'retry', 'reject'))
);
--> statement-breakpoint
CREATE TABLE "proxies" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"project_id" uuid NOT NULL,
	"connector_id" uuid NOT NULL,
	"scheme" text NOT NULL,
	"host" text NOT NULL,
	"port" integer NOT NULL,
	"username" text,
	"password" text,
	"country" text,
	"country_source" text,
	"metadata" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"status" text DEFAULT 'initializing' NOT NULL,
	"status_changed_at" timestamp with time zone DEFAULT now() NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "proxies_scheme_check" CHECK ("proxies"."scheme" in ('http', 'https', 'socks4', 'socks5')),
	CONSTRAINT "proxies_port_check" CHECK ("proxies"."port" between 1 and 65535),
	CONSTRAINT "proxies_status_check" CHECK ("proxies"."status" in ('initializing', 'healthy', 'degraded', 'unhealthy', 'draining', 'terminating'))
);
--> statement-breakpoint
CREATE TABLE "proxy_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"proxy_id" uuid NOT NULL,
	"status" text,
	"bucket_start" timestamp with time zone NOT NULL,
	"bucket_seconds" integer NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"failures" bigint DEFAULT 0 NOT NULL,
	"bytes_sent" bigint DEFAULT 0 NOT NULL,
	"bytes_received" bigint DEFAULT 0 NOT NULL,
	"latency_sum_ms" double precision DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tunnel_device_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"project_id" uuid NOT NULL,
	"device_id" uuid NOT NULL,
	"protocol" text NOT NULL,
	"bucket_start" timestamp with time zone NOT NULL,
	"bucket_seconds" integer NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"successes" bigint DEFAULT 0 NOT NULL,
	"failures" bigint DEFAULT 0 NOT NULL,
	"bytes_sent" bigint DEFAULT 0 NOT NULL,
	"bytes_received" bigint DEFAULT 0 NOT NULL,
	"latency_sum_ms" double precision DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "users" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"username" text NOT NULL,
	"password_hash" text NOT NULL,
	"role" text NOT NULL,
	"email" text,
	"is_active" boolean DEFAULT true NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_login_at" timestamp with time zone,
	CONSTRAINT "users_role_check" CHECK ("users"."role" in ('admin', 'editor', 'viewer'))
);
--> statement-breakpoint
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "connector_metrics" ADD CONSTRAINT "connector_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "connector_metrics" ADD CONSTRAINT "connector_metrics_connector_id_connectors_id_fk" FOREIGN KEY ("connector_id") REFERENCES "public"."connectors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "connectors" ADD CONSTRAINT "connectors_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "connectors" ADD CONSTRAINT "connectors_credential_id_credentials_id_fk" FOREIGN KEY ("credential_id") REFERENCES "public"."credentials"("id") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "credentials" ADD CONSTRAINT "credentials_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "failure_metrics" ADD CONSTRAINT "failure_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "failure_metrics" ADD CONSTRAINT "failure_metrics_connector_id_connectors_id_fk" FOREIGN KEY ("connector_id") REFERENCES "public"."connectors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "host_metrics" ADD CONSTRAINT "host_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "host_metrics" ADD CONSTRAINT "host_metrics_connector_id_connectors_id_fk" FOREIGN KEY ("connector_id") REFERENCES "public"."connectors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_metrics" ADD CONSTRAINT "project_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "proxies" ADD CONSTRAINT "proxies_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "proxies" ADD CONSTRAINT "proxies_connector_id_connectors_id_fk" FOREIGN KEY ("connector_id") REFERENCES "public"."connectors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "proxy_metrics" ADD CONSTRAINT "proxy_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "proxy_metrics" ADD CONSTRAINT "proxy_metrics_proxy_id_proxies_id_fk" FOREIGN KEY ("proxy_id") REFERENCES "public"."proxies"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tunnel_device_metrics" ADD CONSTRAINT "tunnel_device_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "api_tokens_token_hash_key" ON "api_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "api_tokens_user_id_idx" ON "api_tokens" USING btree ("user_id");--> statement-breakpoint
CREATE INDEX "connector_metrics_entity_idx" ON "connector_metrics" USING btree ("connector_id","bucket_start");--> statement-breakpoint
CREATE INDEX "connector_metrics_tier_idx" ON "connector_metrics" USING btree ("project_id","bucket_seconds","bucket_start");--> statement-breakpoint
CREATE UNIQUE INDEX "connectors_project_name_key" ON "connectors" USING btree ("project_id",lower("name"));--> statement-breakpoint
CREATE INDEX "connectors_credential_id_idx" ON "connectors" USING btree ("credential_id");--> statement-breakpoint
CREATE UNIQUE INDEX "credentials_project_name_key" ON "credentials" USING btree ("project_id",lower("name"));--> statement-breakpoint
CREATE INDEX "failure_metrics_tier_idx" ON "failure_metrics" USING btree ("project_id","bucket_seconds","bucket_start");--> statement-breakpoint
CREATE INDEX "host_metrics_entity_idx" ON "host_metrics" USING btree ("project_id","host","bucket_start");--> statement-breakpoint
CREATE INDEX "host_metrics_tier_idx" ON "host_metrics" USING btree ("project_id","bucket_seconds","bucket_start");--> statement-breakpoint
CREATE INDEX "project_metrics_tier_idx" ON "project_metrics" USING btree ("project_id","bucket_seconds","bucket_start");--> statement-breakpoint
CREATE UNIQUE INDEX "projects_name_key" ON "projects" USING btree (lower("name"));--> statement-breakpoint
CREATE UNIQUE INDEX "projects_username_key" ON "projects" USING btree (lower("username"));--> statement-breakpoint
CREATE UNIQUE INDEX "proxies_identity_key" ON "proxies" USING btree ("connector_id","scheme",lower("host"),"port",coalesce("username", ''));--> statement-breakpoint
CREATE INDEX "proxies_project_created_idx" ON "proxies" USING btree ("project_id","created_at","id");--> statement-breakpoint
CREATE INDEX "proxies_connector_created_idx" ON "proxies" USING btree ("connector_id","created_at","id");--> statement-breakpoint
CREATE INDEX "proxies_project_status_idx" ON "proxies" USING btree ("project_id","status");--> statement-breakpoint
CREATE INDEX "proxy_metrics_entity_idx" ON "proxy_metrics" USING btree ("proxy_id","bucket_start");--> statement-breakpoint
CREATE INDEX "proxy_metrics_tier_idx" ON "proxy_metrics" USING btree ("project_id","bucket_seconds","bucket_start");--> statement-breakpoint
CREATE INDEX "tunnel_device_metrics_entity_idx" ON "tunnel_device_metrics" USING btree ("device_id","bucket_start");--> statement-breakpoint
CREATE INDEX "tunnel_device_metrics_tier_idx" ON "tunnel_device_metrics" USING btree ("project_id","bucket_seconds","bucket_start");--> statement-breakpoint
CREATE UNIQUE INDEX "users_username_key" ON "users" USING btree (lower("username"));