-- The plugin's language-server side under headless Neovim, with no nvim-dap
-- (tests/tests/nvim.rs runs it with `nvim --headless -u NONE -i NONE -n -l`
-- in a workspace WS holding bank.c and its program built there with -g):
-- setup({lsp = true}) starts `rewind lsp` for bank.c, :RewindCheck (no
-- session) checks the program and fills the quickfix list from what rewind
-- found, the code action calls open() with the run and the step,
-- :RewindRuns offers the runs. With an nvim-dap checkout in NVIM_DAP_PATH,
-- the code action then opens a real session at the step.
local env = vim.env
vim.opt.rtp:prepend(env.REWIND_PLUGIN)
vim.cmd.runtime('plugin/rewind.lua')

--- A line of the report (print() may leave it unterminated after :checkhealth).
---@param line string
local function say(line)
  io.stdout:write(line, '\n')
end

---@param msg string
local function fail(msg)
  io.stderr:write('FAIL: ' .. msg .. '\n')
  -- What the server said (window/logMessage, kept by vim.lsp's log).
  local log = io.open(vim.lsp.get_log_path())
  if log then
    local lines = vim.split(log:read('*a'), '\n')
    log:close()
    io.stderr:write(table.concat(vim.list_slice(lines, math.max(1, #lines - 40)), '\n') .. '\n')
  end
  os.exit(1)
end

---@param ms integer
---@param pred fun(): boolean
---@param what string
local function wait(ms, pred, what)
  if not vim.wait(ms, pred, 50) then
    fail('timed out waiting for ' .. what)
  end
end

for _, c in ipairs({ 'RewindCheck', 'RewindRuns' }) do
  if vim.fn.exists(':' .. c) ~= 2 then
    fail(c .. ' is not defined')
  end
end

local have_dap = env.NVIM_DAP_PATH ~= nil and env.NVIM_DAP_PATH ~= ''
if have_dap then
  vim.opt.rtp:prepend(env.NVIM_DAP_PATH)
end
local rewind = require('rewind')
rewind.setup({ path = env.REWIND_BIN, home = env.REWIND_HOME, lsp = true })

-- Opening a C file starts the server (FileType autocmd) and attaches it
-- (-u NONE leaves file type detection off; a user's configuration has it).
vim.cmd('filetype on')
vim.cmd.edit(env.WS .. '/bank.c')
local buf = vim.api.nvim_get_current_buf()
local client
wait(20000, function()
  client = vim.lsp.get_clients({ bufnr = buf, name = 'rewind' })[1]
  return client ~= nil and client.initialized == true
end, 'rewind lsp to start for bank.c')
if client.config.root_dir ~= env.WS then
  fail('root_dir ' .. tostring(client.config.root_dir) .. ', not ' .. env.WS)
end
if not vim.lsp.inlay_hint.is_enabled({ bufnr = buf }) then
  fail('inlay hints are not enabled for the buffer')
end
say('ok: rewind lsp attached to bank.c, root ' .. client.config.root_dir)

-- :RewindCheck without a debug session: the program's Check lens, then the
-- quickfix list.
local t0 = vim.uv.hrtime()
vim.cmd('RewindCheck')
wait(600000, function()
  local qf = vim.fn.getqflist({ title = 1, size = 1 })
  return qf.title:find('^rewind check of ') ~= nil and qf.size > 0
end, 'the quickfix list of :RewindCheck')
local check_ms = (vim.uv.hrtime() - t0) / 1e6
local item
for _, i in ipairs(vim.fn.getqflist()) do
  if i.text:find('^a reschedule') then
    item = i
  end
end
if not item then
  fail('no deciding step in the quickfix list: ' .. vim.inspect(vim.fn.getqflist()))
end
local file = vim.api.nvim_buf_get_name(item.bufnr)
if not file:match('/bank%.c$') then
  fail('the finding is in ' .. file)
end
-- The deciding step is in teller, between its read of the balance
-- (bank.c:22) and its store (27): a switch anywhere there loses a deposit.
-- Which line narrowing lands on follows the portfolio's find (the write of
-- line 26 with system-call points, a memory access of line 24's snprintf
-- with race-directed or memory points); each is a right answer.
if item.lnum < 22 or item.lnum > 26 then
  fail('the finding is on line ' .. item.lnum .. ', not in bank.c:22-26: ' .. item.text)
end
if not item.text:find('^a reschedule after this line lets thread 1000/100%d run: the run ends exited:2 instead of exited:0') then
  fail('the finding says: ' .. item.text)
end
local data = item.user_data
if type(data) ~= 'table' or not data.run or not data.step or not data.compare then
  fail('the entry carries no {run, step, compare}: ' .. vim.inspect(item))
end
if not item.text:find('step ' .. data.step .. '%)$') then
  fail('the text does not name step ' .. data.step .. ': ' .. item.text)
end
say(string.format('ok: RewindCheck put bank.c:%d in the quickfix list in %.0f ms: %s', item.lnum, check_ms, item.text))

-- The code action on that line calls open() with the diagnostic's data.
local opened = {}
local real_open = rewind.open
rewind.open = function(a)
  table.insert(opened, a)
end
vim.api.nvim_win_set_cursor(0, { item.lnum, 0 })
vim.lsp.buf.code_action({
  apply = true,
  filter = function(a)
    return a.title == 'Open in debugger at step ' .. data.step
  end,
})
wait(20000, function()
  return #opened == 1
end, 'the code action to call open()')
if not vim.deep_equal(opened[1], { run = data.run, step = data.step, compare = data.compare }) then
  fail('the code action opened ' .. vim.inspect(opened[1]))
end
say(string.format('ok: the code action opened run %s at step %d compared with %s', data.run, data.step, data.compare))

-- :RewindRuns lists the runs newest first and opens the one picked.
local listed
local real_select = vim.ui.select
vim.ui.select = function(choices, o, on_choice)
  listed = vim.tbl_map(o.format_item, choices)
  for _, r in ipairs(choices) do
    if r.id == data.run then
      on_choice(r)
      return
    end
  end
  on_choice(nil)
end
vim.cmd('RewindRuns')
vim.ui.select = real_select
local ls = vim.system({ env.REWIND_BIN, 'ls', '--json' }):wait()
local want = #vim.split(vim.trim(ls.stdout), '\n')
if not listed or #listed ~= want then
  fail(string.format('RewindRuns offered %s runs, rewind ls has %d', listed and #listed or 'no', want))
end
if not listed[1]:find('exited:') or not vim.deep_equal(opened[2], { run = data.run }) then
  fail('RewindRuns: ' .. vim.inspect({ listed = listed, opened = opened[2] }))
end
say(string.format('ok: RewindRuns offered %d runs (%s) and opened the one picked', #listed, listed[1]))

vim.cmd('silent checkhealth rewind')
local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
if health:find('ERROR') or not health:find('rewind lsp is running') then
  fail('checkhealth rewind:\n' .. health)
end
vim.cmd('bwipeout')

if not have_dap then
  say('skipped: NVIM_DAP_PATH is not set; the code action did not open a debug session')
  os.exit(0)
end

-- With nvim-dap: the same code action opens a session at the step.
rewind.open = real_open
vim.api.nvim_set_current_buf(buf)
vim.api.nvim_win_set_cursor(0, { item.lnum, 0 })
vim.lsp.buf.code_action({
  apply = true,
  filter = function(a)
    return a.title == 'Open in debugger at step ' .. data.step
  end,
})
wait(60000, function()
  return rewind.position ~= nil and rewind.position.run == data.run and rewind.position.step == data.step
end, 'the session at step ' .. data.step)
wait(10000, function()
  return rewind.timeline ~= nil and rewind.timeline.run == data.run
end, 'the timeline of ' .. data.run)
if rewind.timeline.deciding ~= data.step then
  fail('the timeline marks step ' .. tostring(rewind.timeline.deciding) .. ' as deciding, not ' .. data.step)
end
say(string.format('ok: the code action opened a debug session stopped at step %d of %s', data.step, data.run))
local dap = require('dap')
dap.terminate()
wait(10000, function()
  return dap.session() == nil
end, 'the session to end')
os.exit(0)
