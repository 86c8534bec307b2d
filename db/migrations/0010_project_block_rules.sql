ALTER TABLE "projects" ADD COLUMN "block_rules" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "retry" jsonb;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "block_body_bytes" integer;