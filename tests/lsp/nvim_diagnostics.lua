-- Neovim's own LSP client (0.7 and later) reading `ruleweave lsp`'s diagnostics back: opens
-- $OPEN_FILE under the pack root $PACK_ROOT, starts `$RULEWEAVE_BIN lsp` on it, waits (bounded)
-- for a diagnostic, and writes each as `line:col-line:col message` (0-based) to $OUT.
--   nvim --headless --clean -c "luafile tests/lsp/nvim_diagnostics.lua"
local bin, root, file, out = os.getenv("RULEWEAVE_BIN"), os.getenv("PACK_ROOT"), os.getenv("OPEN_FILE"), os.getenv("OUT")
vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start_client({ name = "ruleweave", cmd = { bin, "lsp" }, root_dir = root })
vim.lsp.buf_attach_client(buf, id)
vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local lines = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(lines, string.format("%d:%d-%d:%d %s", d.lnum, d.col, d.end_lnum, d.end_col, d.message))
end
vim.fn.writefile(lines, out)
vim.cmd("qa!")
