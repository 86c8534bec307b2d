ALTER TABLE "projects" ADD COLUMN "traffic_quota" jsonb;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "traffic_reset_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "rate_limit" jsonb;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "max_connections" integer;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "allowed_cidrs" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "passwordless_cidrs" jsonb DEFAULT '[]'::jsonb NOT NULL;