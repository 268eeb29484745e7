// Starts `ruleweave lsp` for the workspace (the pack root: the folder holding config/, scripts/
// and prompts/) and hands it a pack's manifests, scripts and templates.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const command = vscode.workspace.getConfiguration("ruleweave").get("path") || "ruleweave";
  const server = { command, args: ["lsp"] };
  client = new LanguageClient(
    "ruleweave",
    "ruleweave",
    { run: server, debug: server },
    {
      documentSelector: [
        { scheme: "file", language: "yaml", pattern: "**/config/*.yaml" },
        { scheme: "file", language: "rhai" },
        { scheme: "file", pattern: "**/prompts/**/*.j2" },
      ],
    },
  );
  context.subscriptions.push({ dispose: () => client && client.stop() });
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
