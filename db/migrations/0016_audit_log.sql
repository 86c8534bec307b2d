CREATE TABLE "audit_log" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"at" timestamp with time zone DEFAULT now() NOT NULL,
	"tx" bigint NOT NULL,
	"actor_kind" text NOT NULL,
	"actor_id" text,
	"actor_name" text,
	"user_name" text,
	"address" text,
	"via" text NOT NULL,
	"request" text,
	"entity" text NOT NULL,
	"entity_id" text,
	"entity_name" text,
	"action" text NOT NULL,
	"count" integer DEFAULT 1 NOT NULL,
	"before" jsonb,
	"after" jsonb
);
--> statement-breakpoint
CREATE INDEX "audit_log_at_idx" ON "audit_log" USING btree ("at");--> statement-breakpoint
CREATE INDEX "audit_log_entity_idx" ON "audit_log" USING btree ("entity","entity_id","id");--> statement-breakpoint
CREATE INDEX "audit_log_actor_idx" ON "audit_log" USING btree ("actor_name","id");--> statement-breakpoint
CREATE INDEX "audit_log_tx_idx" ON "audit_log" USING btree ("tx");
--> statement-breakpoint
-- Who is writing: the transaction's `octoprox.actor` setting (db/actor.ts sets it, local to the
-- transaction). A write without one (the system's own loops) is not audited.
CREATE FUNCTION octoprox_audit_actor() RETURNS jsonb LANGUAGE sql STABLE AS $$
  SELECT nullif(current_setting('octoprox.actor', true), '')::jsonb
$$;
--> statement-breakpoint
-- A row as the audit shows it: the columns it ignores dropped, the secret ones masked (a null
-- stays null, so setting or clearing a secret shows).
CREATE FUNCTION octoprox_audit_shown(row_json jsonb, masked text[], ignored text[]) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce(jsonb_object_agg(key, CASE
    WHEN key = ANY(masked) AND value <> 'null'::jsonb THEN '"********"'::jsonb
    ELSE value END), '{}'::jsonb)
  FROM jsonb_each(row_json) WHERE NOT (key = ANY(ignored))
$$;
--> statement-breakpoint
-- One entry written by the triggers or by an operation with no row of its own (a lift).
CREATE FUNCTION octoprox_audit_note(
  p_entity text, p_entity_id text, p_entity_name text, p_action text, p_count integer,
  p_before jsonb, p_after jsonb
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  actor jsonb := octoprox_audit_actor();
BEGIN
  IF actor IS NULL THEN RETURN; END IF;
  INSERT INTO audit_log (tx, actor_kind, actor_id, actor_name, user_name, address, via, request, entity,
    entity_id, entity_name, action, count, before, after)
  VALUES (txid_current(), actor->>'kind', actor->>'id', actor->>'name', actor->>'user', actor->>'address',
    actor->>'via', actor->>'request', p_entity, p_entity_id, p_entity_name, p_action, p_count,
    p_before, p_after);
END
$$;
--> statement-breakpoint
-- The statement-level trigger of every audited table. Arguments: the entity's name, its key
-- column, its name column ('' for none), 'bulk' when a statement of many rows is one entry,
-- the masked columns and the ignored ones (beyond created_at and updated_at), as text arrays.
CREATE FUNCTION octoprox_audit() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  actor jsonb := octoprox_audit_actor();
  v_entity text := TG_ARGV[0];
  v_key text := TG_ARGV[1];
  v_name text := nullif(TG_ARGV[2], '');
  v_bulk boolean := TG_ARGV[3] = 'bulk';
  v_masked text[] := TG_ARGV[4]::text[];
  v_ignored text[] := ARRAY['created_at', 'updated_at'] || TG_ARGV[5]::text[];
  v_action text := CASE TG_OP WHEN 'INSERT' THEN 'create' WHEN 'UPDATE' THEN 'update'
    ELSE 'delete' END;
  v_rows bigint;
BEGIN
  -- A backup's import is one entry of its own (actor.summary): its rows are not listed.
  IF actor IS NULL OR coalesce((actor->>'summary')::boolean, false) THEN RETURN NULL; END IF;
  IF TG_OP = 'DELETE' THEN
    SELECT count(*) INTO v_rows FROM old_rows;
  ELSE
    SELECT count(*) INTO v_rows FROM new_rows;
  END IF;
  IF v_rows = 0 THEN RETURN NULL; END IF;
  IF v_bulk AND v_rows > 1 THEN
    -- Many rows in one statement: one entry per write and action, its count growing with each
    -- statement of the same write.
    UPDATE audit_log SET count = count + v_rows
      WHERE tx = txid_current() AND entity = v_entity AND action = v_action AND entity_id IS NULL;
    IF NOT FOUND THEN
      PERFORM octoprox_audit_note(v_entity, NULL, NULL, v_action, v_rows::integer, NULL, NULL);
    END IF;
    RETURN NULL;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO audit_log (tx, actor_kind, actor_id, actor_name, user_name, address, via, request, entity,
      entity_id, entity_name, action, before, after)
    SELECT txid_current(), actor->>'kind', actor->>'id', actor->>'name', actor->>'user', actor->>'address',
      actor->>'via', actor->>'request', v_entity, n.j->>v_key, n.j->>v_name, v_action, NULL,
      octoprox_audit_shown(n.j, v_masked, v_ignored)
    FROM (SELECT to_jsonb(r) AS j FROM new_rows r) n;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO audit_log (tx, actor_kind, actor_id, actor_name, user_name, address, via, request, entity,
      entity_id, entity_name, action, before, after)
    SELECT txid_current(), actor->>'kind', actor->>'id', actor->>'name', actor->>'user', actor->>'address',
      actor->>'via', actor->>'request', v_entity, o.j->>v_key, o.j->>v_name, v_action,
      octoprox_audit_shown(o.j, v_masked, v_ignored), NULL
    FROM (SELECT to_jsonb(r) AS j FROM old_rows r) o;
  ELSE
    -- Only the fields that changed, on each side; an update that changed none is no entry.
    INSERT INTO audit_log (tx, actor_kind, actor_id, actor_name, user_name, address, via, request, entity,
      entity_id, entity_name, action, before, after)
    SELECT txid_current(), actor->>'kind', actor->>'id', actor->>'name', actor->>'user', actor->>'address',
      actor->>'via', actor->>'request', v_entity, d.id, d.name, v_action,
      octoprox_audit_shown(d.before, v_masked, v_ignored),
      octoprox_audit_shown(d.after, v_masked, v_ignored)
    FROM (
      SELECT n.j->>v_key AS id, n.j->>v_name AS name,
        (SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM jsonb_each(o.j)
          WHERE n.j->key IS DISTINCT FROM value) AS before,
        (SELECT coalesce(jsonb_object_agg(key, value), '{}'::jsonb) FROM jsonb_each(n.j)
          WHERE o.j->key IS DISTINCT FROM value) AS after
      FROM (SELECT to_jsonb(r) AS j FROM new_rows r) n
      JOIN (SELECT to_jsonb(r) AS j FROM old_rows r) o ON o.j->v_key = n.j->v_key
    ) d
    WHERE octoprox_audit_shown(d.after, v_masked, v_ignored) <> '{}'::jsonb;
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
-- Three triggers a table (a transition table serves one event), only when a writer is named.
CREATE PROCEDURE octoprox_audit_table(
  p_table text, p_entity text, p_key text, p_name text, p_bulk text, p_masked text,
  p_ignored text
) LANGUAGE plpgsql AS $$
DECLARE
  v_args text := format('%L, %L, %L, %L, %L, %L', p_entity, p_key, p_name, p_bulk, p_masked,
    p_ignored);
  v_when text := $w$WHEN (current_setting('octoprox.actor', true) <> '')$w$;
BEGIN
  EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS new_rows '
    'FOR EACH STATEMENT %s EXECUTE FUNCTION octoprox_audit(%s)',
    p_table || '_audit_insert', p_table, v_when, v_args);
  EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING OLD TABLE AS old_rows '
    'NEW TABLE AS new_rows FOR EACH STATEMENT %s EXECUTE FUNCTION octoprox_audit(%s)',
    p_table || '_audit_update', p_table, v_when, v_args);
  EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS old_rows '
    'FOR EACH STATEMENT %s EXECUTE FUNCTION octoprox_audit(%s)',
    p_table || '_audit_delete', p_table, v_when, v_args);
END
$$;
--> statement-breakpoint
CALL octoprox_audit_table('users', 'user', 'id', 'username', '', '{password_hash}', '{last_login_at}');
--> statement-breakpoint
CALL octoprox_audit_table('user_invites', 'invitation', 'id', '', '', '{token_hash}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('api_tokens', 'token', 'id', 'name', '', '{token_hash}', '{last_used_at}');
--> statement-breakpoint
CALL octoprox_audit_table('projects', 'project', 'id', 'name', '', '{password}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('distribution_keys', 'distribution_key', 'id', 'name', '', '{key_hash}', '{last_used_at}');
--> statement-breakpoint
CALL octoprox_audit_table('credentials', 'credential', 'id', 'name', '', '{config}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('connectors', 'connector', 'id', 'name', '', '{}', '{last_error,consecutive_errors,depleted_at}');
--> statement-breakpoint
CALL octoprox_audit_table('proxies', 'proxy', 'id', 'host', 'bulk', '{password}', '{status_changed_at,location_checked_at}');
--> statement-breakpoint
CALL octoprox_audit_table('project_sequences', 'sequence', 'project_id', '', '', '{}', '{switched_at}');
--> statement-breakpoint
CALL octoprox_audit_table('config_revision', 'config_revision', 'id', '', '', '{}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('provider_descriptors', 'provider_descriptor', 'id', 'id', '', '{}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('geo_settings', 'geo_settings', 'id', '', '', '{}', '{}');
--> statement-breakpoint
CALL octoprox_audit_table('geo_databases', 'geo_database', 'id', 'name', '', '{auth}', '{last_update_at,last_error,last_error_at}');
