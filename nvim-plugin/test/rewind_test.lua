-- The plugin under headless Neovim (tests/tests/nvim.rs runs it with
-- `nvim --headless -u NONE -i NONE -n -l`): it loads, and with an nvim-dap
-- checkout in NVIM_DAP_PATH, :RewindOpen stops at the step, :RewindLanes
-- draws the lanes and :RewindGoto moves the session.
local env = vim.env
vim.opt.rtp:prepend(env.REWIND_PLUGIN)
vim.cmd.runtime('plugin/rewind.lua')

local function fail(msg)
  io.stderr:write('FAIL: ' .. msg .. '\n')
  os.exit(1)
end
local function wait(ms, pred, what)
  if not vim.wait(ms, pred, 50) then
    fail('timed out waiting for ' .. what)
  end
end

for _, c in ipairs({ 'RewindOpen', 'RewindGoto', 'RewindLanes', 'RewindBookmark', 'RewindFork', 'RewindCompare' }) do
  if vim.fn.exists(':' .. c) ~= 2 then
    fail(c .. ' is not defined')
  end
end

if not env.NVIM_DAP_PATH or env.NVIM_DAP_PATH == '' then
  print('skipped: NVIM_DAP_PATH is not set (an nvim-dap checkout); the plugin loaded and defined its commands')
  os.exit(0)
end
vim.opt.rtp:prepend(env.NVIM_DAP_PATH)
local dap = require('dap')
local rewind = require('rewind')
rewind.setup({ path = env.REWIND_BIN, home = env.REWIND_HOME })
if not dap.adapters.rewind then
  fail('the rewind adapter is not registered')
end
vim.cmd('checkhealth rewind')
local health = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
if health:find('ERROR') or not health:find('adapter is registered') then
  fail('checkhealth rewind:\n' .. health)
end

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
print(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n'))

vim.cmd('RewindGoto 10')
wait(30000, function()
  return rewind.position.step == 10
end, 'the stop at step 10')
wait(10000, function()
  local text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
  return text:find('step 10/') ~= nil
end, 'the lanes redrawn at step 10')

print('ok: RewindOpen stopped at step ' .. step .. ', RewindLanes drew the lanes, RewindGoto moved to step 10')

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
print('ok: RewindCheck from step 10: ' .. vim.fn.getqflist()[1].text)

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
print('ok: RewindRuns opened ' .. env.REWIND_COMPARE)

dap.terminate()
wait(10000, function()
  return dap.session() == nil
end, 'the session to end')
os.exit(0)
