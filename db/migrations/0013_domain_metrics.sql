CREATE TABLE "domain_metrics" (
	"project_id" uuid NOT NULL,
	"day" date NOT NULL,
	"site" text NOT NULL,
	"connector" text NOT NULL,
	"count" text NOT NULL,
	"value" bigint NOT NULL,
	CONSTRAINT "domain_metrics_project_id_day_site_connector_count_pk" PRIMARY KEY("project_id","day","site","connector","count")
);
--> statement-breakpoint
ALTER TABLE "domain_metrics" ADD CONSTRAINT "domain_metrics_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;