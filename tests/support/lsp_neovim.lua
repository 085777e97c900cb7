-- Headless Neovim as the fsdp2-lint language server's client (driven by test_lsp_neovim.py), run
-- after an init file that configures the server the way README tells users to. Opens a file, waits
-- for the diagnostics Neovim receives, picks the `# noqa` quick fix of the first one through
-- Neovim's own code-action UI, waits for that diagnostic to go, and writes what it saw as JSON.
-- Runs on Neovim 0.7 to 0.11. Environment: FSDP2_LINT_TEST_FILE, FSDP2_LINT_TEST_REPORT.
local file, report_path = os.getenv('FSDP2_LINT_TEST_FILE'), os.getenv('FSDP2_LINT_TEST_REPORT')
local TIMEOUT_MS = 30000
local report = {}

local function wait_for(condition)
  return vim.wait(TIMEOUT_MS, condition, 10)
end

local function count(namespace, buf)
  return #vim.diagnostic.get(buf, { namespace = namespace })
end

local function run()
  vim.cmd('edit ' .. vim.fn.fnameescape(file)) -- the filetype autocommand starts the server
  local buf = vim.api.nvim_get_current_buf()
  report.received = wait_for(function() return #vim.diagnostic.get(buf) > 0 end)
  local client = (vim.lsp.get_clients or vim.lsp.get_active_clients)()[1]
  report.encoding = client.offset_encoding
  -- what this Neovim offers servers by default: pull diagnostics, and the position encodings it takes
  local defaults = vim.lsp.protocol.make_client_capabilities()
  report.client_pulls = (defaults.textDocument or {}).diagnostic ~= nil
  report.client_encodings = (defaults.general or {}).positionEncodings or { 'utf-16' }
  report.diagnostics = vim.tbl_map(function(d)
    return { lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col, code = d.code,
             source = d.source, severity = d.severity, message = d.message }
  end, vim.diagnostic.get(buf))
  if vim.fn.has('nvim-0.10') == 1 then -- namespaces per client and model
    report.pushed = count(vim.lsp.diagnostic.get_namespace(client.id, false), buf)
    report.pulled = count(vim.lsp.diagnostic.get_namespace(client.id, true), buf)
  else -- push only
    report.pushed, report.pulled = count(vim.lsp.diagnostic.get_namespace(client.id), buf), 0
  end
  if not report.received then return end

  local target = vim.diagnostic.get(buf)[1]
  vim.api.nvim_win_set_cursor(0, { target.lnum + 1, target.col })
  vim.ui.select = function(items, opts, on_choice) -- the user picks the suppression from the menu
    report.offered = vim.tbl_map(opts.format_item, items)
    for index, item in ipairs(items) do
      if opts.format_item(item):find('# noqa: ' .. target.code, 1, true) then return on_choice(item, index) end
    end
    on_choice(nil, nil)
  end
  vim.lsp.buf.code_action()
  local function target_line() return vim.api.nvim_buf_get_lines(buf, target.lnum, target.lnum + 1, false)[1] end
  report.applied = wait_for(function() return target_line():find('# noqa', 1, true) ~= nil end)
  report.line_after_action = target_line()
  report.cleared = wait_for(function()
    return #vim.tbl_filter(function(d) return d.code == target.code end, vim.diagnostic.get(buf)) == 0
  end)
end

local ok, error = pcall(run)
report.error = not ok and tostring(error) or nil
report.messages = vim.fn.execute('messages')
vim.fn.writefile({ vim.json.encode(report) }, report_path)
vim.cmd('qa!')
