// The TypeScript blocks of docs/typescript.md and of this package's README,
// as they stand: each is type-checked against the package, run against a
// real cluster (the README's addresses 127.0.0.1:7001-7003 replaced by the
// cluster's), and must print what its "// prints:" comments say.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import ts from "typescript";

import { Cluster } from "./cluster.js";

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const pages = [join(packageDir, "../../docs/typescript.md"), join(packageDir, "README.md")];
/** Inside the package, so that the examples' imports of "@limitnode/client" resolve to it. */
const examplesDir = join(packageDir, "build/examples");

interface Example {
  name: string;
  source: string;
  prints: string[];
}

/** examplesOf returns the ```ts blocks of a page. */
function examplesOf(page: string): Example[] {
  const text = readFileSync(page, "utf8");
  const label = page.includes("docs") ? "docs" : "readme";
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].map((m, i) => ({
    name: `${label}-${i + 1}`,
    source: m[1],
    prints: [...m[1].matchAll(/^\s*\/\/ prints: (.*)$/gm)].map((p) => p[1]),
  }));
}

/** compile type-checks the examples against the package and emits them; it fails on any diagnostic. */
function compile(files: string[]): void {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    types: ["node"],
    skipLibCheck: true,
    rootDir: examplesDir,
    outDir: examplesDir,
  });
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
  const host = { getCanonicalFileName: (f: string) => f, getCurrentDirectory: () => examplesDir, getNewLine: () => "\n" };
  assert.equal(diagnostics.length, 0, ts.formatDiagnostics(diagnostics, host));
}

describe("the documentation's examples", () => {
  let cluster: Cluster;
  const examples = pages.flatMap(examplesOf);

  before(async () => {
    cluster = await Cluster.start();
    rmSync(examplesDir, { recursive: true, force: true });
    mkdirSync(examplesDir, { recursive: true });
    const [a, b, c] = cluster.addresses();
    const files = examples.map((ex) => {
      const file = join(examplesDir, `${ex.name}.ts`);
      const source = ex.source.replaceAll("127.0.0.1:7001", a).replaceAll("127.0.0.1:7002", b).replaceAll("127.0.0.1:7003", c);
      writeFileSync(file, source);
      return file;
    });
    compile(files);
  });

  after(async () => {
    await cluster?.stop();
  });

  it("are there: each page has examples, each example says what it prints", () => {
    assert.ok(examples.length >= 10, `${examples.length} examples`);
    for (const ex of examples) {
      assert.ok(ex.prints.length > 0, `${ex.name} says nothing of what it prints`);
    }
  });

  for (const ex of examples) {
    it(`${ex.name} prints what it says`, () => {
      const run = spawnSync(process.execPath, [join(examplesDir, `${ex.name}.js`)], { encoding: "utf8", timeout: 30_000 });
      assert.equal(run.status, 0, `${ex.name} failed:\n${run.stderr}\n${run.stdout}`);
      assert.deepEqual(run.stdout.trimEnd().split("\n"), ex.prints, `${ex.name}'s output:\n${run.stdout}`);
    });
  }
});
