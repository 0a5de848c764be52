-- `rewind dap` driven by nvim-dap in headless Neovim: the failing pool run
-- opens at the crash, the stack names `worker`, a line step back, a
-- function breakpoint on `worker` reached by reverse-continue, then
-- terminate. Run by tests/tests/dap.rs with NVIM_DAP_PATH (a checkout of
-- nvim-dap), REWIND_BIN and RUN; prints `nvim-dap: ok`.

vim.opt.rtp:prepend(assert(os.getenv('NVIM_DAP_PATH'), 'NVIM_DAP_PATH'))
local dap = require('dap')

dap.adapters.rewind = {
  type = 'executable',
  command = assert(os.getenv('REWIND_BIN'), 'REWIND_BIN'),
  args = { 'dap' },
}

---@type table[]
local stops = {}
dap.listeners.after.event_stopped['rewind-test'] = function(_, body)
  table.insert(stops, body)
end

---@param msg string
local function fail(msg)
  io.stderr:write('nvim-dap: ' .. msg .. '\n')
  vim.cmd('cquit 1')
end

---@param n integer
---@param what string
---@return table
local function stop(n, what)
  if not vim.wait(60000, function() return #stops >= n end, 20) then
    fail('no stop after ' .. what)
  end
  return stops[n]
end

---@param command string
---@param args table
---@return table
local function request(command, args)
  local done, err, res = false, nil, nil
  dap.session():request(command, args, function(e, r)
    err, res, done = e, r, true
  end)
  if not vim.wait(60000, function() return done end, 20) then
    fail(command .. ' got no response')
  end
  if err then
    fail(command .. ': ' .. vim.inspect(err))
  end
  return res
end

---@param tid integer
---@return table
local function top(tid)
  return request('stackTrace', { threadId = tid }).stackFrames[1]
end

local ok, e = pcall(function()
  dap.run({ type = 'rewind', request = 'launch', name = 'pool', run = os.getenv('RUN') })
  local first = stop(1, 'launch')
  assert(first.reason == 'exception', 'opens at the crash: ' .. vim.inspect(first))
  local frames = request('stackTrace', { threadId = first.threadId }).stackFrames
  local worker
  for _, f in ipairs(frames) do
    if f.name == 'worker' then worker = f end
  end
  assert(worker and worker.line > 0, 'worker in ' .. vim.inspect(frames))

  dap.step_back()
  local back = stop(2, 'step_back')
  assert(back.reason == 'step', vim.inspect(back))
  local here = top(first.threadId)
  assert(here.name == 'worker' and here.line < worker.line, vim.inspect(here))

  local set = request('setFunctionBreakpoints', { breakpoints = { { name = 'worker' } } })
  assert(set.breakpoints[1].verified, vim.inspect(set))
  dap.reverse_continue()
  local bp = stop(3, 'reverse_continue')
  assert(bp.reason == 'breakpoint', vim.inspect(bp))
  local names = {}
  for _, f in ipairs(request('stackTrace', { threadId = bp.threadId }).stackFrames) do
    names[f.name] = true
  end
  assert(names.worker, 'stopped in worker (or a function inlined into it): ' .. vim.inspect(names))
  dap.terminate()
end)
if not ok then
  fail(tostring(e))
end
print('nvim-dap: ok')
vim.cmd('qa!')
