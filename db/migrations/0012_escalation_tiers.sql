ALTER TABLE "connectors" ADD COLUMN "tier" integer;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "escalation" jsonb;--> statement-breakpoint
ALTER TABLE "connectors" ADD CONSTRAINT "connectors_tier_check" CHECK ("connectors"."tier" between 0 and 99);