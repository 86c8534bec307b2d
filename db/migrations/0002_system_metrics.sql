CREATE TABLE "system_metrics" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"recorded_at" timestamp with time zone DEFAULT now() NOT NULL,
	"database_bytes" bigint NOT NULL,
	"table_bytes" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"redis_used_memory_bytes" bigint,
	"redis_keys" bigint,
	"redis_prefix_keys" bigint,
	"projects" integer NOT NULL,
	"connectors" integer NOT NULL,
	"proxies_by_status" jsonb DEFAULT '{}'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE INDEX "system_metrics_recorded_idx" ON "system_metrics" USING btree ("recorded_at");