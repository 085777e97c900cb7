-- Headless Neovim as the fsdp2-lint language server's client (driven by test_lsp_neovim.py).
-- Opens a file, waits for the diagnostics the server gives it, applies the `# noqa` quick fix to
-- the first one and waits for that diagnostic to go; writes what it saw as JSON.
-- arg: server command (JSON list), file, report path, "push" (UTF-16, no pull support) or "pull".
local command, file, report_path, mode = vim.json.decode(arg[1]), arg[2], arg[3], arg[4]
local TIMEOUT_MS = 30000
local report = {}

local function wait_for(condition)
  return vim.wait(TIMEOUT_MS, condition, 10)
end

local function run()
  vim.cmd.edit(vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].filetype = 'python'
  -- Neovim merges these into its defaults: vim.NIL (JSON null) is how to withdraw one
  local capabilities = {}
  if mode == 'push' then -- as editors before LSP 3.17: no pull support, UTF-16 columns
    capabilities = { textDocument = { diagnostic = vim.NIL }, general = { positionEncodings = vim.NIL } }
  end
  local client_id = vim.lsp.start(
    { name = 'fsdp2-lint', cmd = command, root_dir = vim.fs.dirname(file), capabilities = capabilities },
    { bufnr = buf }
  )
  report.received = wait_for(function() return #vim.diagnostic.get(buf) > 0 end)
  report.encoding = vim.lsp.get_client_by_id(client_id).offset_encoding
  report.diagnostics = vim.tbl_map(function(d)
    return { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col, code = d.code,
             source = d.source, severity = d.severity, message = d.message }
  end, vim.diagnostic.get(buf))
  report.pushed = #vim.diagnostic.get(buf, { namespace = vim.lsp.diagnostic.get_namespace(client_id, false) })
  report.pulled = #vim.diagnostic.get(buf, { namespace = vim.lsp.diagnostic.get_namespace(client_id, true) })
  if not report.received then return end

  local target = vim.diagnostic.get(buf)[1]
  vim.api.nvim_win_set_cursor(0, { target.lnum + 1, target.col })
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(action) return action.title:find('# noqa: ' .. target.code, 1, true) ~= nil end,
  })
  local function target_line() return vim.api.nvim_buf_get_lines(buf, target.lnum, target.lnum + 1, false)[1] end
  report.applied = wait_for(function() return target_line():find('# noqa', 1, true) ~= nil end)
  report.line_after_action = target_line()
  report.cleared = wait_for(function()
    return #vim.tbl_filter(function(d) return d.code == target.code end, vim.diagnostic.get(buf)) == 0
  end)
end

local ok, error = pcall(run)
report.error = not ok and tostring(error) or nil
vim.fn.writefile({ vim.json.encode(report) }, report_path)
vim.cmd('qa!')
