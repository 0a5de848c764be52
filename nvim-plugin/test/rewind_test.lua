-- The plugin under headless Neovim (tests/tests/nvim.rs runs it with
-- `nvim --headless -u NONE -i NONE -n -l`): it loads, `:help rewind` opens
-- its help, `:checkhealth rewind` has no error, :RewindRuns' list is `rewind
-- ls`'s; with an nvim-dap checkout in NVIM_DAP_PATH, the adapter and the
-- configurations are registered, :RewindOpen stops at the step, :RewindLanes
-- draws the lanes, :RewindGoto moves the session, :RewindCompare shows where
-- the runs differ (as `rewind diff` says) and the compared run's lanes.
local env = vim.env
vim.opt.rtp:prepend(env.REWIND_PLUGIN)
vim.cmd.runtime('plugin/rewind.lua')

--- A line of the report (print() may leave it unterminated after :checkhealth).
---@param line string
local function say(line)
  io.stdout:write(line, '\n')
end

local function fail(msg)
  io.stderr:write('FAIL: ' .. msg .. '\n')
  os.exit(1)
end
local function wait(ms, pred, what)
  if not vim.wait(ms, pred, 50) then
    fail('timed out waiting for ' .. what)
  end
end
---@param buf integer
---@return string
local function text_of(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

for _, c in ipairs({ 'RewindOpen', 'RewindGoto', 'RewindLanes', 'RewindBookmark', 'RewindFork', 'RewindCompare' }) do
  if vim.fn.exists(':' .. c) ~= 2 then
    fail(c .. ' is not defined')
  end
end

-- :help, as a plugin manager installs the plugin: :helptags over its doc/
-- (a copy, so the test writes no tags file into the source tree).
local docs = vim.fn.tempname()
vim.fn.mkdir(docs .. '/doc', 'p')
vim.uv.fs_copyfile(env.REWIND_PLUGIN .. '/doc/rewind.txt', docs .. '/doc/rewind.txt')
vim.opt.rtp:prepend(docs)
vim.cmd.helptags(docs .. '/doc')
for _, topic in ipairs({ 'rewind', ':RewindCompare', 'rewind-lsp', 'rewind.setup()', 'hl-RewindLaneCompared' }) do
  vim.cmd.help(topic)
  local file = vim.fn.expand('%:t')
  local line = vim.api.nvim_get_current_line()
  if file ~= 'rewind.txt' or not line:find('*' .. topic .. '*', 1, true) then
    fail(string.format(':help %s opened %s at %q', topic, file, line))
  end
  vim.cmd.helpclose()
end
say('ok: :help rewind opens rewind.txt at *rewind*')

---@param want string what the report must say
local function checkhealth(want)
  vim.cmd('silent checkhealth rewind')
  local health = text_of(0)
  vim.cmd('bwipeout')
  if health:find('ERROR') or not health:find(want, 1, true) then
    fail('checkhealth rewind:\n' .. health)
  end
end

-- The runs :RewindRuns offers are `rewind ls`'s, newest first.
local rewind = require('rewind')
local have_dap = env.NVIM_DAP_PATH ~= nil and env.NVIM_DAP_PATH ~= ''
if not have_dap then
  local warned
  local real_notify = vim.notify
  vim.notify = function(msg, level)
    warned = { msg = msg, level = level }
  end
  rewind.setup({ path = env.REWIND_BIN, home = env.REWIND_HOME })
  if not warned or warned.level ~= vim.log.levels.WARN or not warned.msg:find('nvim-dap is not installed', 1, true) then
    fail('setup() without nvim-dap said ' .. vim.inspect(warned))
  end
  warned = nil
  vim.cmd('RewindOpen ' .. env.REWIND_RUN)
  if not warned or warned.level ~= vim.log.levels.ERROR or not warned.msg:find('nvim-dap is needed', 1, true) then
    fail(':RewindOpen without nvim-dap said ' .. vim.inspect(warned))
  end
  vim.notify = real_notify
  checkhealth('nvim-dap is not installed')
  say('ok: checkhealth rewind has no error without nvim-dap')
else
  vim.opt.rtp:prepend(env.NVIM_DAP_PATH)
  rewind.setup({ path = env.REWIND_BIN, home = env.REWIND_HOME })
end
local runs = assert(rewind.runs())
local ls = vim.system({ env.REWIND_BIN, 'ls' }, { env = { REWIND_HOME = env.REWIND_HOME } }):wait()
local want = vim.split(vim.trim(ls.stdout), '\n')
if #runs ~= #want then
  fail(string.format('runs() gave %d runs, rewind ls %d', #runs, #want))
end
for i, r in ipairs(runs) do
  local id, status = want[i]:match('^(%x+)%s+(%S+)')
  if r.id ~= id or r.status ~= status or not rewind.describe_run(r):find(status, 1, true) then
    fail(string.format('run %d: %s, rewind ls: %s', i, rewind.describe_run(r), want[i]))
  end
end
say(string.format('ok: the runs are rewind ls\'s %d, newest first: %s', #runs, rewind.describe_run(runs[1])))

if not have_dap then
  say('skipped: NVIM_DAP_PATH is not set (an nvim-dap checkout); no debug session was opened')
  os.exit(0)
end
local dap = require('dap')
if not dap.adapters.rewind or dap.adapters.rewind.args[1] ~= 'dap' then
  fail('the rewind adapter is not registered: ' .. vim.inspect(dap.adapters.rewind))
end
for _, ft in ipairs({ 'c', 'cpp', 'rust' }) do
  local names = vim.tbl_map(function(c)
    return c.type == 'rewind' and c.name or nil
  end, dap.configurations[ft] or {})
  if not vim.deep_equal(names, { 'Rewind: the newest run', 'Rewind: check a program' }) then
    fail(ft .. ' configurations: ' .. vim.inspect(names))
  end
end
checkhealth('adapter is registered')
say('ok: the adapter and the c, cpp and rust configurations are registered; checkhealth rewind has no error')

local step = tonumber(env.REWIND_STEP)
vim.cmd(string.format('RewindOpen %s %d --compare %s', env.REWIND_RUN, step, env.REWIND_COMPARE))
wait(30000, function()
  return rewind.position ~= nil and rewind.position.step == step
end, 'the stop at step ' .. step)
if rewind.status() ~= string.format('step %d/%d', step, rewind.position.steps) then
  fail('status: ' .. rewind.status())
end

local buf = rewind.lanes()
wait(10000, function()
  local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  return text:find('█') ~= nil and text:find('compared') ~= nil and text:find('step ' .. step) ~= nil
end, 'the lanes')
say(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n'))

vim.cmd('RewindGoto 10')
wait(30000, function()
  return rewind.position.step == 10
end, 'the stop at step 10')
wait(10000, function()
  local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  return text:find('step 10/') ~= nil
end, 'the lanes redrawn at step 10')

say('ok: RewindOpen stopped at step ' .. step .. ', RewindLanes drew the lanes, RewindGoto moved to step 10')

-- :RewindCompare: where the runs first differ, as `rewind diff` says.
local diff = vim.system({ env.REWIND_BIN, 'diff', env.REWIND_RUN, env.REWIND_COMPARE, '--json' }, {
  env = { REWIND_HOME = env.REWIND_HOME },
}):wait()
local d = vim.json.decode(diff.stdout).divergence
vim.cmd('RewindCompare ' .. env.REWIND_COMPARE)
local cbuf = -1
wait(30000, function()
  cbuf = vim.fn.bufnr('rewind://compare')
  return cbuf ~= -1 and vim.api.nvim_buf_line_count(cbuf) > 1
end, 'the compare buffer')
local first = vim.api.nvim_buf_get_lines(cbuf, 0, 1, false)[1]
local head = string.format(
  '%s and %s first differ at event %d: step %d here, step %d in %s',
  env.REWIND_RUN:sub(1, 8),
  env.REWIND_COMPARE:sub(1, 8),
  d.index,
  d.left_step,
  d.right_step,
  env.REWIND_COMPARE:sub(1, 8)
)
if first ~= head then
  fail('the compare buffer says ' .. first .. ', rewind diff: ' .. head)
end
---@param b integer
---@param group string
---@return string[] lines highlighted with group
local function highlighted(b, group)
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(b, -1, 0, -1, { details = true })) do
    if m[4].hl_group == group then
      table.insert(out, vim.api.nvim_buf_get_lines(b, m[2], m[2] + 1, false)[1])
    end
  end
  return out
end
-- The first row after the shared events is the first difference: its
-- steps are the two sides' first events, in the highlight for what differs.
local differ = highlighted(cbuf, 'RewindDiffer')
local l, r = (differ[1] or ''):match('^%s*(%d+)%s.-│%s*(%d+)%s')
if tonumber(l) ~= d.left_step or tonumber(r) ~= d.right_step then
  fail('the rows that differ: ' .. vim.inspect(differ) .. '\n' .. text_of(cbuf))
end
say(text_of(cbuf))
-- The lanes: this run's threads, then the compared run's in their own group.
local mine, theirs = highlighted(buf, 'RewindLane'), highlighted(buf, 'RewindLaneCompared')
if #mine == 0 or #mine ~= #theirs or not text_of(buf):find('compared ' .. env.REWIND_COMPARE, 1, true) then
  fail('the lanes: ' .. vim.inspect({ mine = mine, compared = theirs }) .. '\n' .. text_of(buf))
end
say(string.format('ok: RewindCompare shows the first difference at event %d and the compared run\'s %d lanes', d.index, #theirs))

-- Check from here: four schedules from step 10, a quickfix entry each.
vim.cmd('RewindCheck 4')
wait(300000, function()
  local qf = vim.fn.getqflist({ title = 1, size = 1 })
  return qf.title:find('^rewind check from step 10 of ' .. env.REWIND_RUN) ~= nil and qf.size == 4
end, 'the quickfix list of RewindCheck from step 10')
for _, i in ipairs(vim.fn.getqflist()) do
  if not i.text:find('^schedule %d+: %S+, %d+ steps, run %x+') or i.user_data.step ~= 10 then
    fail('RewindCheck entry: ' .. vim.inspect(i))
  end
end
say('ok: RewindCheck from step 10: ' .. vim.fn.getqflist()[1].text)

-- :RewindBookmark at step 10: kept with the run, as `rewind bookmarks` lists them.
---@param ... string
---@return string
local function cli(...)
  local r = vim.system({ env.REWIND_BIN, ... }, { env = { REWIND_HOME = env.REWIND_HOME } }):wait()
  if r.code ~= 0 then
    fail('rewind ' .. table.concat({ ... }, ' ') .. ': ' .. r.stderr)
  end
  return r.stdout
end
vim.cmd('RewindBookmark alice has read the balance')
wait(10000, function()
  return cli('bookmarks', env.REWIND_RUN, '--json'):find('alice has read the balance', 1, true) ~= nil
end, 'the bookmark in rewind bookmarks')
local kept = vim.json.decode(vim.split(vim.trim(cli('bookmarks', env.REWIND_RUN, '--json')), '\n')[1])
if kept.step ~= 10 or kept.note ~= 'alice has read the balance' then
  fail('rewind bookmarks: ' .. vim.inspect(kept))
end
say('ok: RewindBookmark kept "alice has read the balance" at step 10')

-- :RewindFork: the session goes on in a fork of the run at step 10.
vim.cmd('RewindFork')
wait(60000, function()
  return rewind.position.run ~= env.REWIND_RUN
end, 'the session in the fork')
local fork = rewind.position.run
if rewind.position.step ~= 10 or not cli('ls', '--forks-of', env.REWIND_RUN):find(fork, 1, true) then
  fail(string.format('the fork %s at step %d is not listed by rewind ls --forks-of %s', fork, rewind.position.step, env.REWIND_RUN))
end
say('ok: RewindFork goes on at step 10 in ' .. fork .. ', a fork of ' .. env.REWIND_RUN)

-- :RewindRuns: the run picked opens (here the compared one).
vim.ui.select = function(choices, _, on_choice)
  for _, r in ipairs(choices) do
    if r.id == env.REWIND_COMPARE then
      return on_choice(r)
    end
  end
  fail('RewindRuns does not offer ' .. env.REWIND_COMPARE)
end
vim.cmd('RewindRuns')
wait(60000, function()
  return rewind.position.run == env.REWIND_COMPARE
end, 'the session on the run picked in RewindRuns')
say('ok: RewindRuns opened ' .. env.REWIND_COMPARE)

dap.terminate()
wait(10000, function()
  return dap.session() == nil
end, 'the session to end')
os.exit(0)
