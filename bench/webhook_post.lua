-- wrk request script of the webhook benchmarks: `-- <file> <threads>`, a file of
-- "<signature>\t<body>" lines, or "<Name: value>\t...\t<body>" lines (every field before the
-- body a header; a field without ": " is the X-Signature value); each wrk thread posts its own
-- share of the lines (line % threads == thread id), cycling.
local counter = 0
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
function init(args)
  reqs, n, i = {}, 0, 0
  local nthreads = tonumber(args[2])
  local line_no = 0
  for line in io.lines(args[1]) do
    if line_no % nthreads == tid then
      local fields = {}
      for field in line:gmatch("[^\t]+") do fields[#fields + 1] = field end
      local headers = {["Content-Type"] = "application/json"}
      for k = 1, #fields - 1 do
        local name, value = fields[k]:match("^([^:]+): (.*)$")
        if name then headers[name] = value else headers["X-Signature"] = fields[k] end
      end
      n = n + 1
      reqs[n] = wrk.format("POST", nil, headers, fields[#fields])
    end
    line_no = line_no + 1
  end
end
function request()
  i = i % n + 1
  return reqs[i]
end
