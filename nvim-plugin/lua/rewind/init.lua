---@mod rewind Rewind for Neovim: recorded runs as reversible debug sessions
---(nvim-dap) and what they found on the source lines (`rewind lsp`, vim.lsp)

---@class rewind.Config
---@field path string The `rewind` binary (default: `rewind` on PATH)
---@field home string|nil The store (REWIND_HOME) for the adapter and the server
---@field lsp boolean Start `rewind lsp` for C, C++ and Rust buffers (default: false; or call `lsp()`)
---@field schedules integer How many schedules `:RewindCheck` tries from the position (default 16)

---@class rewind.LspOpts
---@field bufnr integer|nil The buffer to attach (default: the current one)
---@field root_dir string|nil The workspace (default: the buffer's nearest `.git` directory's parent, else the current directory)

---@class rewind.RunInfo A run as `rewind ls --json` prints it
---@field id string
---@field name string|nil
---@field status string
---@field steps integer
---@field created integer
---@field fork_of {parent: string, step: integer}|vim.NIL|nil

---@class rewind.OpenArgs
---@field run string A run: id, unique prefix, @, @N or name
---@field step integer|nil The step to open at
---@field compare string|nil A run to compare with

---@class rewind.Position
---@field run string
---@field step integer
---@field steps integer
---@field virtualNs integer
---@field thread {pid: integer, tid: integer, name: string}|nil

local M = {}

---@type rewind.Config
M.config = { path = 'rewind', home = nil, lsp = false, schedules = 16 }

---@type rewind.Position|nil
M.position = nil
---@type table|nil The last `rewind/timeline` event's body
M.timeline = nil

local lanes_buf ---@type integer|nil

---@param msg string
---@param level integer|nil
local function notify(msg, level)
  vim.notify('rewind: ' .. msg, level or vim.log.levels.INFO)
end

---@return table|nil dap
local function load_dap()
  local ok, dap = pcall(require, 'dap')
  if ok then
    return dap
  end
  return nil
end

local augroup = vim.api.nvim_create_augroup('rewind', { clear = true })

--- Registers the `rewind` adapter, its configurations and the listeners
--- that keep the position and the lanes buffer current; with `lsp = true`,
--- starts `rewind lsp` for every C, C++ and Rust buffer.
---@param opts rewind.Config|nil
function M.setup(opts)
  M.config = vim.tbl_extend('force', M.config, opts or {})
  if M.config.lsp then
    vim.api.nvim_create_autocmd('FileType', {
      group = augroup,
      pattern = { 'c', 'cpp', 'rust' },
      callback = function(ev)
        M.lsp({ bufnr = ev.buf })
      end,
    })
  end
  local dap = load_dap()
  if not dap then
    notify('nvim-dap is not installed: the debug adapter is not registered', vim.log.levels.WARN)
    return
  end
  local env = nil ---@type string[]|nil
  if M.config.home then
    -- libuv takes the whole environment, as `K=V` strings.
    env = {}
    for k, v in pairs(vim.tbl_extend('force', vim.fn.environ(), { REWIND_HOME = M.config.home })) do
      table.insert(env, k .. '=' .. v)
    end
  end
  dap.adapters.rewind = { type = 'executable', command = M.config.path, args = { 'dap' }, options = { env = env } }
  for _, ft in ipairs({ 'c', 'cpp', 'rust' }) do
    local configs = dap.configurations[ft] or {}
    dap.configurations[ft] = configs
    local have = false
    for _, c in ipairs(configs) do
      have = have or c.type == 'rewind'
    end
    if not have then
      table.insert(configs, { type = 'rewind', request = 'launch', name = 'Rewind: the newest run', run = '@' })
      table.insert(configs, {
        type = 'rewind',
        request = 'launch',
        name = 'Rewind: check a program',
        check = function()
          return { program = vim.fn.input('Program: ', vim.fn.getcwd() .. '/', 'file') }
        end,
      })
    end
  end
  dap.listeners.after['event_rewind/timeline'].rewind = function(_, body)
    M.timeline = body
    M.draw_lanes()
  end
  dap.listeners.after['event_rewind/position'].rewind = function(_, body)
    M.position = body
    M.draw_lanes()
    vim.cmd.redrawstatus()
  end
end

--- Opens `run` at `step` (beside `compare`) in a new nvim-dap session: the
--- same argument as VS Code's `rewind.open` command.
---@param args rewind.OpenArgs
function M.open(args)
  local dap = load_dap()
  if not dap then
    notify('nvim-dap is needed to open a run in the debugger', vim.log.levels.ERROR)
    return
  end
  if not dap.adapters.rewind then
    -- `rewind open --editor nvim` runs `nvim -c 'RewindOpen ...'`: set up
    -- with the defaults when the user's configuration did not.
    M.setup()
  end
  assert(type(args) == 'table' and type(args.run) == 'string', 'rewind.open: {run = ID, step = N?, compare = ID?}')
  local config = { type = 'rewind', request = 'launch', name = 'rewind ' .. args.run, run = args.run }
  config.step = args.step
  config.compare = args.compare
  -- One Rewind session at a time, as in VS Code: the open one ends first.
  local current = dap.session()
  dap.run(config, { new = not (current and current.config.type == 'rewind') })
end

--- Sends a custom request to the session.
---@param command string
---@param arguments table
---@param on_result fun(err: table|nil, result: table|nil)|nil
function M.request(command, arguments, on_result)
  local dap = load_dap()
  local session = dap and dap.session()
  if not session then
    notify('no debug session', vim.log.levels.ERROR)
    return
  end
  session:request(command, arguments, function(err, result)
    if err then
      notify(command .. ': ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    if on_result then
      on_result(err, result)
    end
  end)
end

---@param step integer
function M.goto_step(step)
  M.request('rewind/goto', { step = step })
end

--- `:RewindBookmark`: a bookmark at the position, kept with the run.
---@param note string
---@param on_done fun(bookmark: {step: integer, note: string})|nil
function M.bookmark(note, on_done)
  M.request('rewind/bookmark', { action = 'add', note = note }, function(err, r)
    if err or not r then
      return
    end
    notify(string.format('bookmark at step %d: %s', r.added.step, r.added.note))
    if on_done then
      on_done(r.added)
    end
  end)
end

--- `:RewindFork`: forks the run at the position with the next schedule and
--- goes on in the fork.
---@param on_done fun(forked: table)|nil the `rewind/fork` result
function M.fork(on_done)
  M.request('rewind/fork', { open = true }, function(err, f)
    if err or not f then
      return
    end
    local differs = f.firstDifference ~= vim.NIL and f.firstDifference ~= nil
    notify(
      string.format(
        'fork %s of %s at step %d: %s, %d steps, %s',
        f.run:sub(1, 8),
        f.parent:sub(1, 8),
        f.step,
        f.status,
        f.steps,
        differs and ('first difference at step ' .. f.firstDifference) or 'identical so far'
      )
    )
    if on_done then
      on_done(f)
    end
  end)
end

--- The language server's configuration for `vim.lsp.start` (or
--- `vim.lsp.config`): `rewind lsp` on stdio, the store of the config, and
--- the client command `rewind.open` that its code actions name.
---@param opts rewind.LspOpts|nil
---@return vim.lsp.ClientConfig
function M.lsp_config(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  return {
    name = 'rewind',
    cmd = { M.config.path, 'lsp' },
    cmd_env = M.config.home and { REWIND_HOME = M.config.home } or nil,
    root_dir = opts.root_dir or vim.fs.root(bufnr, { '.git' }) or vim.fn.getcwd(),
    commands = {
      -- "Open in debugger at step N" and the "Open last failing run" lens.
      ['rewind.open'] = function(command)
        M.open(command.arguments[1])
      end,
    },
    on_attach = function(client, buf)
      if client:supports_method('textDocument/inlayHint') then
        vim.lsp.inlay_hint.enable(true, { bufnr = buf })
      end
      -- Lenses above `main`: Record, Check 64 schedules, Open last failing run.
      vim.lsp.codelens.refresh({ bufnr = buf })
      vim.api.nvim_create_autocmd({ 'BufEnter', 'BufWritePost', 'DiagnosticChanged' }, {
        group = augroup,
        buffer = buf,
        callback = function()
          vim.lsp.codelens.refresh({ bufnr = buf })
        end,
      })
    end,
  }
end

--- Starts `rewind lsp` with Neovim's own client and attaches the buffer (a
--- running server of the same workspace is reused): what the recorded runs
--- found (a deciding step, a crash, a deadlock, an SDK assertion) as
--- diagnostics, whose code actions open the run at the step; code lenses,
--- hover and inlay hints.
---@param opts rewind.LspOpts|nil
---@return integer|nil client_id
function M.lsp(opts)
  opts = opts or {}
  local bufnr = opts.bufnr or vim.api.nvim_get_current_buf()
  return vim.lsp.start(M.lsp_config(opts), { bufnr = bufnr })
end

--- The running `rewind lsp` client of a buffer, started if need be and
--- initialized (waits up to 10 s).
---@param bufnr integer
---@return vim.lsp.Client|nil
local function lsp_client(bufnr)
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'rewind' })[1]
  if not client then
    local id = M.lsp({ bufnr = bufnr })
    client = id and vim.lsp.get_client_by_id(id)
  end
  if not client or not vim.wait(10000, function()
    return client.initialized == true
  end, 20) then
    notify('rewind lsp did not start (' .. M.config.path .. ')', vim.log.levels.ERROR)
    return nil
  end
  return client
end

---@param title string
---@param items table[] quickfix items
local function quickfix(title, items)
  vim.fn.setqflist({}, ' ', { title = title, items = items })
end

--- The diagnostics rewind published (every buffer) as a quickfix list.
---@param title string
---@return integer count
local function diagnostics_to_quickfix(title)
  local diags = vim.tbl_filter(function(d)
    return d.source == 'rewind'
  end, vim.diagnostic.get(nil))
  local items = vim.diagnostic.toqflist(diags)
  for i, d in ipairs(diags) do
    local lsp = d.user_data and d.user_data.lsp
    items[i].user_data = lsp and lsp.data or nil
  end
  quickfix(title, items)
  return #items
end

--- Check from here: the schedules `rewind/check` tries from the session's
--- position, one quickfix entry each (`W` when it ended differently).
---@param session table nvim-dap's session
---@param schedules integer
local function check_from_here(session, schedules)
  local from = M.position and M.position.step or 0
  local run = M.timeline and M.timeline.run
  notify(string.format('checking %d schedules from step %d…', schedules, from))
  session:request('rewind/check', { from = from, schedules = schedules }, function(err, result)
    if err or not result then
      notify('rewind/check: ' .. (err and err.message or 'no result'), vim.log.levels.ERROR)
      return
    end
    local items, differ = {}, 0
    for _, r in ipairs(result.results) do
      local why = {}
      for _, v in ipairs(r.violations or {}) do
        table.insert(why, v.property .. ': ' .. v.why)
      end
      if not r.sameEnd then
        differ = differ + 1
      end
      table.insert(items, {
        text = string.format(
          '%s: %s, %d steps, run %s%s%s',
          (r.label:gsub('%s+', ' ')),
          r.status,
          r.steps,
          r.run,
          r.sameEnd and '' or ' (ended differently)',
          #why > 0 and (' · ' .. table.concat(why, '; ')) or ''
        ),
        type = r.sameEnd and 'I' or 'W',
        user_data = { run = r.run, step = from, compare = run },
      })
    end
    quickfix(string.format('rewind check from step %d of %s', from, run or '?'), items)
    notify(string.format('%d schedules from step %d: %d ended differently (:copen)', #items, from, differ))
  end)
end

--- Checks the program built from the current buffer's file (the language
--- server's "Check 64 schedules" lens, with its progress); then what rewind
--- found is the quickfix list.
---@param bufnr integer
---@param on_done fun(count: integer)|nil
local function check_program(bufnr, on_done)
  local client = lsp_client(bufnr)
  if not client then
    return
  end
  local params = { textDocument = vim.lsp.util.make_text_document_params(bufnr) }
  client:request('textDocument/codeLens', params, function(err, lenses)
    local lens
    for _, l in ipairs(lenses or {}) do
      if l.command and l.command.command == 'rewind.check' then
        lens = l
      end
    end
    if err or not lens then
      notify('no program of this file to check: build it with -g (docs/lsp.md)', vim.log.levels.ERROR)
      return
    end
    notify('checking ' .. lens.command.arguments[1].program .. '…')
    client:exec_cmd(lens.command, { bufnr = bufnr }, function(cerr, result)
      if cerr then
        notify('rewind.check: ' .. (cerr.message or vim.inspect(cerr)), vim.log.levels.ERROR)
        return
      end
      local failed = result and result.exit == 1
      local title = 'rewind check of ' .. lens.command.arguments[1].program
      local function done()
        local n = diagnostics_to_quickfix(title)
        notify(string.format('check %s: %d finding%s (:copen)', failed and 'failed' or 'passed', n, n == 1 and '' or 's'))
        if on_done then
          on_done(n)
        end
      end
      -- The server publishes what the check found before it answers, but
      -- the answer may overtake that notification on the way: a failed
      -- check waits for rewind's diagnostics (at most 5 s).
      local function found()
        return #vim.tbl_filter(function(d)
          return d.source == 'rewind'
        end, vim.diagnostic.get(nil)) > 0
      end
      local waited = 0
      local function poll()
        if not failed or found() or waited >= 5000 then
          return done()
        end
        waited = waited + 100
        vim.defer_fn(poll, 100)
      end
      poll()
    end)
  end, bufnr)
end

--- `:RewindCheck`: in a debug session, check from here; without one, check
--- the program built from the current file. Results go to the quickfix list.
---@param opts {schedules: integer|nil, bufnr: integer|nil, on_done: fun(count: integer)|nil}|nil
function M.check(opts)
  opts = opts or {}
  local dap = load_dap()
  local session = dap and dap.session()
  if session then
    check_from_here(session, opts.schedules or M.config.schedules)
  else
    check_program(opts.bufnr or vim.api.nvim_get_current_buf(), opts.on_done)
  end
end

--- Recorded runs, newest first (`rewind ls --json`).
---@param limit integer|nil
---@return rewind.RunInfo[]|nil runs
---@return string|nil error
function M.runs(limit)
  local cmd = { M.config.path, 'ls', '--json', '-n', tostring(limit or 100) }
  local env = M.config.home and { REWIND_HOME = M.config.home } or nil
  local ok, r = pcall(function()
    return vim.system(cmd, { env = env, text = true }):wait()
  end)
  if not ok then
    return nil, tostring(r)
  end
  if r.code ~= 0 then
    return nil, vim.trim(r.stderr)
  end
  local runs = {}
  for line in vim.gsplit(r.stdout, '\n', { trimempty = true }) do
    table.insert(runs, vim.json.decode(line))
  end
  return runs
end

--- `161d8167 bank exited:2 · 51 steps`, a fork with its parent and step.
---@param r rewind.RunInfo
---@return string
function M.describe_run(r)
  local fork = type(r.fork_of) == 'table' and string.format(' · fork of %s at step %d', r.fork_of.parent:sub(1, 8), r.fork_of.step) or ''
  return string.format('%s %s %s · %d steps%s', r.id:sub(1, 8), r.name or '', r.status, r.steps, fork)
end

--- `:RewindRuns`: pick a recorded run (vim.ui.select) and open it; a fork
--- opens at the step it was forked at, compared with its parent.
function M.pick_run()
  local runs, err = M.runs()
  if not runs then
    notify('cannot list runs: ' .. (err or '?'), vim.log.levels.ERROR)
    return
  end
  vim.ui.select(runs, { prompt = 'Rewind runs', format_item = M.describe_run, kind = 'rewind.run' }, function(r)
    if not r then
      return
    end
    if type(r.fork_of) == 'table' then
      M.open({ run = r.id, step = r.fork_of.step, compare = r.fork_of.parent })
    else
      M.open({ run = r.id })
    end
  end)
end

--- `step 36/50` for a statusline.
---@return string
function M.status()
  local p = M.position
  if not p then
    return ''
  end
  return string.format('step %d/%d', p.step, p.steps)
end

local ns = vim.api.nvim_create_namespace('rewind')

--- The highlight groups (`:help rewind-highlights`), as defaults a color
--- scheme may override.
local function highlights()
  vim.api.nvim_set_hl(0, 'RewindLane', { link = 'DiagnosticInfo', default = true })
  vim.api.nvim_set_hl(0, 'RewindLaneCompared', { link = 'DiagnosticHint', default = true })
  vim.api.nvim_set_hl(0, 'RewindDiffer', { link = 'DiffChange', default = true })
end

--- Replaces a scratch buffer's lines and highlights: `marks` are
--- `{line, col, group}` (0-based line, byte column to the line's end).
---@param buf integer
---@param lines string[]
---@param marks {[1]: integer, [2]: integer, [3]: string}[]
local function fill(buf, lines, marks)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, m in ipairs(marks) do
    vim.api.nvim_buf_set_extmark(buf, ns, m[1], m[2], { end_col = #lines[m[1] + 1], hl_group = m[3] })
  end
end

--- The scratch buffer `name` (made when `buf` is not valid), shown in a
--- window of its own.
---@param buf integer|nil
---@param name string
---@return integer buf
local function scratch(buf, name)
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].bufhidden = 'hide'
    highlights()
  end
  if vim.fn.bufwinid(buf) == -1 then
    vim.cmd('botright split')
    vim.api.nvim_win_set_buf(0, buf)
    vim.api.nvim_win_set_height(0, 10)
  end
  return buf
end

--- Draws each thread's stretches around the position into the lanes
--- buffer, when it is open.
function M.draw_lanes()
  if not lanes_buf or not vim.api.nvim_buf_is_valid(lanes_buf) or not M.position then
    return
  end
  local width, pos = 60, M.position.step
  local from = math.max(0, pos - width / 2)
  local to = math.min(M.position.steps, from + width - 1)
  M.request('rewind/lanes', { from = from, to = to, max = width }, function(err, lanes)
    if err or not lanes then
      return
    end
    local lines = { string.format('%s  step %d/%d  [%d..%d]', lanes.run, pos, M.position.steps, from, to) }
    local marks = {}
    local function section(l, title, group)
      table.insert(lines, title)
      for _, th in ipairs(l.threads) do
        local row = {}
        for i = from, to do
          row[i - from + 1] = ' '
        end
        for _, s in ipairs(th.stretches) do
          for i = math.max(s[1], from), math.min(s[2], to) do
            row[i - from + 1] = '█'
          end
        end
        local name = string.format('%-18s', th.name:sub(1, 18))
        table.insert(lines, name .. '│' .. table.concat(row) .. '│')
        table.insert(marks, { #lines - 1, 18, group })
      end
    end
    section(lanes, 'threads', 'RewindLane')
    if lanes.compare then
      section(lanes.compare, 'compared ' .. lanes.compare.run, 'RewindLaneCompared')
    end
    local caret = string.rep(' ', 19 + (pos - from)) .. '^ step ' .. pos
    table.insert(lines, caret)
    fill(lanes_buf, lines, marks)
  end)
end

--- Opens (or shows) the lanes scratch buffer.
---@return integer buf
function M.lanes()
  lanes_buf = scratch(lanes_buf, 'rewind://lanes')
  M.draw_lanes()
  return lanes_buf
end

local compare_buf ---@type integer|nil

---@param e table|nil an event as `rewind/compare` gives it
---@return string
local function event_line(e)
  if not e then
    return ''
  end
  return string.format('%6d %9s  %s', e.step, e.pid .. '/' .. e.tid, (e.text:gsub('\n', ' ')))
end

--- What a `rewind/compare` result shows: where the runs first differ, the
--- events they shared before, then each run's next events side by side
--- (`marks` highlight the rows that differ).
---@param r table
---@return string[] lines
---@return {[1]: integer, [2]: integer, [3]: string}[] marks
function M.compare_lines(r)
  local left, right = r.left:sub(1, 8), r.right:sub(1, 8)
  if r.identical then
    return { string.format('%s and %s are identical (%d events)', left, right, r.events) }, {}
  end
  local lines = {
    string.format(
      '%s and %s first differ at event %d: step %d here, step %d in %s',
      left,
      right,
      r.index,
      r.leftStep,
      r.rightStep,
      right
    ),
    'shared:',
  }
  for _, e in ipairs(r.shared) do
    table.insert(lines, event_line(e))
  end
  local width = 56
  local function cell(s)
    s = vim.fn.strcharpart(s, 0, width)
    return s .. string.rep(' ', width - vim.fn.strchars(s))
  end
  table.insert(lines, cell('this run ' .. left) .. ' │ compared ' .. right)
  local marks = {}
  for i = 1, math.max(#r.leftEvents, #r.rightEvents) do
    local a, b = r.leftEvents[i], r.rightEvents[i]
    table.insert(lines, cell(event_line(a)) .. ' │ ' .. event_line(b))
    -- The same thread doing the same thing, whatever the step.
    local same = a and b and a.tid == b.tid and a.kind == b.kind and a.text == b.text
    if not same then
      table.insert(marks, { #lines - 1, 0, 'RewindDiffer' })
    end
  end
  return lines, marks
end

--- `:RewindCompare`: compares the session's run with `run` (default the
--- compared one) in the `rewind://compare` buffer; the lanes then show the
--- compared run's threads too.
---@param run string|nil
---@param on_done fun(buf: integer)|nil
function M.compare(run, on_done)
  M.request('rewind/compare', { run = run }, function(err, r)
    if err or not r then
      return
    end
    compare_buf = scratch(compare_buf, 'rewind://compare')
    fill(compare_buf, M.compare_lines(r))
    M.draw_lanes()
    if on_done then
      on_done(compare_buf)
    end
  end)
end

return M
