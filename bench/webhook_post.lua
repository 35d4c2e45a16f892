-- wrk request script of the webhook benchmarks: `-- <file> <threads>`, a file of
-- "<signature>\t<body>" lines; each wrk thread posts its own share of the lines
-- (line % threads == thread id), cycling.
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
      local sig, body = line:match("([^\t]+)\t(.*)")
      n = n + 1
      reqs[n] = wrk.format("POST", nil,
        {["Content-Type"] = "application/json", ["X-Signature"] = sig}, body)
    end
    line_no = line_no + 1
  end
end
function request()
  i = i % n + 1
  return reqs[i]
end
