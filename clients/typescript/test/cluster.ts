// A real three-node limitnode cluster for the tests: the limitnode binary
// (LIMITNODE_BIN, or built from this repository with `go build`), each node
// on ports the OS picks, with its own data directory, its log kept for a
// failing test; with API tokens when a test asks for them.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository's root, from build/test/. */
const repoRoot = resolve(here, "../../../..");

/** A running node: its ID, HTTP address and process. */
export interface RunningNode {
  id: string;
  http: string;
  process: ChildProcess;
  exited: Promise<void>;
  log: string[];
}

/** binary returns the limitnode binary to run: LIMITNODE_BIN, or one built now into dir. */
function binary(dir: string): string {
  const given = process.env.LIMITNODE_BIN;
  if (given) {
    return given;
  }
  const out = join(dir, "limitnode");
  const built = spawnSync("go", ["build", "-o", out, "./cmd/limitnode"], { cwd: repoRoot, encoding: "utf8" });
  if (built.status !== 0) {
    throw new Error(`LIMITNODE_BIN is unset and go build failed: ${built.error ?? built.stderr}`);
  }
  return out;
}

/** waitFor polls check every 50 ms until it holds, or throws after timeoutMs. */
export async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) {
      return;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** getJSON fetches http://addr/path (with token, when given) and returns its status and parsed body. */
export async function getJSON(addr: string, path: string, token?: string): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const resp = await fetch(`http://${addr}${path}`, { headers, signal: AbortSignal.timeout(5000) });
  const text = await resp.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: resp.status, body };
}

/** ClusterOptions are a test's own settings of its cluster. */
export interface ClusterOptions {
  /** Flags every node gets besides its own ("-max-request-ids-per-caller", "20"). */
  flags?: string[];
  /** API tokens to make, by name, with their roles: the nodes then run with -auth, and token(name) is each one's secret. */
  tokens?: Record<string, string[]>;
}

/** Cluster is three limitnode processes forming one cluster. */
export class Cluster {
  readonly nodes: RunningNode[] = [];
  /** Every process started, serving or not, to end in stop. */
  private readonly started: Array<{ process: ChildProcess; exited: Promise<void> }> = [];
  private readonly dir: string;
  private readonly bin: string;
  private readonly flags: string[];
  private readonly tokens = new Map<string, string>();
  /** The admin token the nodes join with and this helper reads with, when the cluster has tokens. */
  private readonly operator: string | undefined;

  private constructor(options: ClusterOptions) {
    this.dir = mkdtempSync(join(tmpdir(), "limitnode-ts-"));
    this.bin = binary(this.dir);
    this.flags = [...(options.flags ?? [])];
    if (options.tokens !== undefined) {
      const entries = Object.entries({ ...options.tokens, operator: ["admin"] }).map(([name, roles]) => {
        const secret = randomBytes(24).toString("hex");
        this.tokens.set(name, secret);
        return { name, sha256: createHash("sha256").update(secret).digest("hex"), roles };
      });
      const file = join(this.dir, "tokens.json");
      writeFileSync(file, JSON.stringify({ tokens: entries }), { mode: 0o600 });
      const joinFile = join(this.dir, "join-token");
      this.operator = this.tokens.get("operator");
      writeFileSync(joinFile, `${this.operator}\n`, { mode: 0o600 });
      this.flags.push("-auth", file, "-join-token-file", joinFile);
    }
  }

  /** start starts n1, which bootstraps, then n2 and n3, which join it, and waits until all three are ready. */
  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const c = new Cluster(options);
    try {
      const n1 = await c.startNode("n1", []);
      for (const id of ["n2", "n3"]) {
        await c.startNode(id, ["-join", n1.http]);
      }
      await waitFor("three members, each ready", async () => {
        const st = await getJSON(n1.http, "/v1/cluster", c.operator);
        if (st.status !== 200 || st.body.nodes.length !== 3) return false;
        for (const n of c.nodes) {
          if ((await getJSON(n.http, "/readyz")).status !== 200) return false;
        }
        return true;
      });
    } catch (error) {
      await c.stop();
      throw new Error(`the cluster did not start: ${error}\n${c.logs()}`);
    }
    return c;
  }

  /** startNode runs one node and returns once it serves, with the address it was given. */
  private startNode(id: string, extra: string[]): Promise<RunningNode> {
    const args = ["-id", id, "-http", "127.0.0.1:0", "-raft", "127.0.0.1:0", "-data", join(this.dir, id), ...this.flags, ...extra];
    const child = spawn(this.bin, args, { stdio: ["ignore", "ignore", "pipe"] });
    const log: string[] = [];
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    this.started.push({ process: child, exited });
    return new Promise((resolveNode, reject) => {
      let pending = "";
      child.stderr!.setEncoding("utf8");
      child.stderr!.on("data", (chunk: string) => {
        pending += chunk;
        const lines = pending.split("\n");
        pending = lines.pop()!;
        for (const line of lines) {
          log.push(line);
          const serving = /msg="limitnode serving".* http=(\S+)/.exec(line);
          if (serving) {
            const node = { id, http: serving[1], process: child, exited, log };
            this.nodes.push(node);
            resolveNode(node);
          }
        }
      });
      child.once("exit", (code, signal) => reject(new Error(`${id} exited (${code ?? signal}) before serving:\n${log.join("\n")}`)));
    });
  }

  /** token is the secret of the token made under name (ClusterOptions.tokens). */
  token(name: string): string {
    const secret = this.tokens.get(name);
    if (secret === undefined) throw new Error(`the cluster has no token ${name}`);
    return secret;
  }

  /** addresses are the nodes' HTTP addresses, in order. */
  addresses(): string[] {
    return this.nodes.map((n) => n.http);
  }

  /** leader returns the node every live node names as leader, once they agree. */
  async leader(): Promise<RunningNode> {
    let leader: RunningNode | undefined;
    await waitFor("a leader", async () => {
      const live = this.live();
      const views = await Promise.all(live.map((n) => getJSON(n.http, "/v1/cluster", this.operator)));
      const ids = new Set(views.map((v) => v.body.leader));
      leader = this.nodes.find((n) => n.id === views[0].body.leader);
      return ids.size === 1 && leader !== undefined && live.includes(leader);
    });
    return leader!;
  }

  /** live are the nodes not killed. */
  live(): RunningNode[] {
    return this.nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null);
  }

  /** followers are the live nodes that do not lead. */
  async followers(): Promise<RunningNode[]> {
    const leader = await this.leader();
    return this.live().filter((n) => n !== leader);
  }

  /** kill sends SIGKILL to node, as a crash, and waits for it to die. */
  async kill(node: RunningNode): Promise<void> {
    node.process.kill("SIGKILL");
    await node.exited;
  }

  /**
   * pause stops node with SIGSTOP: its kernel still takes connections, and
   * nothing answers them. It returns once every thread of the node is
   * stopped (the signal stops them one by one), where /proc tells.
   */
  async pause(node: RunningNode): Promise<void> {
    node.process.kill("SIGSTOP");
    const tasks = `/proc/${node.process.pid}/task`;
    if (!existsSync(tasks)) return;
    const state = (task: string) => {
      const stat = readFileSync(`${tasks}/${task}/stat`, "utf8");
      return stat[stat.lastIndexOf(")") + 2];
    };
    await waitFor(`${node.id} to stop`, async () => readdirSync(tasks).every((t) => state(t) === "T"), 10_000);
  }

  /** resume lets a paused node go on (SIGCONT). */
  resume(node: RunningNode): void {
    node.process.kill("SIGCONT");
  }

  /** stop ends every node still running and removes the data. */
  async stop(): Promise<void> {
    await Promise.all(
      this.started.map((n) => {
        if (n.process.exitCode === null && n.process.signalCode === null) n.process.kill("SIGKILL");
        return n.exited;
      }),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** logs are every node's log, for a failing test's message. */
  logs(): string {
    return this.nodes.map((n) => `--- ${n.id}\n${n.log.join("\n")}`).join("\n");
  }
}
