/**
 * The OpenVPN endpoint: the `openvpn` daemon, supervised, and the admission of every device it
 * hands over. The daemon reads its config (openvpn-config.ts) from a pipe, connects to the
 * gateway's management listener on loopback, and waits there for a verdict on each device: the
 * endpoint admits one whose certificate's common name is an enabled OpenVPN device of the
 * applied feed and whose serial is the one on record, pushing the device its own address, and
 * refuses any other. A feed that disables, deletes or re-certifies a connected device has its
 * session killed in the same apply; with Redis or the controller gone the endpoint keeps
 * admitting the devices it last applied.
 *
 * An exit the gateway did not ask for is logged with the daemon's last lines and the daemon
 * started again after a back-off (5 s, doubling to 60 s). A change to the identity or the
 * daemon's settings starts it again at once: sessions drop and devices reconnect by themselves.
 */
import type { FeedOpenvpn, FeedTunnelDevice } from "../../shared/feed/models.ts";
import { Serial } from "../../shared/async/serial.ts";
import { sleep } from "../../shared/async/sleep.ts";
import { RestartBackoff } from "./restart.ts";
import { certificateSerial } from "../../shared/tunnel-status.ts";
import type { Logger } from "../base/log.ts";
import {
  admitCommand,
  type ClientRequest,
  denyCommand,
  killCommand,
  ManagementReader,
  openvpnAddressing,
  openvpnServerConfig,
  reauthCommand,
} from "./openvpn-config.ts";

/** How long the daemon may take from its start to serving. */
const READY_WAIT_MS = 15_000;
/** The daemon's last lines kept, to log when it exits. */
const TAIL_LINES = 20;
const READY_LINE = "Initialization Sequence Completed";

export interface OpenvpnEndpointOptions {
  interface: string;
  /** OCTOPROX_OPENVPN_LISTEN_PORT; undefined: the identity's `listen_port`. */
  listenPort: number | undefined;
  logger: Logger;
  /** Called once the daemon serves: the plane attaches at `address`, the first host of `subnet`. */
  onUp(address: string, subnet: string): Promise<void>;
}

interface Session {
  deviceId: string;
  serial: string;
}

export class OpenvpnEndpoint {
  readonly #o: OpenvpnEndpointOptions;
  #identity: FeedOpenvpn | undefined;
  /** The enabled OpenVPN devices of the applied feed, by id. */
  #devices = new Map<string, FeedTunnelDevice>();
  /** Established sessions by client id. */
  readonly #sessions = new Map<string, Session>();
  #management: Deno.TcpListener | undefined;
  /** Management connections, each with its writer (writes go whole and in order). */
  readonly #connections = new Map<Deno.TcpConn, WritableStreamDefaultWriter<Uint8Array>>();
  #daemon: Deno.ChildProcess | undefined;
  /** The config the running daemon was started with. */
  #config: string | undefined;
  #tail: string[] = [];
  #up = false;
  #stopping = false;
  readonly #backoff = new RestartBackoff();
  #restarting: Promise<void> | undefined;
  readonly #applying = new Serial();
  #refused = 0;
  #admitted = 0;

  constructor(options: OpenvpnEndpointOptions) {
    this.#o = options;
  }

  get up(): boolean {
    return this.#up;
  }

  /** Devices admitted and refused since start, for /metrics. */
  get admissions(): { admitted: number; refused: number } {
    return { admitted: this.#admitted, refused: this.#refused };
  }

  /** The ids of the devices with a session now. */
  connectedDevices(): string[] {
    return [...new Set([...this.#sessions.values()].map((session) => session.deviceId))];
  }

  /**
   * Brings the daemon to `identity` and `devices`: started the first time or when its config
   * changed, sessions no longer admitted killed. Rejects when the daemon could not start (the
   * caller logs it; the next feed, or the back-off, tries again).
   */
  apply(identity: FeedOpenvpn, devices: readonly FeedTunnelDevice[]): Promise<void> {
    return this.#applying.run(() => this.#apply(identity, devices));
  }

  async #apply(identity: FeedOpenvpn, devices: readonly FeedTunnelDevice[]): Promise<void> {
    if (this.#stopping) return;
    this.#identity = identity;
    this.#devices = new Map(devices.map((device) => [device.id, device]));
    for (const [cid, session] of this.#sessions) {
      if (this.#refusal(session.deviceId, session.serial) !== undefined) {
        this.#send(killCommand(cid));
        this.#sessions.delete(cid);
      }
    }
    const management = this.#listenManagement();
    const config = openvpnServerConfig(identity, {
      interface: this.#o.interface,
      listenPort: this.#o.listenPort ?? identity.listen_port,
      managementPort: management.addr.port,
    });
    if (this.#up && config === this.#config) return;
    await this.#stopDaemon();
    try {
      await this.#start(config);
    } catch (error) {
      // Tried again after the back-off, whether or not another feed comes.
      if (!this.#stopping) this.#restarting ??= this.#restart();
      throw error;
    }
    const { address } = openvpnAddressing(identity.subnet);
    await this.#o.onUp(address, identity.subnet);
  }

  /** Why device `id` presenting `serial` is refused; undefined when it is admitted. */
  #refusal(id: string, serial: string): string | undefined {
    const device = this.#devices.get(id);
    if (device === undefined) return "not an enabled OpenVPN device";
    if (device.certificate_serial === null || device.certificate_serial !== serial) {
      return "not the certificate on record";
    }
    return undefined;
  }

  #listenManagement(): Deno.TcpListener {
    if (this.#management !== undefined) return this.#management;
    const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.#management = listener;
    void this.#accept(listener);
    return listener;
  }

  async #accept(listener: Deno.TcpListener): Promise<void> {
    try {
      for await (const conn of listener) {
        const writer = conn.writable.getWriter();
        this.#connections.set(conn, writer);
        void this.#serveManagement(conn, writer);
      }
    } catch {
      // Closed by stop.
    }
  }

  /**
   * One management connection: every verdict goes back on the connection that asked, so a
   * local process connecting here learns nothing and decides nothing for the daemon.
   */
  async #serveManagement(
    conn: Deno.TcpConn,
    writer: WritableStreamDefaultWriter<Uint8Array>,
  ): Promise<void> {
    const write = (text: string) => {
      writer.write(new TextEncoder().encode(text)).catch(() => {});
    };
    const reader = new ManagementReader(
      (request) => this.#decide(request, write),
      (line) => {
        if (line.startsWith("ERROR:")) {
          this.#o.logger.warn("The OpenVPN daemon refused a management command", { line });
        }
      },
    );
    try {
      for await (const text of conn.readable.pipeThrough(new TextDecoderStream())) {
        reader.feed(text);
      }
    } catch {
      // The daemon went away; its exit is handled where it was started.
    }
    this.#connections.delete(conn);
    try {
      conn.close();
    } catch {
      // Closed already.
    }
  }

  #decide(request: ClientRequest, write: (text: string) => void): void {
    const id = request.env.common_name ?? "";
    const serial = certificateSerial(request.env.tls_serial_hex_0 ?? "") ?? "";
    switch (request.event) {
      case "CONNECT":
      case "REAUTH": {
        const refusal = this.#refusal(id, serial);
        if (refusal !== undefined) {
          this.#refused++;
          this.#o.logger.warn("An OpenVPN device was refused", { device: id, reason: refusal });
          write(denyCommand(request.cid, request.kid, refusal));
          return;
        }
        if (request.event === "REAUTH") {
          write(reauthCommand(request.cid, request.kid));
          return;
        }
        this.#admitted++;
        const device = this.#devices.get(id)!;
        const { netmask } = openvpnAddressing(this.#identity!.subnet);
        write(admitCommand(request.cid, request.kid, device.address, netmask));
        return;
      }
      case "ESTABLISHED":
        this.#sessions.set(request.cid, { deviceId: id, serial });
        return;
      case "DISCONNECT":
        this.#sessions.delete(request.cid);
        return;
    }
  }

  #send(text: string): void {
    const bytes = new TextEncoder().encode(text);
    for (const writer of this.#connections.values()) writer.write(bytes).catch(() => {});
  }

  /** Starts the daemon on `config` and waits until it serves. */
  async #start(config: string): Promise<void> {
    this.#tail = [];
    const child = new Deno.Command("openvpn", {
      args: ["--config", "/dev/stdin"],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#daemon = child;
    this.#config = config;
    let ready!: () => void;
    const served = new Promise<void>((resolve) => (ready = resolve));
    const watch = async (stream: ReadableStream<Uint8Array>) => {
      let partial = "";
      try {
        for await (const text of stream.pipeThrough(new TextDecoderStream())) {
          const lines = (partial + text).split("\n");
          partial = lines.pop() ?? "";
          for (const line of lines) {
            if (line.includes(READY_LINE)) ready();
            this.#tail.push(line);
            if (this.#tail.length > TAIL_LINES) this.#tail.shift();
          }
        }
      } catch {
        // Ended with the daemon.
      }
    };
    void watch(child.stdout);
    void watch(child.stderr);
    const writer = child.stdin.getWriter();
    await writer.write(new TextEncoder().encode(config));
    await writer.close();
    const exited = child.status.then((status) => {
      this.#exited(child, status.code);
      return status;
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    const outcome = await Promise.race([
      served.then(() => "served" as const),
      exited.then(() => "exited" as const),
      new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), READY_WAIT_MS))),
    ]);
    clearTimeout(timer);
    if (outcome !== "served") {
      if (outcome === "late") await this.#stopDaemon();
      throw new Error(
        `openvpn did not start (${outcome === "late" ? "not serving after 15 s" : "it exited"}): ` +
          this.#tail.slice(-5).join(" | "),
      );
    }
    this.#up = true;
    this.#backoff.reset();
  }

  #exited(child: Deno.ChildProcess, code: number): void {
    if (this.#daemon !== child) return;
    this.#daemon = undefined;
    this.#config = undefined;
    this.#sessions.clear();
    const wasUp = this.#up;
    this.#up = false;
    if (this.#stopping || !wasUp) return;
    this.#o.logger.error("openvpn exited; the OpenVPN endpoint starts it again", {
      interface: this.#o.interface,
      exit_code: code,
      retry_in_ms: this.#backoff.nextMs,
      last_lines: this.#tail.slice(-5),
    });
    this.#restarting ??= this.#restart();
  }

  async #restart(): Promise<void> {
    while (!this.#stopping && !this.#up) {
      await sleep(this.#backoff.advance());
      const identity = this.#identity;
      if (this.#stopping || identity === undefined) break;
      await this.apply(identity, [...this.#devices.values()]).catch((error) => {
        this.#o.logger.error("The OpenVPN daemon could not be started again", {
          interface: this.#o.interface,
          error: error instanceof Error ? error.message : String(error),
        });
      });
    }
    this.#restarting = undefined;
  }

  /** Stops the daemon the endpoint runs (its exit is then no failure). */
  async #stopDaemon(): Promise<void> {
    const child = this.#daemon;
    if (child === undefined) return;
    this.#daemon = undefined;
    this.#config = undefined;
    this.#up = false;
    this.#sessions.clear();
    try {
      child.kill("SIGTERM");
    } catch {
      // Gone already.
    }
    await child.status.catch(() => undefined);
  }

  /** Stops the daemon (its interface goes with it) and the management listener. Safe twice. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await this.#applying.settled();
    await this.#stopDaemon();
    try {
      this.#management?.close();
    } catch {
      // Closed already.
    }
    this.#management = undefined;
    for (const conn of this.#connections.keys()) {
      try {
        conn.close();
      } catch {
        // Closed already.
      }
    }
    this.#connections.clear();
  }
}
