CREATE TABLE "config_revision" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"revision" bigint NOT NULL,
	"applied_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "config_revision_single_row" CHECK ("config_revision"."id" = 1)
);
