ALTER TABLE "projects" ADD COLUMN "tls_mitm_mode" text DEFAULT 'off' NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "tls_mitm_browser" text;--> statement-breakpoint
ALTER TABLE "projects" ADD COLUMN "tls_mitm_bypass" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_tls_mitm_mode_check" CHECK ("projects"."tls_mitm_mode" in ('off', 'plain', 'match_ua', 'override_ua'));--> statement-breakpoint
ALTER TABLE "projects" ADD CONSTRAINT "projects_tls_mitm_browser_check" CHECK ("projects"."tls_mitm_browser" is null or ("projects"."tls_mitm_mode" = 'override_ua' and "projects"."tls_mitm_browser" in ('chrome', 'firefox', 'safari', 'edge', 'random')));