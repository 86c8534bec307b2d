/**
 * The admission pipeline (gateway/net/session/admission-pipeline.ts): steps run in their order
 * and stage, a refusal stops the list, what steps hold is released exactly once however the
 * request ends, steps that answer at once admit without a Promise; and the gateway's own list
 * (credentials, destination) over the real router and guard.
 */
import { describe, expect, it } from "vitest";
import type { MaybePromise, Refusal } from "../../shared/routing/contract.ts";
import { createDestinationGuard } from "../../shared/routing/destination-guard.ts";
import { CoreRouter } from "../../shared/routing/router.ts";
import { encodeUpstreamRequestHead } from "../../gateway/net/http/heads.ts";
import { parseRequestHead } from "../../gateway/net/http/parse.ts";
import {
  type AdmissionRequest,
  AdmissionStage,
  type AdmissionStep,
  type AdmissionVerdict,
} from "../../gateway/base/admission.ts";
import { Admission, AdmissionTicket } from "../../gateway/net/session/admission-pipeline.ts";
import { admissionSteps } from "../../gateway/net/session/admission-steps.ts";
import {
  basic,
  client,
  feed,
  section,
  verifyPassword,
} from "../../testkit/gateway/feed-fixtures.ts";

const ADDRESS = { hostname: "198.51.100.7", port: 40_000 };
const TARGET = { host: "example.com", port: 80 };

const tooMany: Refusal = { status: 429, proxyStatus: "connection_limit_reached", reason: "Busy" };

/** A step that records its runs in `log` and answers `verdict` (a grant records its release). */
function step(
  name: string,
  log: string[],
  answer: (request: AdmissionRequest) => MaybePromise<AdmissionVerdict>,
  stage: AdmissionStage = AdmissionStage.request,
): AdmissionStep {
  return {
    name,
    stage,
    admit(request) {
      log.push(name);
      return answer(request);
    },
  };
}

function grant(name: string, log: string[]) {
  return { release: () => log.push(`release ${name}`) };
}

/** Sets the client, as the credentials step does. */
const identify = (log: string[]) =>
  step("identify", log, (request) => {
    request.client = client();
    return undefined;
  }, AdmissionStage.client);

function ticketFor(target = TARGET) {
  const ticket = new AdmissionTicket(ADDRESS);
  ticket.begin("http", null, target);
  return ticket;
}

describe("the admission pipeline", () => {
  it("runs every step in order and admits without a Promise when each answers at once", () => {
    const log: string[] = [];
    const seen: AdmissionRequest[] = [];
    const admission = new Admission([
      identify(log),
      step("count", log, () => grant("count", log)),
      step("look", log, (request) => {
        seen.push(request);
        return undefined;
      }),
    ]);
    const ticket = ticketFor();
    const result = admission.run(ticket, AdmissionStage.request);
    expect(result).toBeUndefined();
    expect(log).toEqual(["identify", "count", "look"]);
    // What the earlier steps set is what the later ones see, with what the listener offered.
    expect(seen[0].client).toEqual(client());
    expect(seen[0].clientAddress).toEqual(ADDRESS);
    expect(seen[0].target).toEqual(TARGET);
    // Held until the request ends, then released once.
    expect(log).not.toContain("release count");
    ticket.release();
    ticket.release();
    expect(log.filter((line) => line === "release count")).toHaveLength(1);
  });

  it("stops at a refusal and releases what the earlier steps hold, the last taken first", () => {
    const log: string[] = [];
    const admission = new Admission([
      identify(log),
      step("first", log, () => grant("first", log)),
      step("second", log, () => grant("second", log)),
      step("limit", log, () => tooMany),
      step("never", log, () => undefined),
    ]);
    const ticket = ticketFor();
    expect(admission.run(ticket, AdmissionStage.request)).toBe(tooMany);
    expect(log).toEqual([
      "identify",
      "first",
      "second",
      "limit",
      "release second",
      "release first",
    ]);
    // The listener's release once the refused request ended gives nothing back twice.
    ticket.release();
    expect(log.filter((line) => line.startsWith("release"))).toHaveLength(2);
  });

  it("waits for a step that answers with a Promise, then goes on with the rest", async () => {
    const log: string[] = [];
    const admission = new Admission([
      identify(log),
      step("remote", log, () => Promise.resolve(grant("remote", log))),
      step("after", log, () => undefined),
    ]);
    const ticket = ticketFor();
    const result = admission.run(ticket, AdmissionStage.request);
    expect(result).toBeInstanceOf(Promise);
    expect(log).toEqual(["identify", "remote"]);
    expect(await result).toBeUndefined();
    expect(log).toEqual(["identify", "remote", "after"]);
    ticket.release();
    expect(log).toContain("release remote");
  });

  it("fails with a step's error, naming the step, and releases what is held", async () => {
    const log: string[] = [];
    const broken = new Admission([
      identify(log),
      step("held", log, () => grant("held", log)),
      step("broken", log, () => {
        throw new Error("a bug");
      }),
    ]);
    const ticket = ticketFor();
    expect(() => broken.run(ticket, AdmissionStage.request)).toThrow("a bug");
    expect(broken.failedStep(ticket)).toBe("broken");
    expect(log).toContain("release held");

    const rejecting = new Admission([
      identify(log),
      step("held again", log, () => grant("held again", log)),
      step("rejects", log, () => Promise.reject(new Error("a remote bug"))),
    ]);
    const second = ticketFor();
    await expect(rejecting.run(second, AdmissionStage.request)).rejects.toThrow("a remote bug");
    expect(rejecting.failedStep(second)).toBe("rejects");
    expect(log).toContain("release held again");
  });

  it("runs the client steps first and the request steps once the target is known", () => {
    const log: string[] = [];
    const admission = new Admission([
      identify(log),
      step("address", log, () => undefined, AdmissionStage.client),
      step("destination", log, (request) => {
        expect(request.target).toEqual(TARGET);
        return undefined;
      }),
    ]);
    // SOCKS5: the credentials come before the request names its target.
    const ticket = new AdmissionTicket(ADDRESS);
    ticket.begin("socks5", basic("shop"), undefined);
    expect(admission.run(ticket, AdmissionStage.client)).toBeUndefined();
    expect(log).toEqual(["identify", "address"]);
    ticket.target = TARGET;
    expect(admission.run(ticket, AdmissionStage.request)).toBeUndefined();
    expect(log).toEqual(["identify", "address", "destination"]);
  });

  it("starts each request of a session afresh", () => {
    const log: string[] = [];
    const admission = new Admission([identify(log), step("count", log, () => grant("n", log))]);
    const ticket = ticketFor();
    admission.run(ticket, AdmissionStage.request);
    ticket.stripHeader("x-octoprox-country");
    // A session that starts its next request before releasing gives the last one's back first.
    ticket.begin("http", null, TARGET);
    expect(log).toEqual(["identify", "count", "release n"]);
    expect(ticket.client).toBeUndefined();
    expect(ticket.strippedHeaders).toBeUndefined();
    admission.run(ticket, AdmissionStage.request);
    expect(log).toEqual(["identify", "count", "release n", "identify", "count"]);
  });

  it("refuses a list with a client step after a request step, or none naming the client", () => {
    const log: string[] = [];
    expect(() => new Admission([step("target", log, () => undefined), identify(log)])).toThrow(
      /identify decides on the client after a request step/,
    );
    const anonymous = new Admission([step("target", log, () => undefined)]);
    expect(() => anonymous.run(ticketFor(), AdmissionStage.request)).toThrow(
      /No admission step established the client/,
    );
  });

  it("keeps the header fields a step consumed out of the forwarded head", () => {
    const log: string[] = [];
    const admission = new Admission([
      identify(log),
      step("options", log, (request) => {
        for (const field of request.headers) {
          if (field.lower.startsWith("x-octoprox-")) request.stripHeader(field.lower);
        }
        return undefined;
      }),
    ]);
    const head = parseRequestHead(
      new TextEncoder().encode(
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n" +
          "X-Octoprox-Country: de\r\nAccept: */*\r\n\r\n",
      ),
    );
    const ticket = new AdmissionTicket(ADDRESS);
    ticket.begin("http", null, TARGET, head.headers);
    admission.run(ticket, AdmissionStage.request);
    const sent = new TextDecoder().decode(
      encodeUpstreamRequestHead(head, { authority: "example.com", path: "/" }, {
        form: "absolute",
        strip: ticket.strippedHeaders,
      }),
    );
    expect(sent).toContain("Accept: */*\r\n");
    expect(sent).not.toMatch(/x-octoprox/i);
  });
});

describe("the gateway's admission steps", () => {
  function gatewayAdmission() {
    const router = new CoreRouter({ verifyPassword });
    router.apply(feed([section("c", ["x"])]));
    const guard = createDestinationGuard({ resolve: () => Promise.resolve([]) });
    return new Admission(admissionSteps({ router, guard }));
  }

  it("names the client from its credentials, then checks the destination", async () => {
    const admission = gatewayAdmission();
    const ticket = new AdmissionTicket(ADDRESS);
    ticket.begin("http", basic("shop-cc-de"), TARGET);
    expect(await admission.run(ticket, AdmissionStage.request)).toBeUndefined();
    expect(ticket.client).toMatchObject({ projectId: "p1", options: { country: "DE" } });

    // The credentials' verdict is kept per snapshot: the next request is admitted at once.
    ticket.begin("http", basic("shop-cc-de"), TARGET);
    expect(admission.run(ticket, AdmissionStage.request)).toBeUndefined();

    ticket.begin("connect", basic("shop"), { host: "127.0.0.1", port: 22 });
    expect(await admission.run(ticket, AdmissionStage.request)).toMatchObject({
      status: 403,
      proxyStatus: "destination_ip_prohibited",
    });
  });

  it("refuses missing or wrong credentials before the destination is looked at", async () => {
    const admission = gatewayAdmission();
    const ticket = new AdmissionTicket(ADDRESS);
    ticket.begin("http", null, { host: "127.0.0.1", port: 22 });
    expect(await admission.run(ticket, AdmissionStage.request)).toMatchObject({ status: 407 });
    ticket.begin("http", basic("shop", "wrong"), { host: "127.0.0.1", port: 22 });
    expect(await admission.run(ticket, AdmissionStage.request)).toMatchObject({ status: 407 });
    expect(ticket.client).toBeUndefined();
  });
});
