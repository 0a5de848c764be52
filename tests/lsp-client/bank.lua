-- `rewind lsp` under Neovim's own LSP client (vim.lsp), headless:
--   nvim --headless -u NONE -i NONE -n -l bank.lua
-- Environment: REWIND_BIN, REWIND_HOME, WS (a workspace holding bank.c and
-- its program `bank`, built with -g), FIXED (bank-fixed.c), OUT (where the
-- results go as JSON, for tests/tests/lsp.rs to assert on).
-- A `rewind check` run in a terminal shows up as a diagnostic; the Check
-- lens of the fixed program clears it.

local bin, ws, fixed, out = os.getenv('REWIND_BIN'), os.getenv('WS'), os.getenv('FIXED'), os.getenv('OUT')
local results = { progress = {}, opened = {}, replays = {}, log = {} }

---@param msg string
local function fail(msg)
  results.error = msg
  local f = assert(io.open(out, 'w'))
  f:write(vim.json.encode(results))
  f:close()
  io.stderr:write('lsp test: ' .. msg .. '\n')
  os.exit(1)
end

---@param cond fun(): boolean
---@param what string
---@param ms integer?
local function wait_for(cond, what, ms)
  if not vim.wait(ms or 120000, cond, 50) then
    fail('timed out waiting for ' .. what)
  end
end

-- The client command the code actions name: record what it is given.
vim.lsp.commands['rewind.open'] = function(command)
  table.insert(results.opened, command.arguments)
end

vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(ev)
    local v = ev.data.params.value
    table.insert(results.progress, { kind = v.kind, title = v.title, message = v.message, percentage = v.percentage })
  end,
})

vim.cmd.edit(ws .. '/bank.c')
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start({
  name = 'rewind',
  cmd = { bin, 'lsp', '--stdio' },
  root_dir = ws,
  handlers = {
    ['window/logMessage'] = function(_, params)
      table.insert(results.log, params.message)
    end,
  },
})
if not id then
  fail('vim.lsp.start did not start rewind lsp')
end
local client = assert(vim.lsp.get_client_by_id(id))
wait_for(function()
  return client.initialized == true
end, 'initialize')

---@param method string
---@param params table
local function request(method, params)
  local r, err = client:request_sync(method, params, 60000, buf)
  if not r then
    fail(method .. ': ' .. tostring(err))
  end
  if r.err then
    fail(method .. ': ' .. vim.inspect(r.err))
  end
  return r.result
end

local function lenses()
  return request('textDocument/codeLens', { textDocument = { uri = vim.uri_from_bufnr(buf) } })
end

local function rewind_diagnostics()
  return vim.tbl_filter(function(d)
    return d.source == 'rewind'
  end, vim.diagnostic.get(buf))
end

-- Before anything was recorded: lenses to record and check the program.
results.lenses_before = lenses()

-- A check finished in a terminal, outside the editor: the store watcher
-- publishes its diagnostic.
local t0 = vim.uv.hrtime()
local check = vim.system({ bin, 'check', '--points', 'syscalls', '--', ws .. '/bank' }, { cwd = ws }):wait()
local check_ended = vim.uv.hrtime()
results.terminal_check = { code = check.code, stdout = check.stdout }
wait_for(function()
  return #rewind_diagnostics() > 0
end, 'the diagnostic of the check run in a terminal')
results.publish_ms = (vim.uv.hrtime() - check_ended) / 1e6
results.check_ms = (check_ended - t0) / 1e6
results.diagnostics = vim.tbl_map(function(d)
  return { lnum = d.lnum, col = d.col, severity = d.severity, message = d.message, lsp = d.user_data and d.user_data.lsp }
end, rewind_diagnostics())
results.diagnostic_file = vim.api.nvim_buf_get_name(buf)

-- The code action on the diagnosed line, and what running it calls.
local line = results.diagnostics[1].lnum
local actions = request('textDocument/codeAction', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  range = { start = { line = line, character = 0 }, ['end'] = { line = line, character = 0 } },
  context = { diagnostics = vim.tbl_map(function(d) return d.lsp end, results.diagnostics) },
})
results.actions = actions
if actions and actions[1] and actions[1].command then
  client:exec_cmd(actions[1].command, { bufnr = buf })
end
results.lenses_after_check = lenses()
results.hover = request('textDocument/hover', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = line, character = 4 },
})

-- Inlay hints: the steps and threads at each line, in the program's newest
-- run, then in the failing run chosen with rewind.selectRun.
local function hints()
  return request('textDocument/inlayHint', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = vim.api.nvim_buf_line_count(buf), character = 0 } },
  })
end
results.hints_newest = hints()
local selected
client:exec_cmd({ title = 'select', command = 'rewind.selectRun', arguments = { { run = results.diagnostics[1].lsp.data.run } } },
  { bufnr = buf }, function(err, result)
    selected = { err = err, result = result }
  end)
wait_for(function()
  return selected ~= nil
end, 'rewind.selectRun')
results.selected = selected
results.hints_failing = hints()
results.hover_main = request('textDocument/hover', {
  textDocument = { uri = vim.uri_from_bufnr(buf) },
  position = { line = 36, character = 4 },
})

-- Every run so far is replayed now, while `bank` is the program they ran.
local ls = vim.system({ bin, 'ls', '--json' }):wait()
for l in vim.gsplit(ls.stdout, '\n', { trimempty = true }) do
  local run = vim.json.decode(l).id
  local r = vim.system({ bin, 'replay', run }):wait()
  results.replays[run] = { code = r.code, stdout = r.stdout, stderr = r.stderr }
end

-- The fix: bank.c becomes bank-fixed.c, rebuilt in place; the Check lens
-- (workspace/executeCommand, with progress) runs a check that passes.
vim.cmd('silent %delete _')
vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.fn.readfile(fixed))
vim.cmd('silent write')
local cc = vim.system({ 'cc', '-static', '-O1', '-g', '-pthread', '-o', 'bank', 'bank.c' }, { cwd = ws }):wait()
if cc.code ~= 0 then
  fail('cc: ' .. cc.stderr)
end
local check_lens
for _, l in ipairs(lenses()) do
  if l.command.command == 'rewind.check' then
    check_lens = l
  end
end
if not check_lens then
  fail('no Check lens after the fix')
end
local done
client:exec_cmd(check_lens.command, { bufnr = buf }, function(err, result)
  done = { err = err, result = result }
end)
wait_for(function()
  return done ~= nil
end, 'the Check lens command')
results.lens_check = done
-- The progress's end is a notification sent before the reply; the client
-- may hand it to LspProgress after the reply's callback.
wait_for(function()
  local last = results.progress[#results.progress]
  return last ~= nil and last.kind == 'end'
end, 'the Check progress to end', 10000)
wait_for(function()
  return #rewind_diagnostics() == 0
end, 'the diagnostic to go away after a passing check', 10000)
results.diagnostics_after_fix = #rewind_diagnostics()

local f = assert(io.open(out, 'w'))
f:write(vim.json.encode(results))
f:close()
client:stop()
os.exit(0)
