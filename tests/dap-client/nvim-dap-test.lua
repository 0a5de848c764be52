-- `rewind dap` driven by nvim-dap in headless Neovim: the failing pool run
-- opens at the crash, the stack names `worker`, a line step back, a
-- function breakpoint on `worker` reached by reverse-continue, a source
-- breakpoint set in pool.c's buffer reached by reverse-continue from the
-- crash, a data breakpoint on pool.queue stopping where main clears it,
-- then terminate. Run by tests/tests/dap.rs with NVIM_DAP_PATH (a checkout of
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

  -- On to the crash again, then back to a source breakpoint set in the
  -- buffer as a user sets it: where the crashing worker takes the lock.
  request('setFunctionBreakpoints', { breakpoints = {} })
  dap.continue()
  local crash = stop(4, 'continue to the end')
  assert(crash.reason == 'exception', vim.inspect(crash))
  vim.cmd.edit(vim.fn.fnameescape(worker.source.path))
  local lock, clear
  for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
    if not lock and l:find('pthread_mutex_lock(&pool.lock);', 1, true) then lock = i end
    if l:find('pool.queue = NULL;', 1, true) then clear = i end
  end
  vim.api.nvim_win_set_cursor(0, { lock, 0 })
  dap.set_breakpoint()
  dap.reverse_continue()
  local at_lock = stop(5, 'reverse_continue to the source breakpoint')
  assert(at_lock.reason == 'breakpoint', vim.inspect(at_lock))
  assert(at_lock.threadId == crash.threadId, 'the crashing worker: ' .. vim.inspect(at_lock))
  local f = top(at_lock.threadId)
  assert(f.name == 'worker' and f.line == lock, vim.inspect(f))
  dap.clear_breakpoints()

  -- A data breakpoint on pool.queue, backwards: main cleared it.
  local info = request('dataBreakpointInfo', { name = 'pool.queue', frameId = f.id })
  assert(info.dataId, vim.inspect(info))
  request('setDataBreakpoints', { breakpoints = { { dataId = info.dataId, accessType = 'write' } } })
  dap.reverse_continue()
  local cleared = stop(6, 'reverse_continue to the data breakpoint')
  assert(cleared.reason == 'data breakpoint', vim.inspect(cleared))
  local m = top(cleared.threadId)
  assert(m.name == 'main' and m.line >= clear and m.line <= clear + 2, vim.inspect(m))
  dap.terminate()
end)
if not ok then
  fail(tostring(e))
end
print('nvim-dap: ok')
vim.cmd('qa!')
