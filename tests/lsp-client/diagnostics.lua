-- `rewind lsp` under Neovim's vim.lsp, headless: open FILE of the workspace
-- WS, run `rewind check -- WS/PROG` outside the editor, wait until the
-- server publishes a diagnostic whose code is WANT, and write every
-- diagnostic of the file (and the check's output) as JSON to OUT.
--   nvim --headless -u NONE -i NONE -n -l diagnostics.lua

local bin, ws, out = os.getenv('REWIND_BIN'), os.getenv('WS'), os.getenv('OUT')
local file, prog, want = os.getenv('FILE'), os.getenv('PROG'), os.getenv('WANT')
local points = os.getenv('POINTS') or 'syscalls'
local results = { log = {} }

---@param msg string
local function finish(msg)
  results.error = msg
  local f = assert(io.open(out, 'w'))
  f:write(vim.json.encode(results))
  f:close()
  if msg then
    io.stderr:write('lsp test: ' .. msg .. '\n')
  end
  os.exit(msg and 1 or 0)
end

vim.cmd.edit(ws .. '/' .. file)
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start({
  name = 'rewind',
  cmd = { bin, 'lsp' },
  root_dir = ws,
  handlers = {
    ['window/logMessage'] = function(_, params)
      table.insert(results.log, params.message)
    end,
  },
})
local client = id and vim.lsp.get_client_by_id(id)
if not client then
  finish('vim.lsp.start did not start rewind lsp')
  return
end
if not vim.wait(60000, function() return client.initialized == true end, 50) then
  finish('timed out waiting for initialize')
end

local check = vim.system({ bin, 'check', '--points', points, '--', ws .. '/' .. prog }, { cwd = ws }):wait()
results.check = { code = check.code, stdout = check.stdout, stderr = check.stderr }

local function wanted()
  return vim.tbl_filter(function(d)
    return d.source == 'rewind' and d.code == want
  end, vim.diagnostic.get(buf))
end
if not vim.wait(120000, function() return #wanted() > 0 end, 50) then
  finish('timed out waiting for a diagnostic ' .. want)
end
results.diagnostics = vim.tbl_map(function(d)
  local lsp = d.user_data and d.user_data.lsp or {}
  return { lnum = d.lnum, severity = d.severity, code = d.code, message = d.message, data = lsp.data, related = lsp.relatedInformation }
end, vim.diagnostic.get(buf))
client:stop()
finish(nil)
