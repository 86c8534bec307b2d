CREATE TABLE "alert_channels" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"type" text NOT NULL,
	"format" text DEFAULT 'json' NOT NULL,
	"url" text NOT NULL,
	"allow_private_address" boolean DEFAULT false NOT NULL,
	"secret_sealed" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "alert_deliveries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"event_id" bigint,
	"channel_id" uuid NOT NULL,
	"action" text NOT NULL,
	"payload" jsonb NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "alert_delivery_tries" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"delivery_id" bigint NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"duration_ms" integer NOT NULL,
	"status_code" integer,
	"error" text
);
--> statement-breakpoint
CREATE TABLE "alert_events" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"rule_id" uuid NOT NULL,
	"subject" text NOT NULL,
	"severity" text NOT NULL,
	"message" text NOT NULL,
	"details" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"fired_at" timestamp with time zone DEFAULT now() NOT NULL,
	"resolved_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "alert_rule_channels" (
	"rule_id" uuid NOT NULL,
	"channel_id" uuid NOT NULL,
	CONSTRAINT "alert_rule_channels_rule_id_channel_id_pk" PRIMARY KEY("rule_id","channel_id")
);
--> statement-breakpoint
CREATE TABLE "alert_rules" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"kind" text NOT NULL,
	"project_id" uuid,
	"connector_id" uuid,
	"threshold" double precision,
	"severity" text NOT NULL,
	"quiet_period_seconds" integer NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "alert_rules_severity_check" CHECK ("alert_rules"."severity" in ('info', 'warning', 'critical'))
);
--> statement-breakpoint
ALTER TABLE "alert_deliveries" ADD CONSTRAINT "alert_deliveries_event_id_alert_events_id_fk" FOREIGN KEY ("event_id") REFERENCES "public"."alert_events"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_deliveries" ADD CONSTRAINT "alert_deliveries_channel_id_alert_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."alert_channels"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_delivery_tries" ADD CONSTRAINT "alert_delivery_tries_delivery_id_alert_deliveries_id_fk" FOREIGN KEY ("delivery_id") REFERENCES "public"."alert_deliveries"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_events" ADD CONSTRAINT "alert_events_rule_id_alert_rules_id_fk" FOREIGN KEY ("rule_id") REFERENCES "public"."alert_rules"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_rule_channels" ADD CONSTRAINT "alert_rule_channels_rule_id_alert_rules_id_fk" FOREIGN KEY ("rule_id") REFERENCES "public"."alert_rules"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_rule_channels" ADD CONSTRAINT "alert_rule_channels_channel_id_alert_channels_id_fk" FOREIGN KEY ("channel_id") REFERENCES "public"."alert_channels"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_rules" ADD CONSTRAINT "alert_rules_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "alert_rules" ADD CONSTRAINT "alert_rules_connector_id_connectors_id_fk" FOREIGN KEY ("connector_id") REFERENCES "public"."connectors"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "alert_channels_name_key" ON "alert_channels" USING btree (lower("name"));--> statement-breakpoint
CREATE INDEX "alert_deliveries_due_idx" ON "alert_deliveries" USING btree ("next_attempt_at") WHERE "alert_deliveries"."state" = 'pending';--> statement-breakpoint
CREATE INDEX "alert_deliveries_created_idx" ON "alert_deliveries" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "alert_deliveries_event_idx" ON "alert_deliveries" USING btree ("event_id");--> statement-breakpoint
CREATE INDEX "alert_deliveries_channel_idx" ON "alert_deliveries" USING btree ("channel_id");--> statement-breakpoint
CREATE INDEX "alert_delivery_tries_delivery_idx" ON "alert_delivery_tries" USING btree ("delivery_id","id");--> statement-breakpoint
CREATE UNIQUE INDEX "alert_events_open_key" ON "alert_events" USING btree ("rule_id","subject") WHERE "alert_events"."resolved_at" is null;--> statement-breakpoint
CREATE INDEX "alert_events_rule_subject_idx" ON "alert_events" USING btree ("rule_id","subject","fired_at");--> statement-breakpoint
CREATE INDEX "alert_events_fired_idx" ON "alert_events" USING btree ("fired_at");--> statement-breakpoint
CREATE INDEX "alert_rule_channels_channel_idx" ON "alert_rule_channels" USING btree ("channel_id");--> statement-breakpoint
CREATE UNIQUE INDEX "alert_rules_name_key" ON "alert_rules" USING btree (lower("name"));--> statement-breakpoint
-- Alert rules and channels are audited as every definition is (migration 0016); a channel's URL
-- is masked with its secret, since a chat service's webhook URL is itself a credential.
CALL octoprox_audit_table('alert_channels', 'alert_channel', 'id', 'name', '', '{secret_sealed,url}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('alert_rules', 'alert_rule', 'id', 'name', '', '{}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('alert_rule_channels', 'alert_rule_channel', 'rule_id', '', '', '{}', '{}');
