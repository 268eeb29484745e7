-- ruleweave's language server in Neovim, from 0.7 (Debian 12's) to the current release: source it
-- from your init.lua (`dofile("/path/to/ruleweave.lua")`) or paste it there. `ruleweave` must be
-- on your PATH. A pack's manifests (`config/*.yaml`), scripts (`*.rhai`) and templates (`*.j2`)
-- then show the problems `ruleweave check` finds as you type, with completion (`<C-x><C-o>`),
-- hover (`K` on 0.10+, `:lua vim.lsp.buf.hover()` before), go-to-definition
-- (`:lua vim.lsp.buf.definition()`), references and rename.

-- Filetypes for the pack's own files: an autocommand, as every version reads it (`vim.filetype.add`
-- needs `g:do_filetype_lua` on 0.7).
vim.cmd([[
  augroup ruleweave_filetypes
    autocmd!
    autocmd BufRead,BufNewFile *.rhai setfiletype rhai
    autocmd BufRead,BufNewFile *.j2 setfiletype jinja
  augroup END
]])

-- One server per pack root: the folder above the nearest `config/`.
local servers = {}
vim.api.nvim_create_autocmd("FileType", {
  pattern = { "yaml", "rhai", "jinja" },
  callback = function(args)
    local file = vim.api.nvim_buf_get_name(args.buf)
    local config = vim.fn.finddir("config", vim.fn.fnamemodify(file, ":p:h") .. ";")
    if config == "" then
      return
    end
    local root = vim.fn.fnamemodify(config, ":p:h:h")
    local server = { name = "ruleweave", cmd = { "ruleweave", "lsp" }, root_dir = root }
    if vim.lsp.start then
      -- 0.8 and later: starts the server once per root and attaches this buffer.
      vim.lsp.start(server)
    else
      servers[root] = servers[root] or vim.lsp.start_client(server)
      vim.lsp.buf_attach_client(args.buf, servers[root])
    end
    vim.bo[args.buf].omnifunc = "v:lua.vim.lsp.omnifunc"
  end,
})
