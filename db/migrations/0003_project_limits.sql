DROP INDEX "connector_metrics_entity_idx";--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "traffic_quota" jsonb;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "traffic_reset_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "rate_limit" jsonb;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "max_connections" integer;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "allowed_cidrs" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "passwordless_cidrs" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
CREATE INDEX "project_metrics_usage_idx" ON "project_metrics" USING btree ("project_id","bucket_start","bytes_sent","bytes_received");--> statement-breakpoint
CREATE INDEX "connector_metrics_entity_idx" ON "connector_metrics" USING btree ("connector_id","bucket_start","bytes_sent","bytes_received");