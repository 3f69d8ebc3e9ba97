-- Drives Neovim's built-in LSP client (0.7 and later) against `converge-dsl lsp`, headless:
-- opens FILE, waits for the diagnostics, asks a completion, a definition and a hover at the
-- given positions, renames the name at RENAME_* to RENAME_TO (its edits applied and every
-- buffer written), and writes what it got as JSON to OUT. Arguments come from the environment.
local env = vim.env
local file, out = env.CONVERGE_FILE, env.CONVERGE_OUT
local result = { diagnostics = {}, completion = {}, definition = {}, hover = "", renamed = {} }

local function finish()
  vim.fn.writefile({ vim.fn.json_encode(result) }, out)
  vim.cmd("qall!")
end

vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local client = vim.lsp.start_client({
  name = "converge-dsl",
  cmd = { env.CONVERGE_PYTHON, "-m", "converge_dsl", "lsp" },
  root_dir = env.CONVERGE_ROOT,
})
if client == nil then
  result.error = "the client did not start"
  finish()
end
vim.lsp.buf_attach_client(buf, client)

vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local raw = (d.user_data or {}).lsp or {}
  table.insert(result.diagnostics, {
    code = d.code or raw.code, line = d.lnum, col = d.col, message = d.message,
  })
end

local uri = vim.uri_from_bufnr(buf)
local function ask(method, line, character)
  local params = { textDocument = { uri = uri }, position = { line = line, character = character } }
  local answers = vim.lsp.buf_request_sync(buf, method, params, 30000) or {}
  for _, answer in pairs(answers) do
    if answer.result then return answer.result end
  end
  return {}
end

local items = ask("textDocument/completion", tonumber(env.COMPLETE_LINE), tonumber(env.COMPLETE_CHAR))
for _, item in ipairs(items.items or items) do table.insert(result.completion, item.label) end
local found = ask("textDocument/definition", tonumber(env.DEFINE_LINE), tonumber(env.DEFINE_CHAR))
for _, location in ipairs(found.uri and { found } or found) do
  table.insert(result.definition, {
    uri = location.uri, line = location.range.start.line, character = location.range.start.character,
  })
end
local hover = ask("textDocument/hover", tonumber(env.HOVER_LINE), tonumber(env.HOVER_CHAR))
local contents = hover.contents or {}
result.hover = contents.value or (type(contents) == "string" and contents) or ""

local position = { line = tonumber(env.RENAME_LINE), character = tonumber(env.RENAME_CHAR) }
local params = { textDocument = { uri = uri }, position = position, newName = env.RENAME_TO }
for _, answer in pairs(vim.lsp.buf_request_sync(buf, "textDocument/rename", params, 30000) or {}) do
  if answer.error then result.rename_error = answer.error.message end
  if answer.result then
    for edited, _ in pairs(answer.result.changes or {}) do table.insert(result.renamed, edited) end
    vim.lsp.util.apply_workspace_edit(answer.result, "utf-16")
  end
end
vim.cmd("silent wall")
finish()
