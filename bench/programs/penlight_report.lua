--- Penlight (Debian's lua-penlight) rendering one small report per
-- record, as a server renders a page per request: each order arrives as a
-- line of text, is split and stripped (pl.stringx), its items summed
-- (pl.tablex, pl.List), rendered through a compiled pl.template and checked
-- with pl.pretty, and the page is dropped. The live set stays small (the
-- template, the totals) while every record allocates strings and tables: a
-- collector-bound program. RECORDS records (default 10000).
local stringx = require("pl.stringx")
local tablex = require("pl.tablex")
local List = require("pl.List")
local pretty = require("pl.pretty")
local template = require("pl.template")
local records = tonumber(arg and arg[1]) or 10000

local page = template.compile([[
<h1>Order $(order.id)</h1>
<p>$(order.customer), $(order.city)</p>
<table>
# for _, item in ipairs(order.items) do
<tr><td>$(item.sku)</td><td>$(item.qty)</td><td>$(string.format("%.2f", item.price))</td></tr>
# end
</table>
<p>total $(string.format("%.2f", order.total))</p>
]], { chunk_name = "order page" })

-- The i-th order as a line of text: id; customer; city; sku:qty:price,...
local function order_line(i)
  local items = {}
  for k = 1, i % 7 + 2 do
    items[k] = string.format("SKU-%05d:%d:%.2f", (i * 31 + k * 17) % 100000, k % 4 + 1, ((i + k) % 200) + 0.99)
  end
  return string.format(" %d ; Customer %d ; City %d ; %s ", i, i % 1000, i % 60, table.concat(items, ","))
end

local pages, revenue, checked = 0, 0, 0
for i = 1, records do
  local f = tablex.map(stringx.strip, stringx.split(order_line(i), ";"))
  local items = List(stringx.split(f[4], ",")):map(function(s)
    local sku, qty, price = s:match("^(.-):(%d+):([%d.]+)$")
    return { sku = sku, qty = tonumber(qty), price = tonumber(price) }
  end)
  local order = { id = tonumber(f[1]), customer = f[2], city = f[3], items = items,
    total = tablex.reduce("+", items:map(function(it) return it.qty * it.price end)) }
  local html = assert(page:render({ order = order, ipairs = ipairs, string = string }))
  pages = pages + #html
  revenue = revenue + order.total
  -- What a debug log line would show of the order.
  checked = checked + #pretty.write(order, "")
end
io.stderr:write("penlight_report ", pages, " ", checked, " ", string.format("%.2f", revenue), "\n")
