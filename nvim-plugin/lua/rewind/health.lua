--- `:checkhealth rewind`
local M = {}

function M.check()
  vim.health.start('rewind')
  if vim.fn.has('nvim-0.11') == 1 then
    vim.health.ok('Neovim ' .. tostring(vim.version()))
  else
    vim.health.error('Neovim 0.11 or newer is needed, this is ' .. tostring(vim.version()))
  end
  local path = require('rewind').config.path
  if vim.fn.executable(path) == 1 then
    vim.health.ok('adapter: ' .. vim.fn.exepath(path))
  else
    vim.health.error('the rewind binary is not found: ' .. path, { 'set it with require("rewind").setup({path = ...})' })
  end
  local clients = vim.lsp.get_clients({ name = 'rewind' })
  if #clients > 0 then
    vim.health.ok(string.format('rewind lsp is running (%d client%s)', #clients, #clients == 1 and '' or 's'))
  else
    vim.health.info('rewind lsp is not running: require("rewind").lsp() or setup({lsp = true})')
  end
  if pcall(require, 'dap') then
    local dap = require('dap')
    if dap.adapters.rewind then
      vim.health.ok('nvim-dap: the rewind adapter is registered')
    else
      vim.health.warn('nvim-dap: call require("rewind").setup()')
    end
  else
    vim.health.warn('nvim-dap is not installed')
  end
end

return M
