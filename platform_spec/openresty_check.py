"""tecs-profile inside nginx with lua-nginx-module (OpenResty's core).

Runs nginx (unpacked by scripts/nginx-lua.sh) on 127.0.0.1 with two workers
and examples/openresty/worker_profile.lua: /profile/start turns profiling on
in every worker, a bounded burst of requests exercises
examples/openresty/handler.lua, /profile/stop makes every worker write its own
profile. Then the control channel, which each worker opens with one line
in init_worker_by_lua_block: `tecs-profile targets` lists both workers, and
today's MCP clients (scripts/mcp-clients.sh: PyPI's mcp 2.x in both eras and
1.x, the TypeScript SDK and its 2.x client, the inspector's CLI) drive
`tecs-profile mcp` against one of them while requests keep it busy. Prints
TAP. Usage: openresty_check.py NGINX_ROOT (from the repository root, after
make build).
"""
import glob
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

repo = os.getcwd()
ngx_root = os.path.abspath(sys.argv[1])
WORKERS = 2
# Bounds on waiting (for nginx, the workers, a profile's samples), not
# guesses at the machine's speed.
PATIENCE_SECONDS = 120
# Samples of the MCP session's worker before the burst of requests stops.
ENOUGH_SAMPLES = 50

results = []
# What the MCP client called and was answered, printed after the results
# as TAP comments.
exchange = []


def check(name, ok, detail=""):
    results.append((name, bool(ok), detail))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return r.read().decode()


def parse_collapsed(text):
    """Rows of (frames, count); raises on a malformed line."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"^(.+) (\d+)$", line)
        if not m or not re.search(r"_\[[NICGJ]\]$", m.group(1)):
            raise ValueError("bad line: %r" % line)
        rows.append((m.group(1).split(";"), int(m.group(2))))
    return rows


def worker_connection(port):
    """A keep-alive connection and the pid of the worker that holds it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/pid")
    return conn, int(conn.getresponse().read().decode())


def fetch(conn, path):
    conn.request("GET", path)
    r = conn.getresponse()
    return r.status, r.read().decode()


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def parent_pid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


prefix = tempfile.mkdtemp(prefix="tecs-nginx-") + "/"
ctl = prefix + "ctl"
for d in ("logs", "tmp"):
    os.makedirs(prefix + d)
port = free_port()
modules = ngx_root + "/usr/lib/nginx/modules/"
lua_path = ";".join([repo + "/lua/?.lua", repo + "/examples/openresty/?.lua",
                     ngx_root + "/usr/share/lua/5.1/?.lua", ";"])
conf = """
load_module {modules}ndk_http_module.so;
load_module {modules}ngx_http_lua_module.so;
{user}
env TECS_PROFILE_DIR;
daemon off;
master_process on;
worker_processes {workers};
pid {prefix}nginx.pid;
error_log {prefix}logs/error.log info;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {prefix}tmp/body;
  proxy_temp_path {prefix}tmp/proxy;
  fastcgi_temp_path {prefix}tmp/fastcgi;
  uwsgi_temp_path {prefix}tmp/uwsgi;
  scgi_temp_path {prefix}tmp/scgi;
  lua_package_path "{lua_path}";
  lua_package_cpath "{repo}/build/lib/?.so;;";
  lua_shared_dict tecs_profile 64k;
  keepalive_requests 1000000;
  init_by_lua_block {{
    local ok, err = pcall(require("tecs.profile").listen)
    package.loaded.listen_in_master = ok and "listening" or err
  }}
  init_worker_by_lua_block {{
    require("tecs.profile").listen()
    ngx.timer.every(0.1, require("worker_profile").poll)
  }}
  server {{
    listen 127.0.0.1:{port};
    location = /profile/start {{ content_by_lua_block {{ require("worker_profile").want(true) }} }}
    location = /profile/stop  {{ content_by_lua_block {{ require("worker_profile").want(false) }} }}
    location = /work          {{ content_by_lua_block {{ require("handler").run() }} }}
    location = /listen-in-master {{ content_by_lua_block {{ ngx.say(package.loaded.listen_in_master) }} }}
    location = /pid           {{ content_by_lua_block {{ ngx.say(ngx.worker.pid()) }} }}
    location = /native {{ content_by_lua_block {{
      local ok, s = pcall(require("tecs.profile").sample, {{ nativeFrames = true }})
      if not ok then return ngx.say("error: ", s) end
      local note, block = s:stats().nativeFramesNote, string.rep("tecs-profile native frames ", 4000)
      local t0 = os.clock()
      while not note and s:stats().nativeFrames.stacks < 100 and os.clock() - t0 < 20 do
        for _ = 1, 20 do ngx.md5(block) end
      end
      local text = s:stop()
      local below, md5 = 0, 0
      for line in text:gmatch("[^" .. string.char(10) .. "]+") do
        local n = tonumber(line:match(" (%d+)$"))
        if line:find("[native:", 1, true) then below = below + n end
        if line:lower():find("md5", 1, true) then md5 = md5 + n end
      end
      ngx.say(note or ("native " .. below .. " md5 " .. md5 .. " of " .. s:stats().recordedSamples))
    }} }}
  }}
}}
""".format(modules=modules, user="user root;" if os.getuid() == 0 else "", workers=WORKERS,
           prefix=prefix, lua_path=lua_path, repo=repo, port=port)
with open(prefix + "nginx.conf", "w") as f:
    f.write(conf)

env = dict(os.environ)
env["TECS_PROFILE_DIR"] = ctl
env["LUA_PATH"] = repo + "/lua/?.lua;" + repo + "/lua/?/init.lua;;"
env["LUA_CPATH"] = repo + "/build/lib/?.so;;"
cli_env = dict(env)
env["LD_LIBRARY_PATH"] = ":".join([ngx_root + "/usr/lib/x86_64-linux-gnu", ngx_root + "/lib/x86_64-linux-gnu"])
nginx = subprocess.Popen([ngx_root + "/usr/sbin/nginx", "-p", prefix, "-c", prefix + "nginx.conf",
                          "-e", prefix + "logs/error.log"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
try:
    deadline = time.time() + 15
    up = False
    while time.time() < deadline and not up:
        try:
            get(port, "/work")
            up = True
        except OSError:
            if nginx.poll() is not None:
                break
            time.sleep(0.1)
    check("nginx with the Lua module serves requests", up)
    if up:
        check("/profile/start turns profiling on", "profiling on" in get(port, "/profile/start"))
        time.sleep(0.5)  # every worker's timer sees the flag
        served = 0
        t0 = time.time()
        while time.time() - t0 < 2.0 and served < 3000:  # bounded burst, loopback only
            get(port, "/work")
            served += 1
        check("requests served while profiling (%d)" % served, served > 0)
        check("/profile/stop turns profiling off", "profiling off" in get(port, "/profile/stop"))
        files = []
        deadline = time.time() + 5
        while time.time() < deadline:
            files = sorted(glob.glob(prefix + "tecs-worker-*.collapsed"))
            if len(files) >= WORKERS:
                break
            time.sleep(0.1)
        check("each of the %d workers wrote its own profile" % WORKERS, len(files) == WORKERS,
              "files: %s" % files)
        total = handler = 0
        bad = None
        for path in files:
            try:
                for frames, count in parse_collapsed(open(path).read()):
                    total += count
                    if any(re.match(r"^.*handler\.lua:\d+$", fr) for fr in frames):
                        handler += count
            except ValueError as e:
                bad = "%s: %s" % (path, e)
        check("the profiles are well-formed collapsed stacks", bad is None, bad or "")
        check("samples were recorded in the workers (%d)" % total, total > 0)
        check("the request handler's frames are in the profiles (%d samples)" % handler, handler > 0)

        # The control channel: one listen() per worker, in init_worker.
        cli = ["luajit", repo + "/bin/tecs-profile"]
        rows = []
        deadline = time.time() + PATIENCE_SECONDS
        while time.time() < deadline:
            out = subprocess.run(cli + ["targets"], env=cli_env, capture_output=True, text=True).stdout
            rows = [line.split() for line in out.splitlines()[1:]]
            if len(rows) >= WORKERS:
                break
            time.sleep(0.1)
        pids = sorted(int(r[0]) for r in rows)
        check("tecs-profile targets lists the %d workers, kind nginx" % WORKERS,
              len(rows) == WORKERS and all(r[1] == "nginx" for r in rows), out)
        check("the targets are the workers of the nginx started",
              pids and all(parent_pid(pid) == nginx.pid for pid in pids), "pids %s, master %d" % (pids, nginx.pid))
        check("each target is named after its worker",
              sorted(" ".join(r[4:]) for r in rows) == ["nginx worker %d" % i for i in range(WORKERS)], out)

        try:
            said = get(port, "/native")
        except OSError as e:
            said = "%s: %s" % (e, open(prefix + "logs/error.log").read()[-1500:])
        m = re.match(r"native (\d+) md5 (\d+) of (\d+)", said)
        check("a worker's session with nativeFrames walks below ngx.md5's FFI call into nginx's C code (%s)"
              % said.strip()[:60],
              m is not None and int(m.group(1)) >= 50 and int(m.group(2)) >= 25, said)

        said = get(port, "/listen-in-master")
        check("listen() in init_by_lua (the master) is refused, saying where to call it",
              "init_worker_by_lua" in said, said)

        baseline = get(port, "/work")
        conn, target = worker_connection(port)
        check("the worker holding the connection is a target (%d)" % target, target in pids)
        rc = subprocess.run(["bash", "scripts/mcp-clients.sh"], capture_output=True, text=True)
        clients = dict(line.split("=", 1) for line in rc.stdout.splitlines() if "=" in line)
        check("today's MCP clients are set up (scripts/mcp-clients.sh)", rc.returncode == 0 and clients, rc.stderr)
        if clients and target in pids:
            # What an agent does, by each client in each era it speaks,
            # while requests keep the worker busy.
            calls = [["list_targets", {}], ["profiler_start", {}],
                     ["profiler_start", {"target": target, "seconds": 3}], ["profiler_stop", {"target": target}],
                     ["report", {"target": target, "by": "function"}]]
            node_env = dict(cli_env, NODE_MODULES=clients["node_modules"])
            drivers = [
                ("PyPI's mcp %s" % clients["python_version"], "2025-11-25",
                 [clients["python"], "spec/support/mcp_client.py", "legacy"], cli_env),
                ("PyPI's mcp %s" % clients["python_version"], "2026-07-28",
                 [clients["python"], "spec/support/mcp_client.py", "2026-07-28"], cli_env),
                ("PyPI's mcp %s" % clients["python1_version"], "2025-11-25",
                 [clients["python1"], "spec/support/mcp_client.py", "legacy"], cli_env),
                ("@modelcontextprotocol/sdk %s" % clients["sdk_version"], "2025-11-25",
                 [clients["node"], "spec/support/mcp_client.cjs", "sdk", "legacy"], node_env),
                ("@modelcontextprotocol/client %s" % clients["client_version"], "2026-07-28",
                 [clients["node"], "spec/support/mcp_client.cjs", "client", "2026-07-28"], node_env),
            ]
            for name, revision, argv, env_of in drivers:
                name = "%s (%s)" % (name, revision)
                client = subprocess.Popen(argv + ["luajit", repo + "/bin/tecs-profile", json.dumps(calls)], env=env_of,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                # Requests keep the target busy until its session holds
                # enough samples (or the session is over), however fast the
                # machine.
                # The status asked here waits for the worker's next poll and
                # holds the channel meanwhile, which serves one client at a
                # time: asked at most every 0.3 s, so that the agent's own
                # calls (retried while busy) get their turn.
                served, sampled, bodies = 0, 0, set()
                deadline = time.time() + PATIENCE_SECONDS
                asked = 0.0
                while client.poll() is None and sampled < ENOUGH_SAMPLES and time.time() < deadline:
                    for _ in range(20):
                        status, body = fetch(conn, "/work")
                        bodies.add((status, body))
                        served += 1
                    if time.time() - asked < 0.3:
                        continue
                    out = subprocess.run(cli + ["attach", str(target), "status"], env=cli_env, capture_output=True,
                                         text=True).stdout
                    asked = time.time()
                    # "not sampling, N samples" is the last session's.
                    m = re.search(r"\): sampling, (\d+) samples", out)
                    if m:
                        sampled = int(m.group(1))
                check("%s: requests served to the profiled worker while the session ran (%d)" % (name, served),
                      served > 0 and bodies == {(200, baseline)}, "answers: %s, before: %r" % (bodies, baseline))
                try:
                    out, err = client.communicate(timeout=PATIENCE_SECONDS)
                except subprocess.TimeoutExpired:
                    client.kill()
                    out, err = client.communicate()
                try:
                    r = json.loads(out.splitlines()[-1])
                except (ValueError, IndexError):
                    r = None
                check("%s: ran its calls" % name, client.returncode == 0 and r, err[-2000:])
                if not r:
                    continue
                exchange.append(name)
                for (call_name, args), call in zip(calls, r["calls"]):
                    exchange.append("%s %s" % (call_name, json.dumps(args)))
                    exchange.extend("  " + line for line in (call.get("text") or json.dumps(call)).splitlines())
                check("%s: in revision %s" % (name, revision), r["protocolVersion"] == revision, r["protocolVersion"])
                listed, untargeted, profiled, again, report = r["calls"]
                got = sorted(t["pid"] for t in (listed["structured"] or {}).get("targets", []))
                check("%s: list_targets lists both workers" % name, got == pids, listed["text"])
                check("%s: profiler_start without target fails, naming the pids and the target argument" % name,
                      untargeted["isError"] and all(str(p) in untargeted["text"] for p in pids)
                      and "target" in untargeted["text"], untargeted["text"])
                sc = profiled.get("structured") or {}
                check("%s: profiler_start with target and seconds returns the worker's profile (%s samples)"
                      % (name, sc.get("samples")), not profiled["isError"] and sc.get("samples", 0) > 0,
                      profiled["text"])
                names = [f["name"] for f in sc.get("top", [])]
                check("%s: the handler's function is among the top functions" % name,
                      any(re.search(r"\bhandler\.lua:\d+", n) for n in names), profiled["text"])
                check("%s: progress notifications came while it waited (%d)" % (name, len(profiled["progress"])),
                      len(profiled["progress"]) >= 1, profiled["progress"])
                check("%s: the profile was written (%s)" % (name, sc.get("path")), os.path.isfile(sc.get("path") or ""))
                link = (profiled.get("links") or [{}])[0]
                read = [x for x in r["reads"] if x["uri"] == link.get("uri")]
                with open(sc.get("path") or os.devnull) as f:
                    written = f.read()
                check("%s: the profile is a resource, read as the file written" % name,
                      read and read[0].get("contents", [{}])[0].get("text") == written, read)
                check("%s: profiler_stop with nothing running is an error pointing to report" % name,
                      again["isError"] and "no profiling session is running" in again["text"]
                      and "call report" in again["text"], again["text"])
                check("%s: report names the profile it is of" % name,
                      not report["isError"] and report["text"].startswith("pid %d: the last profile, of the session "
                                                                          "started " % target), report["text"])
            after = [fetch(conn, "/work") for _ in range(3)] + [(200, get(port, "/work")) for _ in range(3)]
            check("the workers serve the same answers after the sessions",
                  all(a == (200, baseline) for a in after), "after: %s, before: %r" % (after, baseline))
            # The inspector's CLI lists the workers and reads the last
            # profile, in both eras.
            inspector = clients["inspector"]

            def inspect(era, *args):
                env_args = []
                for k in ("LUA_PATH", "LUA_CPATH", "TECS_PROFILE_DIR"):
                    env_args += ["-e", "%s=%s" % (k, cli_env[k])]
                env_of = dict(cli_env, PATH=os.path.dirname(clients["node"]) + ":" + cli_env.get("PATH", ""),
                              MCP_CATALOG_PATH=prefix + "inspector-catalog.json",
                              MCP_CLIENT_CONFIG_PATH=prefix + "inspector-client.json")
                rc = subprocess.run([inspector, "--cli", "--protocol-era", era, "--format", "json", "-q"] + env_args
                                    + ["luajit", repo + "/bin/tecs-profile", "mcp"] + list(args),
                                    env=env_of, capture_output=True, text=True, timeout=PATIENCE_SECONDS)
                try:
                    return json.loads(rc.stdout).get("result"), rc.stdout + rc.stderr
                except ValueError:
                    return None, rc.stdout + rc.stderr
            for era in ("legacy", "modern"):
                listed, said = inspect(era, "--method", "tools/call", "--tool-name", "list_targets")
                kinds = sorted((t["pid"], t["kind"]) for t in ((listed or {}).get("structuredContent") or {})
                               .get("targets", []))
                check("the inspector (%s, %s) lists both workers" % (clients["inspector_version"], era),
                      kinds == [(p, "nginx") for p in pids], said)
                report, said = inspect(era, "--method", "tools/call", "--tool-name", "report", "--tool-arg",
                                       "target=%d" % target, "--tool-arg", "by=function")
                text = ((report or {}).get("content") or [{}])[0].get("text", "")
                check("the inspector's report (%s) names the handler's function" % era,
                      report and not report.get("isError") and re.search(r"\bhandler\.lua:\d+", text), said)
        conn.close()
        conn.close()

        # A reload: the old workers close their channels as they exit (the
        # poll timer's last, premature run), the new ones listen.
        nginx.send_signal(signal.SIGHUP)
        deadline = time.time() + PATIENCE_SECONDS
        while time.time() < deadline and any(alive(pid) for pid in pids):
            time.sleep(0.1)
        left = [f for pid in pids for f in ("%d.json" % pid, "%d.sock" % pid) if os.path.exists(ctl + "/" + f)]
        check("after a reload the old workers' sockets and entries are gone", pids and not left, "left: %s" % left)
        fresh = []
        while time.time() < deadline:
            out = subprocess.run(cli + ["targets"], env=cli_env, capture_output=True, text=True).stdout
            fresh = [int(line.split()[0]) for line in out.splitlines()[1:]]
            if len(fresh) >= WORKERS:
                break
            time.sleep(0.1)
        check("after a reload tecs-profile targets lists the %d new workers" % WORKERS,
              len(fresh) == WORKERS and not set(fresh) & set(pids), "before: %s, after: %s" % (pids, fresh))
        check("the new workers serve the same answers", get(port, "/work") == baseline)

        with open(prefix + "logs/error.log") as f:
            errors = [l for l in f if "[error]" in l or "[alert]" in l or "[crit]" in l]
        check("no errors in nginx's log", not errors, "".join(errors[:5]))
finally:
    if nginx.poll() is None:
        nginx.send_signal(signal.SIGQUIT)  # graceful stop of the master we started
        try:
            nginx.wait(timeout=10)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait()
    if os.path.isdir(ctl):
        left = sorted(os.listdir(ctl))
        check("the workers' sockets and discovery entries are gone after nginx stops",
              not [f for f in left if re.match(r"^\d+\.(sock|json)$", f)], "left: %s" % left)
    if all(ok for _, ok, _ in results):
        shutil.rmtree(prefix, ignore_errors=True)

print("1..%d" % len(results))
for i, (name, ok, detail) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
    if not ok and detail:
        for line in str(detail).splitlines():
            print("# " + line)
if exchange:
    print("# the MCP exchange:")
    for line in exchange:
        print("# " + line)
if not results or not all(ok for _, ok, _ in results):
    if results:
        print("# nginx prefix kept for inspection: " + prefix)
    sys.exit(1)
