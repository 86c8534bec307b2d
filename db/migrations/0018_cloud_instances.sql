ALTER TABLE "connectors" ADD COLUMN "last_error_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "proxies" ADD COLUMN "instance_id" text;--> statement-breakpoint
CREATE UNIQUE INDEX "proxies_instance_key" ON "proxies" USING btree ("connector_id","instance_id") WHERE "proxies"."instance_id" is not null;--> statement-breakpoint
-- The error's time is bookkeeping, like the error itself: the audit log leaves it out.
DROP TRIGGER connectors_audit_insert ON connectors;--> statement-breakpoint
DROP TRIGGER connectors_audit_update ON connectors;--> statement-breakpoint
DROP TRIGGER connectors_audit_delete ON connectors;--> statement-breakpoint
CALL octoprox_audit_table('connectors', 'connector', 'id', 'name', '', '{}', '{last_error,last_error_at,consecutive_errors,depleted_at}');
