CREATE TABLE "distribution_keys" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"project_id" uuid NOT NULL,
	"name" text NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"allowed_cidrs" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "project_sequences" (
	"project_id" uuid PRIMARY KEY NOT NULL,
	"connector_ids" jsonb NOT NULL,
	"current_index" integer DEFAULT 0 NOT NULL,
	"version" integer DEFAULT 1 NOT NULL,
	"on_end" text DEFAULT 'stop' NOT NULL,
	"on_unavailable" text DEFAULT 'reject' NOT NULL,
	"exhausted" boolean DEFAULT false NOT NULL,
	"switched_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "project_sequences_on_end_check" CHECK ("project_sequences"."on_end" in ('stop', 'loop', 'stay_last')),
	CONSTRAINT "project_sequences_on_unavailable_check" CHECK ("project_sequences"."on_unavailable" in ('reject')),
	CONSTRAINT "project_sequences_index_check" CHECK ("project_sequences"."current_index" >= 0)
);
--> statement-breakpoint
ALTER TABLE "connectors" ADD COLUMN "depleted_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "distribution_keys" ADD CONSTRAINT "distribution_keys_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "project_sequences" ADD CONSTRAINT "project_sequences_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "distribution_keys_key_hash_key" ON "distribution_keys" USING btree ("key_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "distribution_keys_project_name_key" ON "distribution_keys" USING btree ("project_id",lower("name"));