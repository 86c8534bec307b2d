CREATE TABLE "openvpn_settings" (
	"id" integer PRIMARY KEY DEFAULT 1 NOT NULL,
	"ca_certificate" text NOT NULL,
	"ca_key_sealed" text NOT NULL,
	"server_certificate" text NOT NULL,
	"server_key_sealed" text NOT NULL,
	"tls_crypt_key_sealed" text NOT NULL,
	"subnet" text DEFAULT '10.67.0.0/16' NOT NULL,
	"transport" text DEFAULT 'udp' NOT NULL,
	"listen_port" integer DEFAULT 1194 NOT NULL,
	"endpoint_host" text,
	"mtu" integer DEFAULT 1500 NOT NULL,
	"keepalive_interval_seconds" integer DEFAULT 10 NOT NULL,
	"keepalive_timeout_seconds" integer DEFAULT 60 NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "openvpn_settings_single_row" CHECK ("openvpn_settings"."id" = 1),
	CONSTRAINT "openvpn_settings_transport_check" CHECK ("openvpn_settings"."transport" in ('udp', 'tcp'))
);
--> statement-breakpoint
ALTER TABLE "tunnel_devices" ADD COLUMN "certificate" text;--> statement-breakpoint
ALTER TABLE "tunnel_devices" ADD COLUMN "certificate_serial" text;--> statement-breakpoint
CREATE UNIQUE INDEX "tunnel_devices_certificate_serial_key" ON "tunnel_devices" USING btree ("certificate_serial");--> statement-breakpoint
ALTER TABLE "tunnel_devices" ADD CONSTRAINT "tunnel_devices_openvpn_certificate_check" CHECK ("tunnel_devices"."protocol" <> 'openvpn' or ("tunnel_devices"."certificate" is not null and "tunnel_devices"."certificate_serial" is not null and "tunnel_devices"."private_key_sealed" is not null));--> statement-breakpoint
-- The OpenVPN identity is audited as the WireGuard one is, its sealed keys masked.
CALL octoprox_audit_table('openvpn_settings', 'openvpn_settings', 'id', '', '', '{ca_key_sealed,server_key_sealed,tls_crypt_key_sealed}', '{}');
