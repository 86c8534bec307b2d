import { describe, expect, it } from "vitest";
import { ProviderRegistry } from "../../shared/vendors/registry.ts";
import { sessionIdFor } from "../../shared/vendors/session-id.ts";

const registry = new ProviderRegistry();
const build = (config: Record<string, unknown>) => {
  const result = registry.descriptorProvider(
    { provider: "oxylabs", config },
    { username: "acme", password: "s3cret" },
  );
  if (!result.ok) throw new Error(result.message);
  return result.provider;
};

describe("descriptor providers", () => {
  it("renders a dynamic-session request with the client's session hashed with the project", () => {
    const provider = build({ session_mode: "dynamic" });
    expect(provider.dynamic).toBe(true);
    const a = provider.renderRequest("p1", { country: "DE", sessionId: "42" });
    const b = provider.renderRequest("p1", { country: "DE", sessionId: "42" });
    const other = provider.renderRequest("p2", { country: "DE", sessionId: "42" });
    expect(a).toEqual(b);
    expect(a.username).toBe(
      `customer-acme-cc-DE-sessid-${sessionIdFor("p1", "42", provider.sessionId)}-sesstime-10`,
    );
    expect(a.password).toBe("s3cret");
    expect(other.username).not.toBe(a.username);
    // No -sessid-: a fresh vendor session each request.
    const fresh = [provider.renderRequest("p1", {}), provider.renderRequest("p1", {})];
    expect(fresh[0].username).toMatch(/^customer-acme-sessid-[a-z0-9]{10}-sesstime-10$/);
    expect(fresh[0].username).not.toBe(fresh[1].username);
  });

  it("keeps secrets out of stored rows as placeholders", () => {
    const provider = build({});
    const row = provider.sessionSlotRow(0, "FR");
    expect(row.password).toBe("{password}");
    expect(row.username).toMatch(/^customer-acme-cc-FR-sessid-[a-z0-9]{10}-sesstime-10$/);
    expect(provider.shippedCredential()).toEqual({ username: "acme", password: "s3cret" });
  });

  it("refuses configs the descriptor does not take, naming the key", () => {
    const result = registry.descriptorProvider(
      { provider: "oxylabs", config: { slots: 0, zone: "x" } },
      { username: "acme" },
    );
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toContain("config.zone is not a field of Oxylabs");
      expect(result.message).toContain("config.slots must be a whole number");
      expect(result.message).toContain("credential.password is required");
    }
    const gone = registry.descriptorProvider({ provider: "nobody", config: {} }, null);
    expect(gone).toMatchObject({ ok: false, reason: "gone" });
  });
});
