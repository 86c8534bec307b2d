CREATE TABLE "tunnel_devices" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"project_id" uuid NOT NULL,
	"protocol" text NOT NULL,
	"name" text NOT NULL,
	"address" text NOT NULL,
	"enabled" boolean DEFAULT true NOT NULL,
	"public_key" text,
	"private_key_sealed" text,
	"preshared_key_sealed" text,
	"country" text,
	"state" text,
	"city" text,
	"session_id" text,
	"last_seen_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tunnel_devices_protocol_check" CHECK ("tunnel_devices"."protocol" in ('wireguard', 'openvpn')),
	CONSTRAINT "tunnel_devices_wireguard_keys_check" CHECK ("tunnel_devices"."protocol" <> 'wireguard' or ("tunnel_devices"."public_key" is not null and "tunnel_devices"."preshared_key_sealed" is not null))
);
--> statement-breakpoint
CREATE TABLE "wireguard_settings" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"private_key_sealed" text NOT NULL,
	"public_key" text NOT NULL,
	"subnet" text DEFAULT '10.66.0.0/16' NOT NULL,
	"listen_port" integer DEFAULT 51820 NOT NULL,
	"endpoint_host" text,
	"mtu" integer DEFAULT 1420 NOT NULL,
	"persistent_keepalive_seconds" integer DEFAULT 25 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "wireguard_settings_single_row" CHECK ("wireguard_settings"."id" = 1)
);
--> statement-breakpoint
ALTER TABLE "tunnel_devices" ADD CONSTRAINT "tunnel_devices_project_id_projects_id_fk" FOREIGN KEY ("project_id") REFERENCES "public"."projects"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "tunnel_devices_project_name_key" ON "tunnel_devices" USING btree ("project_id","protocol",lower("name"));--> statement-breakpoint
CREATE UNIQUE INDEX "tunnel_devices_address_key" ON "tunnel_devices" USING btree ("protocol","address");--> statement-breakpoint
CREATE UNIQUE INDEX "tunnel_devices_public_key_key" ON "tunnel_devices" USING btree ("public_key");--> statement-breakpoint
-- Devices and the WireGuard settings are audited as every definition is (migration 0016), their
-- sealed keys masked; a device's last sighting is bookkeeping a worker writes.
CALL octoprox_audit_table('tunnel_devices', 'tunnel_device', 'id', 'name', '', '{private_key_sealed,preshared_key_sealed}', '{last_seen_at}');
--> statement-breakpoint
CALL octoprox_audit_table('wireguard_settings', 'wireguard_settings', 'id', '', '', '{private_key_sealed}', '{}');
