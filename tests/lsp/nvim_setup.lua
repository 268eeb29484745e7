-- A user's Neovim with editors/nvim/ruleweave.lua as its setup: opens $OPEN_FILE (the setup finds
-- the pack root and starts `ruleweave lsp` from the PATH), waits (bounded) for a diagnostic, and
-- writes `filetype=FT`, then each diagnostic as `line:col-line:col message` (0-based), to $OUT.
--   nvim --headless --clean -c "luafile tests/lsp/nvim_setup.lua"
local setup, file, out = os.getenv("SETUP"), os.getenv("OPEN_FILE"), os.getenv("OUT")
dofile(setup)
vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local lines = { "filetype=" .. vim.bo[buf].filetype }
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(lines, string.format("%d:%d-%d:%d %s", d.lnum, d.col, d.end_lnum, d.end_col, d.message))
end
vim.fn.writefile(lines, out)
vim.cmd("qa!")
