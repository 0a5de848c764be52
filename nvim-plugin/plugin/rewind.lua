-- Rewind's commands for nvim-dap (`:help rewind`).
if vim.g.loaded_rewind then
  return
end
vim.g.loaded_rewind = true

local cmd = vim.api.nvim_create_user_command

cmd('RewindOpen', function(o)
  local a = o.fargs
  local args = { run = a[1] }
  local i = 2
  if a[i] and a[i]:match('^%d+$') then
    args.step = tonumber(a[i])
    i = i + 1
  end
  if a[i] == '--compare' then
    args.compare = a[i + 1]
  end
  require('rewind').open(args)
end, { nargs = '+', desc = 'Rewind: open RUN [STEP] [--compare RUN]' })

cmd('RewindGoto', function(o)
  require('rewind').goto_step(tonumber(o.args))
end, { nargs = 1, desc = 'Rewind: go to a step' })

cmd('RewindLanes', function()
  require('rewind').lanes()
end, { desc = 'Rewind: the thread lanes around the position' })

cmd('RewindBookmark', function(o)
  require('rewind').bookmark(o.args)
end, { nargs = 1, desc = 'Rewind: bookmark the position' })

cmd('RewindFork', function()
  require('rewind').fork()
end, { desc = 'Rewind: fork from here and continue in the fork' })

cmd('RewindCompare', function(o)
  require('rewind').compare(o.args)
end, { nargs = 1, desc = 'Rewind: compare with a run: where they differ, and its lanes' })

cmd('RewindCheck', function(o)
  require('rewind').check({ schedules = tonumber(o.args) })
end, {
  nargs = '?',
  desc = 'Rewind: check from here (in a session), else the program of this file; results in the quickfix list',
})

cmd('RewindRuns', function()
  require('rewind').pick_run()
end, { desc = 'Rewind: pick a recorded run and open it' })
