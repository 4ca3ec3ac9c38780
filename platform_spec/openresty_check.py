"""tecs-profile inside nginx with lua-nginx-module (OpenResty's core).

Runs nginx (unpacked by scripts/nginx-lua.sh) on 127.0.0.1 with two workers
and examples/openresty/worker_profile.lua: /profile/start turns profiling on
in every worker, a bounded burst of requests exercises
examples/openresty/handler.lua, /profile/stop makes every worker write its own
profile. Prints TAP. Usage: openresty_check.py NGINX_ROOT (from the repository
root, after make build).
"""
import glob
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

results = []


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


prefix = tempfile.mkdtemp(prefix="tecs-nginx-") + "/"
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
  init_worker_by_lua_block {{ ngx.timer.every(0.1, require("worker_profile").poll) }}
  server {{
    listen 127.0.0.1:{port};
    location = /profile/start {{ content_by_lua_block {{ require("worker_profile").want(true) }} }}
    location = /profile/stop  {{ content_by_lua_block {{ require("worker_profile").want(false) }} }}
    location = /work          {{ content_by_lua_block {{ require("handler").run() }} }}
  }}
}}
""".format(modules=modules, user="user root;" if os.getuid() == 0 else "", workers=WORKERS,
           prefix=prefix, lua_path=lua_path, repo=repo, port=port)
with open(prefix + "nginx.conf", "w") as f:
    f.write(conf)

env = dict(os.environ)
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
    if all(ok for _, ok, _ in results):
        shutil.rmtree(prefix, ignore_errors=True)

print("1..%d" % len(results))
for i, (name, ok, detail) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
    if not ok and detail:
        for line in str(detail).splitlines():
            print("# " + line)
if not results or not all(ok for _, ok, _ in results):
    if results:
        print("# nginx prefix kept for inspection: " + prefix)
    sys.exit(1)
