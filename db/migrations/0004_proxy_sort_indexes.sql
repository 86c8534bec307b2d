DROP INDEX "proxies_project_status_idx";--> statement-breakpoint
CREATE INDEX "proxies_project_country_idx" ON "proxies" USING btree ("project_id","country","created_at","id");--> statement-breakpoint
CREATE INDEX "proxies_project_status_changed_idx" ON "proxies" USING btree ("project_id","status_changed_at","created_at","id");--> statement-breakpoint
CREATE INDEX "proxies_project_status_idx" ON "proxies" USING btree ("project_id","status","created_at","id");